/* gm-interp.h -- running the embedded interpreter (interp.c): what the
   program asks of the Python layer, in plain C.  */

#ifndef GM_INTERP_H
#define GM_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The interpreter (interp.c).  */
typedef enum gm_run_mode
{
  GM_RUN_STDIN,     /* SCRIPT omitted or "-": standard input or console */
  GM_RUN_FILE,
  GM_RUN_COMMAND,
  GM_RUN_MODULE
} gm_run_mode;

typedef struct gm_run_options
{
  gm_run_mode mode;
  const char *target;     /* file, command or module; NULL for stdin */
  int argc;               /* arguments after the target */
  char **argv;
  bool inspect;           /* -i */
  bool stdin_is_dash;     /* SCRIPT was "-" */
  const char *python;     /* interpreter whose environment to use */
} gm_run_options;

/* Runs Python as OPTIONS say and returns the exit status: 0, the
   script's SystemExit code, 1 for an uncaught exception (its traceback
   printed), 2 when the script cannot be opened, 120 when finalizing
   failed.  Python is finalized on return.  *INTERRUPTED tells whether
   the script ended by an uncaught KeyboardInterrupt, which python
   answers by ending itself with SIGINT.  The interactive console ends
   the process itself on SystemExit, as CPython's does.  */
int gm_interp_run (const gm_run_options *options, bool *interrupted);

#endif /* GM_INTERP_H */
