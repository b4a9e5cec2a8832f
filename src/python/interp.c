/* interp.c -- the embedded interpreter's life: configure, run, finalize.

   gpumem runs a script as the python command does: sys.argv, sys.path[0],
   tracebacks, SystemExit codes, -i and the console behave as python's.
   It runs the target itself rather than through Py_RunMain, because
   CPython's own runners end the process on SystemExit (PyErr_Print calls
   exit ()), and gpumem has work to do after the script: --stats, and the
   CUDA teardown that must follow Py_FinalizeEx.  */

#include "gm-python.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Whether SCRIPT is a folder or a zip file that python runs through
   the __main__.py inside it (a path entry that an import hook takes):
   1, 0 for a plain file (or none), -1 with an exception.  */
static int
is_main_importer (const char *script)
{
  PyObject *path = PyUnicode_DecodeFSDefault (script), *importer;
  int result;

  if (path == NULL)
    return -1;
  importer = PyImport_GetImporter (path);
  Py_DECREF (path);
  if (importer == NULL)
    return -1;
  result = importer != Py_None;
  Py_DECREF (importer);
  return result;
}

/* Puts PATH first on sys.path, as python does for the script's folder
   ("" for -c and standard input, the working folder for -m, the target
   itself when it is a folder or zip file run through its __main__.py,
   MAIN_IMPORTER), unless safe_path (-P, PYTHONSAFEPATH) asks not to.
   0 or -1.  */
static int
set_sys_path0 (const gm_run_options *options, bool main_importer)
{
  char buf[PATH_MAX];
  const char *path = "";
  PyObject *sys_path, *entry, *flags, *safe;
  int result, is_safe;

  flags = PySys_GetObject ("flags");
  safe = flags ? PyObject_GetAttrString (flags, "safe_path") : NULL;
  is_safe = safe ? PyObject_IsTrue (safe) : 0;
  Py_XDECREF (safe);
  PyErr_Clear ();
  if (is_safe > 0)
    return 0;

  if (main_importer)
    path = options->target;
  else if (options->mode == GM_RUN_FILE)
    {
      /* The folder of the real file, symbolic links resolved.  */
      char *slash;
      if (realpath (options->target, buf) == NULL)
        snprintf (buf, sizeof buf, "%s", options->target);
      slash = strrchr (buf, '/');
      if (slash == NULL)
        buf[0] = '\0';
      else if (slash == buf)
        buf[1] = '\0';
      else
        *slash = '\0';
      path = buf;
    }
  else if (options->mode == GM_RUN_MODULE)
    {
      if (getcwd (buf, sizeof buf) == NULL)
        buf[0] = '\0';
      path = buf;
    }
  sys_path = PySys_GetObject ("path");
  if (sys_path == NULL || !PyList_Check (sys_path))
    return 0;
  entry = PyUnicode_DecodeFSDefault (path);
  if (entry == NULL)
    return -1;
  result = PyList_Insert (sys_path, 0, entry);
  Py_DECREF (entry);
  return result;
}

/* Turns the pending exception into an exit status: SystemExit's code
   (None: 0, an int: itself, anything else: printed, 1), else the
   traceback printed as python prints it, and 1.  Sets *INTERRUPTED for
   an uncaught KeyboardInterrupt.  */
static int
handle_exception (bool *interrupted)
{
  PyObject *type, *value, *traceback, *code;
  int status = 1;

  if (!PyErr_ExceptionMatches (PyExc_SystemExit))
    {
      *interrupted = PyErr_ExceptionMatches (PyExc_KeyboardInterrupt);
      PyErr_Print ();
      return 1;
    }
  PyErr_Fetch (&type, &value, &traceback);
  PyErr_NormalizeException (&type, &value, &traceback);
  code = value ? PyObject_GetAttrString (value, "code") : NULL;
  PyErr_Clear ();
  if (code == NULL || code == Py_None)
    status = 0;
  else if (PyLong_Check (code))
    {
      int overflow = 0;
      long n = PyLong_AsLongAndOverflow (code, &overflow);
      status = overflow ? -1 : (int) n;
      PyErr_Clear ();
    }
  else
    {
      /* As python: the object is written to sys.stderr, status 1.  */
      PyObject *err = PySys_GetObject ("stderr");
      PyObject *out = PySys_GetObject ("stdout");
      if (out != NULL && out != Py_None)
        {
          PyObject *r = PyObject_CallMethod (out, "flush", NULL);
          Py_XDECREF (r);
        }
      if (err != NULL && err != Py_None
          && PyFile_WriteObject (code, err, Py_PRINT_RAW) == 0)
        PyFile_WriteString ("\n", err);
      else
        {
          PyErr_Clear ();
          PyObject_Print (code, stderr, Py_PRINT_RAW);
          fputc ('\n', stderr);
        }
      PyErr_Clear ();
    }
  Py_XDECREF (code);
  Py_XDECREF (type);
  Py_XDECREF (value);
  Py_XDECREF (traceback);
  return status;
}

/* Runs the file PATH (or standard input when PATH is NULL) in
   __main__'s namespace.  New reference or NULL.  */
