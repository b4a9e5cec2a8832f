/* embed-test.c -- tests of the embedding layer and the C internals under it.

   A table of named cases, as CPython's Programs/_testembed.c keeps one.
     embed-test          runs every case, each in a forked child (Python
                         can be initialized cleanly only once a process),
                         prints "ok NAME" or "FAIL NAME" for each and a
                         last line "N passed, N failed"; exits 0 iff all
                         passed.
     embed-test NAME     runs the case NAME in this process.
     embed-test --list   prints the names of the cases.
   Every case runs on the host backend, so no GPU is needed.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gm.h"
#include "gm-interp.h"

/* Seconds a forked case may take before it counts as hung.  */
#define CASE_TIMEOUT 60

/* Fails the enclosing case (returns 1) when COND is false, saying where.  */
#define CHECK(cond)                                                     \
  do                                                                    \
    {                                                                   \
      if (!(cond))                                                      \
        {                                                               \
          fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__,       \
                   __LINE__, #cond);                                    \
          return 1;                                                     \
        }                                                               \
    }                                                                   \
  while (0)

/* Runs Python in MODE on TARGET with the ARGC arguments ARGV, as gpumem
   does, on the host backend.  Returns gm_interp_run's exit status, or
   -1 when the backend does not start.  */
static int
run_python (gm_run_mode mode, const char *target, int argc, char **argv)
{
  gm_run_options options = {0};
  bool interrupted;
  int status;

  options.mode = mode;
  options.target = target;
  options.argc = argc;
  options.argv = argv;
  options.python = GM_PYTHON_EXECUTABLE;
  if (gm_backend_init (GM_BACKEND_HOST, true) != GM_OK)
    {
      fprintf (stderr, "host backend: %s\n", gm_last_error ()->message);
      return -1;
    }
  status = gm_interp_run (&options, &interrupted);
  gm_backend_shutdown ();
  return status;
}

/* Runs the Python code COMMAND with no arguments.  */
static int
run_command (const char *command)
{
  return run_python (GM_RUN_COMMAND, command, 0, NULL);
}

/* --- the interpreter ---------------------------------------------------- */

static int
test_command_ok (void)
{
  CHECK (run_command ("x = sum(range(10))\nassert x == 45") == 0);
  return 0;
}

/* gm_interp_run returns a SystemExit's code; it does not exit the
   process itself (the caller still has --stats and the backend's
   shutdown to do).  */
static int
test_system_exit_code (void)
{
  CHECK (run_command ("raise SystemExit(5)") == 5);
  return 0;
}

static int
test_system_exit_none (void)
{
  CHECK (run_command ("import sys; sys.exit(None)") == 0);
  return 0;
}

static int
test_system_exit_message (void)
{
  fputs ("(\"expected by embed-test\" is expected here)\n", stderr);
  CHECK (run_command ("import sys; sys.exit('expected by embed-test')")
         == 1);
  return 0;
}

static int
test_uncaught_exception (void)
{
  fputs ("(a ValueError traceback is expected here)\n", stderr);
  CHECK (run_command ("raise ValueError('expected by embed-test')") == 1);
  return 0;
}

static int
test_import_gpumem (void)
{
  /* A failed assert exits 1; success returns normally (no SystemExit,
     which system_exit_* test).  */
  CHECK (run_command ("import gpumem\n"
                      "assert gpumem.backend == 'host', gpumem.backend\n"
                      "assert gpumem.device_count() >= 1\n"
                      "assert gpumem.empty(4).size == 4") == 0);
  return 0;
}

static int
test_argv (void)
{
  char *args[] = {"alpha", "--beta", "-c", ""};

  CHECK (run_python (GM_RUN_COMMAND,
                     "import sys\n"
                     "assert sys.argv == ['-c', 'alpha', '--beta', '-c', ''],"
                     " sys.argv", 4, args) == 0);
  return 0;
}

