/* main.c -- the gpumem command line: options, usage, exit codes.

   Parses the command line, selects the backend, and hands the rest to
   the interpreter (interp.c).  No Python and no CUDA headers here.  */

#include "config.h"

#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "gm.h"
#include "gm-interp.h"
#include "child-env.h"
#include "cli.h"
#include "comm.h"
#include "plugin.h"

enum
{
  GM_EXIT_USAGE = 2,
  GM_EXIT_UNAVAILABLE = 3
};

static const char usage_text[] =
  "Usage: gpumem [OPTION]... [SCRIPT [ARG]...]\n"
  "       gpumem [OPTION]... -c COMMAND [ARG]...\n"
  "       gpumem [OPTION]... -m MODULE [ARG]...\n"
  "Run a Python script that owns GPU memory and calls native CUDA kernels.\n"
  "SCRIPT is a path, or - for standard input; with none, an interactive\n"
  "console when standard input is a terminal.\n"
  "\n"
  "  -b, --backend=cuda|host|auto  device backend (default auto: cuda when a\n"
  "                                device answers, else host, with a notice)\n"
  "  -c COMMAND                    run the Python code COMMAND\n"
  "  -m MODULE                     run library module MODULE as a script\n"
  "  -i                            interactive console after SCRIPT or COMMAND\n"
  "  -l, --list-devices            print the devices and exit\n"
  "  -k, --list-kernels            print the native kernels and exit\n"
  "  -K, --kernels=PATH            add the kernels of plugin library PATH to\n"
  "                                gpumem.kernels (repeatable)\n"
  "  -s, --stats                   print per-device memory statistics at exit\n"
  "                                (and, with the memory history on, the\n"
  "                                blocks still live and where each was made)\n"
  "      --memory-report=FILE      record the memory history and write an HTML\n"
  "                                report of it to FILE at exit\n"
  "      --config[=text|json]      print what this gpumem was built with and\n"
  "                                found here (gpumem.show_config()) and exit\n"
  "  -q, --quiet                   no notices on standard error\n"
  "  -h, --help                    print this help and exit\n"
  "  -V, --version                 print the version and exit\n"
  "\n"
  "Environment: GPUMEM_BACKEND (as --backend), GPUMEM_KERNELS (plugin\n"
  "libraries, colon-separated, as --kernels), GPUMEM_PYTHON (the Python\n"
  "interpreter or virtual environment to use), GPUMEM_HOST_DEVICES (devices\n"
  "of the host backend, default 4), GPUMEM_MEMORY_HISTORY (1, or a number of\n"
  "entries: record the memory history from the start), CUDA_VISIBLE_DEVICES.\n"
  "\n"
  "Exit status: 0 on success, the script's SystemExit code, 1 for an\n"
  "uncaught exception, 2 for a usage error, 3 when the requested backend is\n"
  "unavailable.  See gpumem(1).\n";

static void
usage_error (const char *fmt, const char *arg)
{
  fputs ("gpumem: ", stderr);
  fprintf (stderr, fmt, arg);
  fputs ("\nTry 'gpumem --help' for more information.\n", stderr);
  exit (GM_EXIT_USAGE);
}

/* Writes the "X.Y" version of the interpreter PYTHON into VERSION;
   false if it cannot be run.  */