static PyObject *
run_file (const char *path, PyObject *globals, PyCompilerFlags *flags)
{
  FILE *fp = path ? fopen (path, "rb") : stdin;
  PyObject *name;

  if (fp == NULL)
    {
      fprintf (stderr, "gpumem: can't open file '%s': [Errno %d] %s\n",
               path, errno, strerror (errno));
      return NULL;
    }
  name = PyUnicode_DecodeFSDefault (path ? path : "<stdin>");
  if (name == NULL || PyDict_SetItemString (globals, "__file__", name) < 0
      || PyDict_SetItemString (globals, "__cached__", Py_None) < 0)
    {
      Py_XDECREF (name);
      if (path)
        fclose (fp);
      return NULL;
    }
  Py_DECREF (name);
  if (path == NULL)
    PyDict_DelItemString (globals, "__file__");
  return PyRun_FileExFlags (fp, path ? path : "<stdin>", Py_file_input,
                            globals, globals, path != NULL, flags);
}

/* Runs module NAME as __main__ with runpy, as python -m does (ALTER_ARGV:
   sys.argv[0] becomes the module's file).  New reference or NULL.  */
static PyObject *
run_main_module (const char *name, int alter_argv)
{
  PyObject *runpy = PyImport_ImportModule ("runpy"), *result;

  if (runpy == NULL)
    return NULL;
  result = PyObject_CallMethod (runpy, "_run_module_as_main", "si", name,
                                alter_argv);
  Py_DECREF (runpy);
  return result;
}

/* The interactive console on standard input, with line editing where
   the readline module exists.  Leaving it with exit() or EOF returns
   normally; SystemExit from it ends the process, as python's does.  */
static void
run_console (PyCompilerFlags *flags)
{
  PyObject *readline;

  if (isatty (fileno (stdin)))
    {
      readline = PyImport_ImportModule ("readline");
      if (readline == NULL)
        PyErr_Clear ();
      Py_XDECREF (readline);
    }
  PyRun_InteractiveLoopFlags (stdin, "<stdin>", flags);
}

int
gm_interp_run (const gm_run_options *options, bool *interrupted)
{
  PyCompilerFlags flags = _PyCompilerFlags_INIT;
  PyObject *main_module, *globals, *result = NULL;
  PyConfig config;
  PyStatus status;
  const char *argv0 = "";
  int exit_status = 0, main_importer = 0;
  bool console = false;

  *interrupted = false;
  if (PyImport_AppendInittab ("gpumem", PyInit_gpumem) != 0)
    {
      fputs ("gpumem: cannot register the gpumem module\n", stderr);
      return 1;
    }

  PyConfig_InitPythonConfig (&config);
  config.parse_argv = 0;
  config.install_signal_handlers = 1;

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
      break;
    case GM_RUN_COMMAND:
      argv0 = "-c";
      break;
    case GM_RUN_MODULE:
      argv0 = "-m";
      break;
    case GM_RUN_STDIN:
      argv0 = options->stdin_is_dash ? "-" : "";
      console = isatty (fileno (stdin));
      break;
    }
  status = set_argv (&config, argv0, options);
  if (PyStatus_Exception (status))
    return status_exit (&config, status);
  /* The console's own banner and prompts, as python's.  */
  config.interactive = console || options->inspect;

  status = Py_InitializeFromConfig (&config);
  if (PyStatus_Exception (status))
    return status_exit (&config, status);
  PyConfig_Clear (&config);

  main_module = PyImport_AddModule ("__main__");
  globals = main_module ? PyModule_GetDict (main_module) : NULL;
  if (options->mode == GM_RUN_FILE)
    main_importer = is_main_importer (options->target);
  if (globals == NULL || main_importer < 0
      || set_sys_path0 (options, main_importer > 0) < 0)
    {
      PyErr_Print ();
      exit_status = 1;
      goto finalize;
    }

  switch (options->mode)
    {
    case GM_RUN_FILE:
      if (main_importer > 0)
        {
          /* As python: the __main__ module found on the path entry just
             put first, argv left as it is.  */
          result = run_main_module ("__main__", 0);
          break;
        }
      result = run_file (options->target, globals, &flags);
      if (result == NULL && !PyErr_Occurred ())
        {
          exit_status = 2;     /* python's status for a missing file */
          goto inspect;
        }
      break;
    case GM_RUN_COMMAND:
      result = PyRun_StringFlags (options->target, Py_file_input, globals,
                                  globals, &flags);
      break;
    case GM_RUN_MODULE:
      result = run_main_module (options->target, 1);
      break;
    case GM_RUN_STDIN:
      if (console)
        {
          run_console (&flags);
          goto finalize;
        }
      result = run_file (NULL, globals, &flags);
      break;
    }
  if (result == NULL)
    exit_status = handle_exception (interrupted);
  Py_XDECREF (result);

inspect:
  if (options->inspect)
    {
      /* -i: the console follows whatever the target did.  */
      *interrupted = false;
      run_console (&flags);
    }

finalize:
  if (Py_FinalizeEx () < 0)
    exit_status = 120;
  return exit_status;
}