static int
test_file (void)
{
  char folder[] = "/tmp/embed-test-XXXXXX";
  char path[sizeof folder + 16], marker[sizeof folder + 16];
  char *args[] = {"one", "two"};
  FILE *script;
  int status, ran;

  CHECK (mkdtemp (folder) != NULL);
  snprintf (path, sizeof path, "%s/script.py", folder);
  snprintf (marker, sizeof marker, "%s/ran", folder);
  script = fopen (path, "w");
  CHECK (script != NULL);
  /* The marker proves the script ran to its end.  */
  fprintf (script,
           "import os, sys\n"
           "assert sys.argv == ['%s', 'one', 'two'], sys.argv\n"
           "assert (os.path.realpath(sys.path[0])\n"
           "        == os.path.realpath('%s')), sys.path\n"
           "open('%s', 'w').close()\n", path, folder, marker);
  CHECK (fclose (script) == 0);
  status = run_python (GM_RUN_FILE, path, 2, args);
  ran = access (marker, F_OK) == 0;
  remove (marker);
  remove (path);
  rmdir (folder);
  CHECK (status == 0);
  CHECK (ran);
  return 0;
}

/* --- the kernel registry and its length expressions ------------------ */

static int
test_registry (void)
{
  const gm_kernel *algo;

  CHECK (gm_kernel_count >= 3);
  for (int k = 0; k < gm_kernel_count; k++)
    {
      const gm_kernel *kernel = &gm_kernel_table[k];

      CHECK (kernel->name != NULL && kernel->doc != NULL);
      CHECK (kernel->nparams >= 1
             && kernel->nparams <= GM_MAX_KERNEL_PARAMS);
      CHECK (kernel->run_host != NULL);
      CHECK (gm_kernel_find (kernel->name) == kernel);
      for (int p = 0; p < kernel->nparams; p++)
        {
          const gm_kernel_param *param = &kernel->params[p];
          int64_t value = -1;

          if (param->kind == GM_PARAM_SCALAR)
            {
              CHECK (param->length == NULL);
              continue;
            }
          CHECK (param->length != NULL);
          if (gm_kernel_eval_length (kernel, param->length, NULL, &value)
              != GM_OK)
            {
              fprintf (stderr, "%s\n", gm_last_error ()->message);
              CHECK (!"every length expression parses");
            }
          CHECK (value == 0);
        }
    }

  algo = gm_kernel_find ("algo");
  CHECK (algo != NULL);
  CHECK (algo->nparams == 4);
  CHECK (strcmp (algo->params[0].name, "images") == 0);
  CHECK (algo->params[2].kind == GM_PARAM_OUT);
  CHECK (algo->params[3].kind == GM_PARAM_SCALAR);
  {
    gm_arg args[4] = {{0}};
    int64_t value = 0;

    args[3].i64 = 10;
    CHECK (gm_kernel_eval_length (algo, algo->params[0].length, args,
                                  &value) == GM_OK);
    CHECK (value == 10);
  }
  CHECK (gm_kernel_find ("algo_seed") != NULL);
  CHECK (gm_kernel_find ("saxpy") != NULL);
  CHECK (gm_kernel_find ("no_such_kernel") == NULL);
  CHECK (gm_kernel_find ("") == NULL);
  CHECK (gm_kernel_find ("alg") == NULL);
  return 0;
}

/* A kernel made for the expression tests: scalars n (int64), m (int32),
   u (uint64) and a (float32), and an array x.  */
static const gm_kernel fake_kernel = {
  .name = "fake",
  .doc = "embed-test's own",
  .nparams = 5,
  .params = {
    {"n", GM_PARAM_SCALAR, GM_INT64, NULL},
    {"m", GM_PARAM_SCALAR, GM_INT32, NULL},
    {"u", GM_PARAM_SCALAR, GM_UINT64, NULL},
    {"a", GM_PARAM_SCALAR, GM_FLOAT32, NULL},
    {"x", GM_PARAM_IN, GM_FLOAT32, "n"},
  },
};

