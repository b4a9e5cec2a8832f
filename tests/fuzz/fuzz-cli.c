/* fuzz-cli.c -- libFuzzer target: gpumem's command-line parser
   (gm_cli_parse in src/app/cli.c, which main.c calls).

   Input: the first byte picks GPUMEM_BACKEND (unset, "host", "", junk,
   or the next NUL-terminated piece of the input); the rest, split at
   NUL bytes, is the argument vector after argv[0].  The result must be
   coherent (a target for SCRIPT, -c and -m; the script's arguments the
   tail of ARGV; a usage error with a one-%s format and its argument),
   and a second parse of the same vector must give the same answer.  */

/* setenv, unsetenv: POSIX, not C11.  */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MAX_ARGS 64

/* Whether P points at the start of one of the ARGC strings of ARGV.  */
static bool
is_arg (char **argv, int argc, const char *p)
{
  for (int i = 0; i < argc; i++)
    if (argv[i] == p)
      return true;
  return false;
}

static void
check (int argc, char **argv, gm_cli_status status,
       const gm_cli_options *options)
{
  char message[256];

  switch (status)
    {
    case GM_CLI_RUN:
      if (options->run.argc < 0 || options->run.argc >= argc
          || options->run.argv != argv + (argc - options->run.argc)
          || options->run.argv[options->run.argc] != NULL
          || options->run.python != NULL)
        abort ();
      if ((options->run.mode == GM_RUN_STDIN) != (options->run.target == NULL))
        abort ();
      if (options->run.mode == GM_RUN_FILE
          && !is_arg (argv, argc, options->run.target))
        abort ();
      if (options->run.stdin_is_dash && options->run.mode != GM_RUN_STDIN)
        abort ();
      if (options->backend != GM_BACKEND_AUTO
          && options->backend != GM_BACKEND_CUDA
          && options->backend != GM_BACKEND_HOST)
        abort ();
      break;
    case GM_CLI_HELP:
    case GM_CLI_VERSION:
      break;
    case GM_CLI_USAGE_ERROR:
      {
        const char *first = options->error_fmt
                            ? strstr (options->error_fmt, "%s") : NULL;
        if (first == NULL || strstr (first + 2, "%") != NULL
            || options->error_arg == NULL)
          abort ();
        /* What main prints.  */
        snprintf (message, sizeof message, options->error_fmt,
                  options->error_arg);
      }
      break;
    default:
      abort ();
    }
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  char *copy, *p, *end;
  char *argv[MAX_ARGS + 2];
  int argc = 0;
  gm_cli_options first, second;
  gm_cli_status status, again;

  if (size < 1)
    return 0;
  copy = malloc (size + 1);
  if (copy == NULL)
    return 0;
  memcpy (copy, data + 1, size - 1);
  copy[size - 1] = '\0';
  p = copy;
  end = copy + size - 1;

  switch (data[0] % 5)
    {
    case 0:
      unsetenv ("GPUMEM_BACKEND");
      break;
    case 1:
      setenv ("GPUMEM_BACKEND", "host", 1);
      break;
    case 2:
      setenv ("GPUMEM_BACKEND", "", 1);
      break;
    case 3:
      setenv ("GPUMEM_BACKEND", "cud", 1);
      break;
    default:
      setenv ("GPUMEM_BACKEND", p, 1);
      p += strlen (p) + (p < end);
      break;
    }

  argv[argc++] = (char *) "gpumem";
  while (p < end && argc <= MAX_ARGS)
    {
      argv[argc++] = p;
      p += strlen (p) + 1;
    }
  argv[argc] = NULL;

  status = gm_cli_parse (argc, argv, &first);
  check (argc, argv, status, &first);
  again = gm_cli_parse (argc, argv, &second);
  check (argc, argv, again, &second);
  if (status != again || first.backend != second.backend
      || first.run.mode != second.run.mode
      || first.run.target != second.run.target
      || first.run.argc != second.run.argc
      || first.run.inspect != second.run.inspect
      || first.show_devices != second.show_devices
      || first.show_kernels != second.show_kernels
      || first.stats != second.stats || first.quiet != second.quiet)
    abort ();
  free (copy);
  return 0;
}
