/* cli.h -- parsing gpumem's command line.

   The parser does no I/O and never exits: main.c prints what it says
   and ends the process, and the libFuzzer target tests/fuzz/fuzz-cli.c
   calls it with any argument vector at all.  */

#ifndef GM_CLI_H
#define GM_CLI_H

#include <stdbool.h>

#include "gm.h"
#include "gm-interp.h"

/* What gm_cli_parse found.  */
typedef enum gm_cli_status
{
  GM_CLI_RUN,            /* go on: the options say what to run */
  GM_CLI_HELP,           /* -h or --help: print the usage, exit 0 */
  GM_CLI_VERSION,        /* -V or --version: print the version, exit 0 */
  GM_CLI_USAGE_ERROR     /* print "gpumem: " and ERROR_FMT with ERROR_ARG,
                            then the --help hint; exit 2 */
} gm_cli_status;

/* At most this many --kernels options.  */
#define GM_CLI_MAX_KERNELS 64

typedef struct gm_cli_options
{
  gm_backend_choice backend;     /* --backend, else GPUMEM_BACKEND, else auto */
  gm_run_options run;            /* what to run; run.python is left NULL */
  bool show_devices;             /* -l */
  bool show_kernels;             /* -k */
  bool stats;                    /* -s */
  bool quiet;                    /* -q */
  const char *memory_report;     /* --memory-report=FILE, or NULL */
  const char *kernels_env;       /* GPUMEM_KERNELS, or NULL */
  const char *kernel_paths[GM_CLI_MAX_KERNELS];   /* --kernels=PATH, in order */
  int nkernel_paths;
  const char *error_fmt;         /* GM_CLI_USAGE_ERROR: a format with one %s */
  const char *error_arg;         /* its argument: in ARGV, the environment, or
                                    ERROR_OPTION below */
  char error_option[3];          /* "-x", the short option in error */
} gm_cli_options;

/* Parses ARGV (ARGC entries, ARGV[ARGC] NULL) and the GPUMEM_BACKEND
   and GPUMEM_KERNELS environment variables into *OPTIONS, as the gpumem(1) manual page
   says: options end at SCRIPT, and at -c COMMAND or -m MODULE, whose
   following arguments go to the script.  Returns what to do next;
   OPTIONS holds pointers into ARGV, the environment and itself.  May be
   called more than once (it resets getopt).  */
gm_cli_status gm_cli_parse (int argc, char **argv, gm_cli_options *options);

#endif /* GM_CLI_H */