static void
fake_args (gm_arg args[5])
{
  memset (args, 0, 5 * sizeof *args);
  args[0].i64 = 10;
  args[1].i32 = 7;
  args[2].u64 = UINT64_MAX;
  args[3].f32 = 1.5f;
}

/* Whether EXPR evaluates to EXPECTED with fake_args.  */
static bool
evaluates_to (const char *expr, int64_t expected)
{
  gm_arg args[5];
  int64_t value = -12345;
  gm_status status;

  fake_args (args);
  status = gm_kernel_eval_length (&fake_kernel, expr, args, &value);
  if (status != GM_OK || value != expected)
    {
      fprintf (stderr, "\"%s\": status %d, value %lld, expected %lld (%s)\n",
               expr, (int) status, (long long) value, (long long) expected,
               status != GM_OK ? gm_last_error ()->message : "");
      return false;
    }
  return true;
}

/* Whether EXPR is rejected with GM_ERR_VALUE and a message naming the
   kernel; with ARGS when WITH_ARGS, else a syntax check.  */
static bool
is_rejected (const char *expr, bool with_args)
{
  gm_arg args[5];
  int64_t value = -12345;
  gm_status status;

  fake_args (args);
  status = gm_kernel_eval_length (&fake_kernel, expr,
                                  with_args ? args : NULL, &value);
  if (status != GM_ERR_VALUE
      || gm_last_error ()->status != GM_ERR_VALUE
      || strstr (gm_last_error ()->message, "fake") == NULL)
    {
      fprintf (stderr, "\"%.60s\"%s: status %d, value %lld, message "
               "\"%s\"; expected GM_ERR_VALUE\n", expr,
               strlen (expr) > 60 ? "..." : "", (int) status,
               (long long) value, gm_last_error ()->message);
      return false;
    }
  return true;
}

/* A string of DEPTH copies of OPEN, then CORE, then DEPTH of CLOSE (may
   be ""); NULL when out of memory.  */
static char *
nested (int depth, const char *open, const char *core, const char *close)
{
  size_t lo = strlen (open), lc = strlen (close), lk = strlen (core);
  char *text = malloc ((size_t) depth * (lo + lc) + lk + 1);
  char *end = text;

  if (text == NULL)
    return NULL;
  for (int i = 0; i < depth; i++, end += lo)
    memcpy (end, open, lo);
  memcpy (end, core, lk);
  end += lk;
  for (int i = 0; i < depth; i++, end += lc)
    memcpy (end, close, lc);
  *end = '\0';
  return text;
}

