/* embed.c -- the embedding C API (include/gpumem/embed.h): another
   program's own kernels, gpumem's backend and interpreter started and
   ended by that program, Python code run with status codes.

   The gpumem command (main.c, interp.c) runs one script and ends the
   process; here the program calls in as often as it likes between
   gm_embed_init and gm_embed_finish.  MPI (gpumem.comm) is not started:
   that belongs to the gpumem command.  */

#include "gm-python.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpumem/embed.h"
#include "plugin.h"

static enum { PHASE_NEW, PHASE_RUNNING, PHASE_DONE } phase;
static char last_error[GM_ERROR_MESSAGE_MAX + 256];

static gm_embed_status
fail (gm_embed_status status, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static gm_embed_status
fail (gm_embed_status status, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (last_error, sizeof last_error, fmt, ap);
  va_end (ap);
  return status;
}

const char *
gm_embed_last_error (void)
{
  return last_error;
}

static gm_embed_status
not_running (const char *what)
{
  return fail (GM_EMBED_STATE, "%s: gpumem is %s", what,
               phase == PHASE_NEW ? "not started (call gm_embed_init first)"
                                  : "finished (gm_embed_finish was called)");
}

gm_embed_status
gm_embed_register_kernels (const gm_plugin_info *table, const char *origin)
{
  gm_plugin *plugin;

  if (phase != PHASE_NEW)
    return fail (GM_EMBED_STATE, "gm_embed_register_kernels: kernels are "
                 "registered before gm_embed_init");
  if (gm_plugin_register (table, origin ? origin : "(program)", &plugin)
      != GM_OK)
    return fail (GM_EMBED_KERNELS, "%s", gm_last_error ()->message);
  gm_plugin_preload (plugin);
  return GM_EMBED_OK;
}

gm_embed_status
gm_embed_load_kernels (const char *paths)
{
  if (phase != PHASE_NEW)
    return fail (GM_EMBED_STATE, "gm_embed_load_kernels: kernels are "
                 "loaded before gm_embed_init");
  if (gm_plugin_preload_list (paths) != GM_OK)
    return fail (GM_EMBED_KERNELS, "%s", gm_last_error ()->message);
  return GM_EMBED_OK;
}

gm_embed_status
gm_embed_init (const gm_embed_options *options)
{
  static const gm_embed_options defaults = {GM_EMBED_BACKEND_AUTO, 0, NULL,
                                            0, NULL};
  gm_backend_choice choice;
  PyConfig config;
  PyStatus status;
  const char *python;
  char *empty_argv[] = {(char *) "", NULL};

  if (options == NULL)
    options = &defaults;
  if (phase != PHASE_NEW)
    return fail (GM_EMBED_STATE, "gm_embed_init: gpumem was started "
                 "already in this process");
  if (Py_IsInitialized ())
    return fail (GM_EMBED_STATE, "gm_embed_init: Python already runs in "
                 "this process; gpumem starts its own interpreter");
  switch (options->backend)
    {
    case GM_EMBED_BACKEND_AUTO: choice = GM_BACKEND_AUTO; break;
    case GM_EMBED_BACKEND_CUDA: choice = GM_BACKEND_CUDA; break;
    case GM_EMBED_BACKEND_HOST: choice = GM_BACKEND_HOST; break;
    default:
      return fail (GM_EMBED_USAGE, "gm_embed_init: unknown backend %d",
                   (int) options->backend);
    }
  if (options->argc < 0 || (options->argc > 0 && options->argv == NULL))
    return fail (GM_EMBED_USAGE, "gm_embed_init: argc %d without argv",
                 options->argc);
  if (gm_backend_init (choice, options->quiet != 0) != GM_OK)
    return fail (GM_EMBED_UNAVAILABLE, "%s", gm_last_error ()->message);
  if (PyImport_AppendInittab ("gpumem", PyInit_gpumem) != 0)
    {
      gm_backend_shutdown ();
      return fail (GM_EMBED_STATE, "gm_embed_init: cannot register the "
                   "gpumem module");
    }

  python = options->python ? options->python : GM_PYTHON_EXECUTABLE;
  PyConfig_InitPythonConfig (&config);
  config.parse_argv = 0;
  /* The program owns its signals.  */
  config.install_signal_handlers = 0;
  status = PyConfig_SetBytesString (&config, &config.program_name, python);
  if (!PyStatus_Exception (status))
    status = PyConfig_SetBytesString (&config, &config.executable, python);
  if (!PyStatus_Exception (status))
    status = options->argc > 0
             ? PyConfig_SetBytesArgv (&config, options->argc, options->argv)
             : PyConfig_SetBytesArgv (&config, 1, empty_argv);
  if (!PyStatus_Exception (status))
    status = Py_InitializeFromConfig (&config);
  PyConfig_Clear (&config);
  if (PyStatus_Exception (status))
    {
      gm_backend_shutdown ();
      return fail (GM_EMBED_UNAVAILABLE, "cannot start Python: %s%s%s",
                   status.func ? status.func : "", status.func ? ": " : "",
                   status.err_msg ? status.err_msg : "unknown error");
    }
  phase = PHASE_RUNNING;
  return GM_EMBED_OK;
}

/* The status for the exception pending after running code: SystemExit
   with 0 or None is success; anything else is printed as python prints
   it and recorded.  Clears the exception.  */
static gm_embed_status
handle_exception (void)
{
  PyObject *type, *value, *traceback, *text;
  gm_embed_status result = GM_EMBED_EXCEPTION;

  PyErr_Fetch (&type, &value, &traceback);
  PyErr_NormalizeException (&type, &value, &traceback);
  if (type != NULL
      && PyErr_GivenExceptionMatches (type, PyExc_SystemExit))
    {
      PyObject *code = value ? PyObject_GetAttrString (value, "code") : NULL;
      PyErr_Clear ();
      if (code == NULL || code == Py_None
          || (PyLong_Check (code) && PyLong_AsLong (code) == 0))
        result = GM_EMBED_OK;
      else
        {
          PyObject *repr = PyObject_Str (code);
          fail (GM_EMBED_EXCEPTION, "SystemExit: %s",
                repr ? PyUnicode_AsUTF8 (repr) : "?");
          Py_XDECREF (repr);
        }
      PyErr_Clear ();
      Py_XDECREF (code);
      Py_XDECREF (type);
      Py_XDECREF (value);
      Py_XDECREF (traceback);
      return result;
    }
  text = value ? PyObject_Str (value) : NULL;
  fail (GM_EMBED_EXCEPTION, "%s: %s",
        type ? ((PyTypeObject *) type)->tp_name : "exception",
        text && PyUnicode_AsUTF8 (text) ? PyUnicode_AsUTF8 (text) : "");
  Py_XDECREF (text);
  PyErr_Clear ();
  /* The traceback, to standard error, as python prints it.  */
  PyErr_Restore (type, value, traceback);
  PyErr_Print ();
  return result;
}

gm_embed_status
gm_embed_run_string (const char *code)
{
  PyObject *main_module, *globals, *result;

  if (phase != PHASE_RUNNING)
    return not_running ("gm_embed_run_string");
  if (code == NULL)
    return fail (GM_EMBED_USAGE, "gm_embed_run_string: CODE is NULL");
  main_module = PyImport_AddModule ("__main__");
  globals = main_module ? PyModule_GetDict (main_module) : NULL;
  if (globals == NULL)
    return handle_exception ();
  result = PyRun_String (code, Py_file_input, globals, globals);
  if (result == NULL)
    return handle_exception ();
  Py_DECREF (result);
  return GM_EMBED_OK;
}

gm_embed_status
gm_embed_run_file (const char *path)
{
  PyObject *main_module, *globals, *result, *name, *folder, *sys_path;
  char real[PATH_MAX], *slash;
  FILE *fp;

  if (phase != PHASE_RUNNING)
    return not_running ("gm_embed_run_file");
  if (path == NULL)
    return fail (GM_EMBED_USAGE, "gm_embed_run_file: PATH is NULL");
  fp = fopen (path, "rb");
  if (fp == NULL)
    return fail (GM_EMBED_USAGE, "can't open file '%s': %s", path,
                 strerror (errno));
  main_module = PyImport_AddModule ("__main__");
  globals = main_module ? PyModule_GetDict (main_module) : NULL;
  name = PyUnicode_DecodeFSDefault (path);
  if (realpath (path, real) == NULL)
    snprintf (real, sizeof real, "%s", path);
  slash = strrchr (real, '/');
  if (slash != NULL)
    *(slash == real ? slash + 1 : slash) = '\0';
  else
    real[0] = '\0';
  folder = PyUnicode_DecodeFSDefault (real);
  sys_path = PySys_GetObject ("path");
  if (globals == NULL || name == NULL || folder == NULL
      || PyDict_SetItemString (globals, "__file__", name) < 0
      || (sys_path != NULL && PyList_Check (sys_path)
          && PyList_Insert (sys_path, 0, folder) < 0))
    {
      fclose (fp);
      Py_XDECREF (name);
      Py_XDECREF (folder);
      return handle_exception ();
    }
  Py_DECREF (name);
  Py_DECREF (folder);
  result = PyRun_FileEx (fp, path, Py_file_input, globals, globals, 1);
  if (result == NULL)
    return handle_exception ();
  Py_DECREF (result);
  return GM_EMBED_OK;
}

gm_embed_status
gm_embed_finish (void)
{
  gm_embed_status result = GM_EMBED_OK;

  if (phase != PHASE_RUNNING)
    return not_running ("gm_embed_finish");
  if (Py_FinalizeEx () < 0)
    result = fail (GM_EMBED_EXCEPTION, "finalizing Python failed (an "
                   "error while flushing standard output?)");
  gm_backend_shutdown ();
  phase = PHASE_DONE;
  return result;
}
