/* cli.c -- parsing gpumem's command line (cli.h): options, SCRIPT or
   -c / -m, the script's arguments.  No I/O, no exit: main.c acts on the
   result, and tests/fuzz/fuzz-cli.c throws any argument vector at it.  */

#include "config.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The value of a long option without a short one.  */
enum { OPT_MEMORY_REPORT = 0x100, OPT_CONFIG };

/* --config and --config=json: the report of gpumem.show_config, which
   the Python layer makes, run as -c COMMAND so that the program and
   the module print the same.  */
static const char config_text_command[] =
  "import gpumem; gpumem.show_config()";
static const char config_json_command[] =
  "import json, gpumem; "
  "print(json.dumps(gpumem.show_config(as_dict=True), indent=2))";

/* Records a usage error in OPTIONS; returns GM_CLI_USAGE_ERROR.  */
static gm_cli_status
usage_error (gm_cli_options *options, const char *fmt, const char *arg)
{
  options->error_fmt = fmt;
  options->error_arg = arg;
  return GM_CLI_USAGE_ERROR;
}

gm_cli_status
gm_cli_parse (int argc, char **argv, gm_cli_options *options)
{
  static const struct option long_options[] = {
    {"backend", required_argument, NULL, 'b'},
    {"list-devices", no_argument, NULL, 'l'},
    {"list-kernels", no_argument, NULL, 'k'},
    {"stats", no_argument, NULL, 's'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {"kernels", required_argument, NULL, 'K'},
    {"memory-report", required_argument, NULL, OPT_MEMORY_REPORT},
    {"config", optional_argument, NULL, OPT_CONFIG},
    {NULL, 0, NULL, 0}
  };
  const char *env_backend = getenv ("GPUMEM_BACKEND");
  int opt;

  memset (options, 0, sizeof *options);
  options->backend = GM_BACKEND_AUTO;
  if (env_backend != NULL && *env_backend != '\0'
      && !gm_backend_parse_name (env_backend, &options->backend))
    return usage_error (options, "GPUMEM_BACKEND: unknown backend '%s' "
                        "(choose cuda, host or auto)", env_backend);

  options->kernels_env = getenv ("GPUMEM_KERNELS");
  options->run.mode = GM_RUN_STDIN;
  /* 0, not 1: glibc then starts getopt afresh, as a second call needs.  */
  optind = 0;
  opterr = 0;
  /* '+': options end at SCRIPT, whose own options go to the script.
     -c and -m end them too, as in python.  */
  while (options->run.mode == GM_RUN_STDIN
         && (opt = getopt_long (argc, argv, "+:b:c:m:ilksqhVK:", long_options,
                                NULL)) != -1)
    switch (opt)
      {
      case 'b':
        if (!gm_backend_parse_name (optarg, &options->backend))
          return usage_error (options, "unknown backend '%s' (choose cuda, "
                              "host or auto)", optarg);
        break;
      case 'c':
        options->run.mode = GM_RUN_COMMAND;
        options->run.target = optarg;
        break;
      case 'm':
        options->run.mode = GM_RUN_MODULE;
        options->run.target = optarg;
        break;
      case 'i':
        options->run.inspect = true;
        break;
      case 'l':
        options->show_devices = true;
        break;
      case 'k':
        options->show_kernels = true;
        break;
      case 's':
        options->stats = true;
        break;
      case 'q':
        options->quiet = true;
        break;
      case OPT_MEMORY_REPORT:
        options->memory_report = optarg;
        break;
      case OPT_CONFIG:
        if (optarg == NULL || strcmp (optarg, "text") == 0)
          options->run.target = config_text_command;
        else if (strcmp (optarg, "json") == 0)
          options->run.target = config_json_command;
        else
          return usage_error (options, "--config: unknown format '%s' "
                              "(choose text or json)", optarg);
        options->run.mode = GM_RUN_COMMAND;
        break;
      case 'K':
        if (options->nkernel_paths == GM_CLI_MAX_KERNELS)
          return usage_error (options, "more than 64 --kernels options "
                              "(join plugins in GPUMEM_KERNELS%s)", "");
        options->kernel_paths[options->nkernel_paths++] = optarg;
        break;
      case 'h':
        return GM_CLI_HELP;
      case 'V':
        return GM_CLI_VERSION;
      case ':':
        {
          const char *given = argv[optind - 1];
          options->error_option[0] = '-';
          options->error_option[1] = (char) optopt;
          return usage_error (options, "option '%s' needs an argument",
                              strncmp (given, "--", 2) == 0
                              ? given : options->error_option);
        }
      default:
        options->error_option[0] = '-';
        options->error_option[1] = (char) optopt;
        return usage_error (options, "unknown option '%s'",
                            optopt ? options->error_option
                                   : argv[optind - 1]);
      }

  if (options->run.mode == GM_RUN_STDIN && optind < argc)
    {
      if (strcmp (argv[optind], "-") == 0)
        options->run.stdin_is_dash = true;
      else
        {
          options->run.mode = GM_RUN_FILE;
          options->run.target = argv[optind];
        }
      optind++;
    }
  options->run.argc = argc - optind;
  options->run.argv = argv + optind;
  return GM_CLI_RUN;
}