static int
test_length_expressions (void)
{
  static const char *const bad[] = {
    "n/0", "n%0", "n/(m-7)", "n%(m-7)", "2*", "foo", ")", "", " ", "(n",
    "n)", "n n", "n +", "* n", "n ** 2", "n.5", "n = 1", "#",
    "9223372036854775807+1", "9223372036854775808",
    "-9223372036854775807-2", "n*1000000000000000000",
    "(0-9223372036854775807-1)/(0-1)", "-(0-9223372036854775807-1)",
    "a", "x", "u", "N",
  };
  int64_t value = -1;
  char *deep;

  CHECK (evaluates_to ("n*2+1", 21));
  CHECK (evaluates_to ("(n-1)/2", 4));
  CHECK (evaluates_to ("n%3", 1));
  CHECK (evaluates_to ("n - m * 2", -4));
  CHECK (evaluates_to ("-n + 3", -7));
  CHECK (evaluates_to ("--n", 10));
  CHECK (evaluates_to ("\t( n )  ", 10));
  CHECK (evaluates_to ("m*m*m", 343));
  CHECK (evaluates_to ("n - 2 - 3", 5));
  CHECK (evaluates_to ("n / 3 * 3", 9));
  CHECK (evaluates_to ("2*(n+m)%5", 4));
  CHECK (evaluates_to ("4", 4));
  CHECK (evaluates_to ("0", 0));
  CHECK (evaluates_to ("9223372036854775807", INT64_MAX));
  CHECK (evaluates_to ("-9223372036854775807-1", INT64_MIN));

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK (is_rejected (bad[i], true));
  /* Without arguments only the syntax and the names are checked.  */
  CHECK (gm_kernel_eval_length (&fake_kernel, "n/0", NULL, &value) == GM_OK);
  CHECK (value == 0);
  CHECK (gm_kernel_eval_length (&fake_kernel, "(n-1)/2", NULL, &value)
         == GM_OK);
  CHECK (value == 0);
  CHECK (is_rejected ("2*", false));
  CHECK (is_rejected ("foo", false));
  CHECK (is_rejected ("a", false));
  CHECK (gm_kernel_eval_length (&fake_kernel, NULL, NULL, &value)
         == GM_ERR_VALUE);

  /* Deep nesting is refused, not a stack overflow.  */
  CHECK ((deep = nested (1000, "(", "n", ")")) != NULL);
  CHECK (is_rejected (deep, true));
  free (deep);
  CHECK ((deep = nested (100000, "(", "n", ")")) != NULL);
  CHECK (is_rejected (deep, false));
  free (deep);
  CHECK ((deep = nested (1000, "-", "n", "")) != NULL);
  CHECK (is_rejected (deep, true));
  free (deep);
  CHECK ((deep = nested (1000, "(", "", "")) != NULL);
  CHECK (is_rejected (deep, true));
  free (deep);
  /* Shallow nesting is fine.  */
  CHECK ((deep = nested (20, "(", "n", ")")) != NULL);
  CHECK (evaluates_to (deep, 10));
  free (deep);
  return 0;
}

/* --- settings from the environment ---------------------------------------- */

static int
test_env_size (void)
{
  static const struct
  {
    const char *text;
    long long want;          /* -1: refused */
  } known[] = {
    {"65536", 65536}, {"0", 0}, {"007", 7}, {"64K", 65536},
    {"64k", 65536}, {"64KiB", 65536}, {"64kib", 65536},
    {"16M", 16 << 20}, {"16MiB", 16 << 20}, {"1G", 1 << 30},
    {"1gib", 1 << 30}, {"4294967296", 4294967296LL},
    {"-1", -1}, {"+5", -1}, {" 5", -1}, {"5 ", -1}, {"5 K", -1},
    {"1.5M", -1}, {"0x10", -1}, {"K", -1}, {"16MB", -1}, {"16kB", -1},
    {"16B", -1}, {"16Mi", -1}, {"16T", -1}, {"lots", -1},
    {"99999999999999999999", -1}, {"17179869184G", -1},
    {"4294967297", -1},          /* above the maximum given below */
  };
  size_t value;

  unsetenv ("GM_TEST_SIZE");
  CHECK (gm_env_size ("GM_TEST_SIZE", 42, 0, 1, &value) == GM_OK);
  CHECK (value == 42);
  setenv ("GM_TEST_SIZE", "", 1);
  CHECK (gm_env_size ("GM_TEST_SIZE", 42, 0, 1, &value) == GM_OK);
  CHECK (value == 42);
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    {
      gm_status status;

      setenv ("GM_TEST_SIZE", known[i].text, 1);
      status = gm_env_size ("GM_TEST_SIZE", 42, 0, (size_t) 1 << 32,
                            &value);
      if (known[i].want < 0)
        {
          if (status != GM_ERR_VALUE || value != 42
              || strstr (gm_last_error ()->message, "GM_TEST_SIZE='") == NULL
              || strstr (gm_last_error ()->message, known[i].text) == NULL)
            {
              fprintf (stderr, "'%s' was not refused as it should be: %s\n",
                       known[i].text, gm_last_error ()->message);
              return 1;
            }
        }
      else if (status != GM_OK || value != (size_t) known[i].want)
        {
          fprintf (stderr, "'%s' read as %zu, not %lld\n", known[i].text,
                   value, known[i].want);
          return 1;
        }
    }
  /* The range, both ends, with suffixes.  */
  setenv ("GM_TEST_SIZE", "64K", 1);
  CHECK (gm_env_size ("GM_TEST_SIZE", 1, 65536, 65536, &value) == GM_OK);
  CHECK (value == 65536);
  CHECK (gm_env_size ("GM_TEST_SIZE", 1, 65537, 1 << 20, &value)
         == GM_ERR_VALUE);
  CHECK (strstr (gm_last_error ()->message, "65537 to 1048576") != NULL);
  CHECK (gm_env_size ("GM_TEST_SIZE", 1, 0, 65535, &value) == GM_ERR_VALUE);
  CHECK (value == 1);
  unsetenv ("GM_TEST_SIZE");
  return 0;
}

