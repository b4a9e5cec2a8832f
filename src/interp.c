/* interp.c -- the embedded interpreter's life: configure, run, finalize.

   gpumem runs a script as the python command does, through CPython's own
   Py_RunMain: sys.argv, sys.path[0], tracebacks, SystemExit codes, -i,
   the console and KeyboardInterrupt all behave as python's.  What is ours
   is the built-in module gpumem, registered before initialization, and
   the choice of Python environment.  */

#include "gm-python.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

PyMODINIT_FUNC PyInit_gpumem (void);

/* Reports a failed PyStatus and returns the exit status for it.  */
static int
status_exit (PyConfig *config, PyStatus status)
{
  PyConfig_Clear (config);
  if (PyStatus_IsExit (status))
    return status.exitcode;
  fprintf (stderr, "gpumem: cannot start Python: %s%s%s\n",
           status.func ? status.func : "", status.func ? ": " : "",
           status.err_msg ? status.err_msg : "unknown error");
  return 1;
}

/* Sets config->argv to ARGV0 followed by the script's arguments.  */
static PyStatus
set_argv (PyConfig *config, const char *argv0, const gm_run_options *options)
{
  PyStatus status;
  char **argv = calloc ((size_t) options->argc + 1, sizeof *argv);

  if (argv == NULL)
    return PyStatus_NoMemory ();
  argv[0] = (char *) argv0;
  for (int i = 0; i < options->argc; i++)
    argv[i + 1] = options->argv[i];
  status = PyConfig_SetBytesArgv (config, options->argc + 1, argv);
  free (argv);
  return status;
}

int
gm_interp_run (const gm_run_options *options)
{
  PyConfig config;
  PyStatus status;
  const char *argv0 = "";

  if (PyImport_AppendInittab ("gpumem", PyInit_gpumem) != 0)
    {
      fputs ("gpumem: cannot register the gpumem module\n", stderr);
      return 1;
    }

  PyConfig_InitPythonConfig (&config);
  config.parse_argv = 0;
  config.install_signal_handlers = 1;
  config.inspect = options->inspect;

  /* The interpreter path decides the environment: getpath finds a
     virtual environment's pyvenv.cfg beside it and takes its
     site-packages, as running that interpreter would.  */
  status = PyConfig_SetBytesString (&config, &config.program_name,
                                    options->python);
  if (PyStatus_Exception (status))
    return status_exit (&config, status);
  status = PyConfig_SetBytesString (&config, &config.executable,
                                    options->python);
  if (PyStatus_Exception (status))
    return status_exit (&config, status);

  switch (options->mode)
    {
    case GM_RUN_FILE:
      argv0 = options->target;
      status = PyConfig_SetBytesString (&config, &config.run_filename,
                                        options->target);
      break;
    case GM_RUN_COMMAND:
      argv0 = "-c";
      status = PyConfig_SetBytesString (&config, &config.run_command,
                                        options->target);
      break;
    case GM_RUN_MODULE:
      argv0 = "-m";
      status = PyConfig_SetBytesString (&config, &config.run_module,
                                        options->target);
      break;
    case GM_RUN_STDIN:
      argv0 = options->stdin_is_dash ? "-" : "";
      break;
    }
  if (PyStatus_Exception (status))
    return status_exit (&config, status);
  status = set_argv (&config, argv0, options);
  if (PyStatus_Exception (status))
    return status_exit (&config, status);

  status = Py_InitializeFromConfig (&config);
  if (PyStatus_Exception (status))
    return status_exit (&config, status);
  PyConfig_Clear (&config);

  /* Runs the target, prints an uncaught exception's traceback, turns
     SystemExit into its code, and finalizes the interpreter (120 when
     that fails), as python does.  */
  return Py_RunMain ();
}