static bool
python_version (const char *python, char *version, size_t size)
{
  char *argv[] = {(char *) python, (char *) "-c",
                  (char *) "import sys; print('%d.%d' % sys.version_info[:2])",
                  NULL};
  posix_spawn_file_actions_t actions;
  int fds[2], status = 1;
  ssize_t n = -1;
  pid_t pid;

  if (pipe (fds) != 0)
    return false;
  posix_spawn_file_actions_init (&actions);
  posix_spawn_file_actions_adddup2 (&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose (&actions, fds[0]);
  if (posix_spawn (&pid, python, &actions, NULL, argv, environ) == 0)
    {
      close (fds[1]);
      fds[1] = -1;
      n = read (fds[0], version, size - 1);
      waitpid (pid, &status, 0);
    }
  posix_spawn_file_actions_destroy (&actions);
  close (fds[0]);
  if (fds[1] >= 0)
    close (fds[1]);
  if (n <= 0 || !WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return false;
  version[n] = '\0';
  version[strcspn (version, "\n")] = '\0';
  return true;
}

/* Resolves GPUMEM_PYTHON: an interpreter, or a virtual environment's
   folder (then its bin/python3).  Exits with a usage error when the
   path names neither, or an interpreter of another Python version than
   the one built in (its standard library would not fit).  */
static const char *
python_from_env (void)
{
  static char path[4096];
  const char *value = getenv ("GPUMEM_PYTHON");
  char version[32];
  struct stat st;

  if (value == NULL || *value == '\0')
    return GM_PYTHON_EXECUTABLE;
  if (stat (value, &st) != 0)
    usage_error ("GPUMEM_PYTHON: '%s' does not exist", value);
  if (S_ISDIR (st.st_mode))
    {
      snprintf (path, sizeof path, "%s/bin/python3", value);
      if (access (path, X_OK) != 0)
        usage_error ("GPUMEM_PYTHON: '%s' is a folder without bin/python3",
                     value);
      value = path;
    }
  if (!python_version (value, version, sizeof version))
    usage_error ("GPUMEM_PYTHON: '%s' does not run as a Python interpreter",
                 value);
  if (strcmp (version, GM_PYTHON_VERSION_TEXT) != 0)
    {
      fprintf (stderr, "gpumem: GPUMEM_PYTHON: '%s' is Python %s, but this "
               "gpumem embeds Python %s; name an interpreter or virtual "
               "environment of Python %s\n", value, version,
               GM_PYTHON_VERSION_TEXT, GM_PYTHON_VERSION_TEXT);
      exit (GM_EXIT_USAGE);
    }
  return value;
}

static bool print_stats;

/* Prints --stats and ends the backend, once: called after the script on
   the normal path, and from atexit when the interactive console ends the
   process itself (CPython's console exits on SystemExit).  */
static void
finish (void)
{
  static bool finished;

  if (finished)
    return;
  finished = true;
  if (print_stats)
    {
      gm_mem_print_stats ();
      gm_spill_print_stats (stderr);
    }
  gm_backend_shutdown ();
}

static void
list_devices (void)
{
  const gm_backend *backend = gm_backend_current;
  int count = backend->device_count ();

  /* The host backend's devices are simulated: say so, and show no
     compute capability for them (theirs is 0.0, no GPU's).  */
  bool simulated = strcmp (backend->name, "host") == 0;

  if (simulated)
    printf ("backend: host (%d simulated devices on the CPU, "
            "GPUMEM_HOST_DEVICES; each shows the machine's memory, which "
            "they share)\n", count);
  else
    printf ("backend: %s\n", backend->name);
  printf ("%-6s %-32s %12s %12s %s\n", "index", "name", "total", "free",
          "compute capability");
  for (int i = 0; i < count; i++)
    {
      gm_device_props props;
      size_t free_bytes = 0, total = 0;
      char total_text[32], free_text[32];

      if (backend->device_props (i, &props) != GM_OK
          || backend->mem_info (i, &free_bytes, &total) != GM_OK)
        {
          fprintf (stderr, "gpumem: device %d: %s\n", i,
                   gm_last_error ()->message);
          continue;
        }
      gm_format_bytes (total, total_text, sizeof total_text);
      gm_format_bytes (free_bytes, free_text, sizeof free_text);
      if (simulated)
        printf ("%-6d %-32s %12s %12s none (simulated)\n", i, props.name,
                total_text, free_text);
      else
        printf ("%-6d %-32s %12s %12s %d.%d\n", i, props.name, total_text,
                free_text, props.cc_major, props.cc_minor);
    }
}

static void
list_kernels (void)
{
  int count = gm_kernels_count ();

  for (int k = 0; k < count; k++)
    {
      const gm_kernel *kernel = gm_kernels_get (k);
      char param[256];

      printf ("%s(", kernel->name);
      for (int p = 0; p < kernel->nparams; p++)
        {
          gm_kernel_param_format (&kernel->params[p], param, sizeof param);
          printf ("%s%s", p ? ", " : "", param);
        }
      printf (")\n    %s\n", kernel->doc);
      if (kernel->origin != NULL)
        printf ("    (from %s)\n", kernel->origin);
    }
}

int
main (int argc, char **argv)
{
  gm_cli_options cli;
  gm_backend_choice backend;
  gm_run_options run;
  bool show_devices, show_kernels, quiet, interrupted = false;

  switch (gm_cli_parse (argc, argv, &cli))
    {
    case GM_CLI_HELP:
      fputs (usage_text, stdout);
      return 0;
    case GM_CLI_VERSION:
      printf ("gpumem %s (Python %s, %s)\n", PACKAGE_VERSION,
              GM_PYTHON_VERSION_TEXT,
#ifdef GM_HAVE_CUDA
              "CUDA backend built in"
#else
              "host backend only"
#endif
              );
      return 0;
    case GM_CLI_USAGE_ERROR:
      usage_error (cli.error_fmt, cli.error_arg);
      break;
    case GM_CLI_RUN:
      break;
    }
  backend = cli.backend;
  run = cli.run;
  show_devices = cli.show_devices;
  show_kernels = cli.show_kernels;
  print_stats = cli.stats;
  quiet = cli.quiet;
  run.python = python_from_env ();

  /* Plugins before anything else: -k lists their kernels, and a plugin
     that does not load is the command line's error.  */
  if (gm_plugin_preload_list (cli.kernels_env) != GM_OK)
    {
      fprintf (stderr, "gpumem: GPUMEM_KERNELS: %s\n",
               gm_last_error ()->message);
      return GM_EXIT_USAGE;
    }
  for (int i = 0; i < cli.nkernel_paths; i++)
    {
      gm_plugin *plugin;
      if (gm_plugin_load (cli.kernel_paths[i], &plugin) != GM_OK)
        {
          fprintf (stderr, "gpumem: --kernels: %s\n",
                   gm_last_error ()->message);
          return GM_EXIT_USAGE;
        }
      gm_plugin_preload (plugin);
    }

  if (show_kernels)
    {
      list_kernels ();
      if (!show_devices)
        return 0;
    }

  /* MPI first, when mpirun started us: the rank decides the default
     device.  */
  if (gm_comm_init () != GM_OK)
    {
      fprintf (stderr, "gpumem: %s\n", gm_last_error ()->message);
      return GM_EXIT_UNAVAILABLE;
    }
  if (gm_backend_init (backend, quiet) != GM_OK)
    {
      fprintf (stderr, "gpumem: %s\n", gm_last_error ()->message);
      return gm_comm_finalize (GM_EXIT_UNAVAILABLE);
    }
  if (show_devices)
    {
      list_devices ();
      gm_comm_finalize (0);
      gm_backend_shutdown ();
      return 0;
    }

  /* The history from the start, so that the report sees every block;
     the module writes the report and the leaks as the script ends.  */
  if (cli.memory_report != NULL
      && gm_mem_history_start (GM_MEM_HISTORY_DEFAULT_ENTRIES, true)
         != GM_OK)
    {
      fprintf (stderr, "gpumem: --memory-report: %s\n",
               gm_last_error ()->message);
      gm_comm_finalize (0);
      gm_backend_shutdown ();
      return GM_EXIT_UNAVAILABLE;
    }
  gm_mem_report_at_exit (cli.memory_report, print_stats);

  /* Children (multiprocessing, subprocess) import gpumem on this
     backend.  */
  gm_child_env_setup (gm_backend_current->name);
  /* Registered after the backend started, so it runs before the CUDA
     runtime's own exit handlers.  */
  atexit (finish);
  int status = gm_interp_run (&run, &interrupted);
  /* In an MPI job a failed rank ends the whole job, which would
     otherwise wait for it for ever; MPI ends before the backend, as a
     CUDA-aware MPI may still hold device memory.  */
  status = gm_comm_finalize (status);
  if (interrupted)
    {
      /* As python: an uncaught KeyboardInterrupt ends the process by
         SIGINT, so the shell sees the interrupt.  The backend is not
         shut down: that would wait for the kernels still running, which
         the interrupt meant to leave; the driver ends them with the
         process.  */
      if (print_stats)
        {
          gm_mem_print_stats ();
          gm_spill_print_stats (stderr);
        }
      signal (SIGINT, SIG_DFL);
      raise (SIGINT);
    }
  finish ();
  return status;
}