/* --- dtypes --------------------------------------------------------------- */

static int
test_dtype_typestr (void)
{
  static const struct
  {
    const char *typestr;
    int dtype;
  } known[] = {
    {"|b1", GM_BOOL}, {"|i1", GM_INT8}, {"<i2", GM_INT16},
    {"<i4", GM_INT32}, {"<i8", GM_INT64}, {"|u1", GM_UINT8},
    {"<u2", GM_UINT16}, {"<u4", GM_UINT32}, {"<u8", GM_UINT64},
    {"<f2", GM_FLOAT16}, {"<f4", GM_FLOAT32}, {"<f8", GM_FLOAT64},
    {"<c8", GM_COMPLEX64}, {"<c16", GM_COMPLEX128}, {"=f4", GM_FLOAT32},
    {"|f8", GM_FLOAT64},
    {">f4", -1}, {"<f3", -1}, {"<x4", -1}, {"", -1}, {"<f", -1},
    {"<f4x", -1}, {"<f-4", -1}, {"<f99999999999999999999999", -1},
    {"<i16", -1}, {"<c4", -1}, {"|b2", -1}, {"f4", -1}, {"<V8", -1},
  };

  for (int d = 0; d < GM_NDTYPES; d++)
    {
      char typestr[8];
      const gm_dtype_info *info = &gm_dtypes[d];

      memset (typestr, 'Z', sizeof typestr);
      gm_dtype_typestr ((gm_dtype) d, typestr);
      CHECK (memchr (typestr, '\0', sizeof typestr) != NULL);
      CHECK (typestr[1] == info->kind);
      CHECK ((size_t) atoi (typestr + 2) == info->itemsize);
      CHECK (typestr[0] == (info->itemsize == 1 ? '|' : '<'));
      if (gm_dtype_from_typestr (typestr) != d)
        {
          fprintf (stderr, "%s (%s) reads back as %d\n", typestr, info->name,
                   gm_dtype_from_typestr (typestr));
          CHECK (!"typestr round trip");
        }
      CHECK (gm_dtype_from_name (info->name, strlen (info->name)) == d);
    }
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (gm_dtype_from_typestr (known[i].typestr) != known[i].dtype)
      {
        fprintf (stderr, "\"%s\": %d, expected %d\n", known[i].typestr,
                 gm_dtype_from_typestr (known[i].typestr), known[i].dtype);
        CHECK (!"known typestr");
      }
  CHECK (gm_dtype_from_typestr (NULL) == -1);
  CHECK (gm_dtype_from_name ("float", 5) == -1);
  CHECK (gm_dtype_from_name ("float32x", 7) == GM_FLOAT32);
  return 0;
}

/* --- the memory books ------------------------------------------------------ */

static int
test_memory_books (void)
{
  gm_mem_stats stats;
  void *block = NULL, *refused = (void *) 1, *other = NULL;
  const char *message;

  /* Two devices whatever the caller's environment says.  */
  CHECK (setenv ("GPUMEM_HOST_DEVICES", "2", 1) == 0);
  CHECK (gm_backend_init (GM_BACKEND_HOST, true) == GM_OK);
  CHECK (gm_backend_current != NULL);
  CHECK (strcmp (gm_backend_current->name, "host") == 0);
  CHECK (gm_backend_current->device_count () == 2);

  CHECK (gm_mem_stats_get (0, &stats) == GM_OK);
  CHECK (stats.allocated_bytes == 0 && stats.allocations == 0);
  CHECK (stats.limit == SIZE_MAX);

  CHECK (gm_mem_alloc (0, 1000, NULL, &block) == GM_OK);
  CHECK (block != NULL);
  memset (block, 0xab, 1000);    /* host backend: plain host memory */
  CHECK (gm_mem_stats_get (0, &stats) == GM_OK);
  CHECK (stats.allocated_bytes == 1000);
  CHECK (stats.peak_allocated_bytes == 1000);
  CHECK (stats.allocations == 1);
  CHECK (stats.total_allocations == 1);

  CHECK (gm_mem_set_limit (0, 1500) == GM_OK);
  CHECK (gm_mem_alloc (0, 600, NULL, &refused) == GM_ERR_NOMEM);
  CHECK (refused == NULL);
  message = gm_last_error ()->message;
  CHECK (gm_last_error ()->status == GM_ERR_NOMEM);
  CHECK (strstr (message, "device 0") != NULL);
  CHECK (strstr (message, "1500") != NULL);
  CHECK (strstr (message, "600") != NULL);
  CHECK (strstr (message, "1000") != NULL);
  CHECK (gm_mem_stats_get (0, &stats) == GM_OK);
  CHECK (stats.allocated_bytes == 1000 && stats.allocations == 1);
  CHECK (stats.total_allocations == 1 && stats.limit == 1500);

  /* The limit is per device.  */
  CHECK (gm_mem_alloc (1, 600, NULL, &other) == GM_OK);
  CHECK (other != NULL);
  CHECK (gm_mem_free (1, other, 600, NULL) == GM_OK);
  CHECK (gm_mem_stats_get (1, &stats) == GM_OK);
  CHECK (stats.allocated_bytes == 0 && stats.peak_allocated_bytes == 600);

  CHECK (gm_mem_free (0, block, 1000, NULL) == GM_OK);
  CHECK (gm_mem_stats_get (0, &stats) == GM_OK);
  CHECK (stats.allocated_bytes == 0);
  CHECK (stats.allocations == 0);
  CHECK (stats.peak_allocated_bytes == 1000);
  CHECK (stats.total_allocations == 1);

  /* Under the limit again, the same request succeeds.  */
  CHECK (gm_mem_alloc (0, 600, NULL, &block) == GM_OK);
  CHECK (gm_mem_free (0, block, 600, NULL) == GM_OK);
  CHECK (gm_mem_stats_get (0, &stats) == GM_OK);
  CHECK (stats.peak_allocated_bytes == 1000);
  CHECK (stats.total_allocations == 2);

  /* A device that does not exist.  */
  CHECK (gm_mem_alloc (2, 8, NULL, &block) == GM_ERR_VALUE);
  CHECK (strstr (gm_last_error ()->message, "device 2") != NULL);
  CHECK (gm_mem_alloc (-1, 8, NULL, &block) == GM_ERR_VALUE);
  CHECK (gm_mem_stats_get (2, &stats) == GM_ERR_VALUE);
  CHECK (gm_mem_set_limit (-1, 10) == GM_ERR_VALUE);

  gm_backend_shutdown ();
  CHECK (gm_backend_current == NULL);
  return 0;
}

/* --- the table and the runner ---------------------------------------------- */

typedef struct embed_case
{
  const char *name;
  int (*run) (void);        /* 0 when the case passed */
} embed_case;

static const embed_case cases[] = {
  {"command_ok", test_command_ok},
  {"system_exit_code", test_system_exit_code},
  {"system_exit_none", test_system_exit_none},
  {"system_exit_message", test_system_exit_message},
  {"uncaught_exception", test_uncaught_exception},
  {"import_gpumem", test_import_gpumem},
  {"argv", test_argv},
  {"file", test_file},
  {"registry", test_registry},
  {"length_expressions", test_length_expressions},
  {"dtype_typestr", test_dtype_typestr},
  {"env_size", test_env_size},
  {"memory_books", test_memory_books},
};

#define NCASES ((int) (sizeof cases / sizeof cases[0]))

/* Runs CASE in a forked child and returns whether it passed; prints
   "ok NAME" or "FAIL NAME (why)".  The child reports its result through
   a pipe too, so that a process ended inside the case (by exit () in the
   code under test) is a failure whatever its exit status.  */
static bool
run_forked (const embed_case *c)
{
  pid_t pid;
  int wstatus, report[2];
  char result = 'x';

  fflush (stdout);
  fflush (stderr);
  if (pipe (report) != 0)
    {
      perror ("embed-test: pipe");
      printf ("FAIL %s (pipe failed)\n", c->name);
      return false;
    }
  pid = fork ();
  if (pid < 0)
    {
      perror ("embed-test: fork");
      printf ("FAIL %s (fork failed)\n", c->name);
      close (report[0]);
      close (report[1]);
      return false;
    }
  if (pid == 0)
    {
      int status;

      close (report[0]);
      alarm (CASE_TIMEOUT);
      status = c->run () == 0 ? 0 : 1;
      result = status == 0 ? 'p' : 'f';
      if (write (report[1], &result, 1) != 1)
        status = 1;
      exit (status);
    }
  close (report[1]);
  if (waitpid (pid, &wstatus, 0) < 0)
    {
      perror ("embed-test: waitpid");
      printf ("FAIL %s (waitpid failed)\n", c->name);
      close (report[0]);
      return false;
    }
  if (read (report[0], &result, 1) != 1)
    result = 'x';
  close (report[0]);
  if (WIFEXITED (wstatus) && WEXITSTATUS (wstatus) == 0 && result == 'p')
    {
      printf ("ok   %s\n", c->name);
      return true;
    }
  if (WIFEXITED (wstatus) && result == 'x')
    printf ("FAIL %s (the process exited with status %d inside the case, "
            "without returning to it)\n", c->name, WEXITSTATUS (wstatus));
  else if (WIFEXITED (wstatus))
    printf ("FAIL %s (exit status %d)\n", c->name, WEXITSTATUS (wstatus));
  else if (WIFSIGNALED (wstatus))
    printf ("FAIL %s (killed by signal %d%s)\n", c->name,
            WTERMSIG (wstatus),
            WTERMSIG (wstatus) == SIGALRM ? ", timed out" : "");
  else
    printf ("FAIL %s (wait status %d)\n", c->name, wstatus);
  return false;
}

int
main (int argc, char **argv)
{
  int passed = 0, failed = 0;

  if (argc > 2 || (argc == 2 && strcmp (argv[1], "--help") == 0))
    {
      fprintf (argc > 2 ? stderr : stdout,
               "Usage: embed-test [NAME | --list]\n"
               "Runs every case (each in a child process), or the case "
               "NAME in this one.\n");
      return argc > 2 ? 2 : 0;
    }
  if (argc == 2 && strcmp (argv[1], "--list") == 0)
    {
      for (int i = 0; i < NCASES; i++)
        puts (cases[i].name);
      return 0;
    }
  if (argc == 2)
    {
      for (int i = 0; i < NCASES; i++)
        if (strcmp (cases[i].name, argv[1]) == 0)
          {
            int result = cases[i].run ();

            fflush (stderr);
            printf ("%s %s\n", result == 0 ? "ok  " : "FAIL", cases[i].name);
            return result == 0 ? 0 : 1;
          }
      fprintf (stderr, "embed-test: no case '%s' (embed-test --list "
               "names them)\n", argv[1]);
      return 2;
    }

  for (int i = 0; i < NCASES; i++)
    {
      if (run_forked (&cases[i]))
        passed++;
      else
        failed++;
    }
  printf ("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
