/* embed-api-test.c -- tests of the embedding C API (gpumem/embed.h),
   written as a user's program is: the installed headers alone.

   Named cases, each run in a forked child (Python starts once a
   process), as tests/embed-test.c runs its own:
     embed-api-test          every case; "ok NAME", "SKIP NAME" or
                             "FAIL NAME" each, then "N passed, N
                             failed"; exit 0 iff none failed
     embed-api-test NAME     the case NAME in this process (exit 77:
                             skipped, the reason on standard error)
   Every case runs on the host backend.  */

#define _POSIX_C_SOURCE 200809L

#include <gpumem/embed.h>
#include <gpumem/kernel.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond)                                                     \
  do                                                                    \
    {                                                                   \
      if (!(cond))                                                      \
        {                                                               \
          fprintf (stderr, "%s:%d: check failed: %s (last error: %s)\n", \
                   __FILE__, __LINE__, #cond, gm_embed_last_error ());  \
          return 1;                                                     \
        }                                                               \
    }                                                                   \
  while (0)

/* The program's own kernel: y[i] = 2 * x[i] for i < n.  */
GM_PLUGIN_KERNEL_HOST (e_double, "y[i] = 2 * x[i] for i < n.",
  GM_SCALAR (0, n, int64)
  GM_IN     (1, x, float64, "n")
  GM_OUT    (2, y, float64, "n"))

void
gm_ref_e_double (int64_t n, const double *x, double *y)
{
  for (int64_t i = 0; i < n; i++)
    y[i] = 2 * x[i];
}

GM_PLUGIN_TABLE (e_double)

static const gm_embed_options host = {GM_EMBED_BACKEND_HOST, 1, NULL, 0,
                                      NULL};

static int
case_own_kernel (void)
{
  CHECK (gm_embed_register_kernels (gm_plugin_table (), "embed-api-test")
         == GM_EMBED_OK);
  CHECK (gm_embed_init (&host) == GM_EMBED_OK);
  CHECK (gm_embed_run_string (
           "import gpumem, numpy as np\n"
           "x = gpumem.to_device(np.arange(5.0))\n"
           "y = gpumem.zeros(5, 'float64')\n"
           "gpumem.kernels.e_double(5, x, y)\n"
           "assert y.copy_to_host().tolist() == [0, 2, 4, 6, 8]\n"
           "assert 'embed-api-test' in gpumem.kernels.e_double.__doc__\n")
         == GM_EMBED_OK);
  /* State persists between calls, in __main__.  */
  CHECK (gm_embed_run_string ("assert y.copy_to_host()[4] == 8")
         == GM_EMBED_OK);
  CHECK (gm_embed_finish () == GM_EMBED_OK);
  return 0;
}

static int
case_exceptions (void)
{
  CHECK (gm_embed_init (&host) == GM_EMBED_OK);
  CHECK (gm_embed_run_string ("raise ValueError('boom')")
         == GM_EMBED_EXCEPTION);
  CHECK (strstr (gm_embed_last_error (), "ValueError: boom") != NULL);
  CHECK (gm_embed_run_string ("import gpumem\n"
                              "gpumem.zeros(4).copy_to_host(out=3)")
         == GM_EMBED_EXCEPTION);
  CHECK (gm_embed_run_string ("raise SystemExit(0)") == GM_EMBED_OK);
  CHECK (gm_embed_run_string ("raise SystemExit") == GM_EMBED_OK);
  CHECK (gm_embed_run_string ("raise SystemExit(3)") == GM_EMBED_EXCEPTION);
  CHECK (strstr (gm_embed_last_error (), "SystemExit: 3") != NULL);
  CHECK (gm_embed_run_string ("syntax error here") == GM_EMBED_EXCEPTION);
  CHECK (strstr (gm_embed_last_error (), "SyntaxError") != NULL);
  /* Still usable afterwards.  */
  CHECK (gm_embed_run_string ("import gpumem; gpumem.zeros(3)")
         == GM_EMBED_OK);
  CHECK (gm_embed_finish () == GM_EMBED_OK);
  return 0;
}

static int
case_run_file (void)
{
  char dir[] = "/tmp/gpumem-embed-XXXXXX", path[64], helper[64];
  FILE *fp;

  CHECK (mkdtemp (dir) != NULL);
  snprintf (path, sizeof path, "%s/script.py", dir);
  snprintf (helper, sizeof helper, "%s/helper_mod.py", dir);
  fp = fopen (helper, "w");
  CHECK (fp != NULL);
  fputs ("VALUE = 42\n", fp);
  fclose (fp);
  fp = fopen (path, "w");
  CHECK (fp != NULL);
  fputs ("import gpumem, helper_mod\n"
         "assert helper_mod.VALUE == 42\n"
         "assert __file__.endswith('script.py')\n"
         "assert gpumem.backend == 'host'\n", fp);
  fclose (fp);
  CHECK (gm_embed_init (&host) == GM_EMBED_OK);
  CHECK (gm_embed_run_file (path) == GM_EMBED_OK);
  CHECK (gm_embed_run_file ("/no/such/script.py") == GM_EMBED_USAGE);
  CHECK (strstr (gm_embed_last_error (), "/no/such/script.py") != NULL);
  CHECK (gm_embed_finish () == GM_EMBED_OK);
  unlink (path);
  unlink (helper);
  rmdir (dir);
  return 0;
}

static int
case_order (void)
{
  CHECK (gm_embed_run_string ("pass") == GM_EMBED_STATE);
  CHECK (strstr (gm_embed_last_error (), "gm_embed_init first") != NULL);
  CHECK (gm_embed_finish () == GM_EMBED_STATE);
  CHECK (gm_embed_init (&host) == GM_EMBED_OK);
  CHECK (gm_embed_init (&host) == GM_EMBED_STATE);
  CHECK (gm_embed_register_kernels (gm_plugin_table (), "late")
         == GM_EMBED_STATE);
  CHECK (gm_embed_run_string (NULL) == GM_EMBED_USAGE);
  CHECK (gm_embed_finish () == GM_EMBED_OK);
  CHECK (gm_embed_run_string ("pass") == GM_EMBED_STATE);
  CHECK (strstr (gm_embed_last_error (), "finished") != NULL);
  return 0;
}

static int
case_bad_tables (void)
{
  static const gm_plugin_kernel clash = {"saxpy", "", "int64 n", NULL, NULL};
  static const gm_plugin_kernel bad = {"bad_sig", "", "int64 n, float32 x[n]",
                                       NULL, NULL};
  static const gm_plugin_kernel *const clash_list[] = {&clash};
  static const gm_plugin_kernel *const bad_list[] = {&bad};
  gm_plugin_info table = {7, 1, clash_list};
  gm_embed_options bad_backend = host;

  CHECK (gm_embed_register_kernels (&table, "prog") == GM_EMBED_KERNELS);
  CHECK (strstr (gm_embed_last_error (), "ABI version 7") != NULL);
  table.abi = GM_PLUGIN_ABI;
  CHECK (gm_embed_register_kernels (&table, "prog") == GM_EMBED_KERNELS);
  CHECK (strstr (gm_embed_last_error (), "neither") != NULL
         || strstr (gm_embed_last_error (), "clashes") != NULL);
  table.kernels = bad_list;
  CHECK (gm_embed_register_kernels (&table, "prog") == GM_EMBED_KERNELS);
  CHECK (strstr (gm_embed_last_error (), "prog: kernel 'bad_sig'") != NULL);
  CHECK (gm_embed_register_kernels (NULL, "prog") == GM_EMBED_KERNELS);
  bad_backend.backend = (gm_embed_backend) 9;
  CHECK (gm_embed_init (&bad_backend) == GM_EMBED_USAGE);
  return 0;
}

/* The folder of tests/plugins/ (next to this program), from argv[0].  */
static char plugins[4096] = "plugins";

static int
case_load_kernels (void)
{
  char good[4200], no_table[4200], list[8500];

  snprintf (good, sizeof good, "%s/good.so", plugins);
  snprintf (no_table, sizeof no_table, "%s/no_table.so", plugins);
  if (access (good, R_OK) != 0)
    {
      fprintf (stderr, "skip: %s is not built (make tests/plugins/stamp)\n",
               good);
      return 77;
    }
  CHECK (gm_embed_load_kernels ("/no/such/plugin.so") == GM_EMBED_KERNELS);
  CHECK (strstr (gm_embed_last_error (), "/no/such/plugin.so") != NULL);
  CHECK (gm_embed_load_kernels (no_table) == GM_EMBED_KERNELS);
  CHECK (strstr (gm_embed_last_error (), "no_table.so: not a gpumem kernel "
                 "plugin") != NULL);
  CHECK (gm_embed_load_kernels (NULL) == GM_EMBED_OK);
  CHECK (gm_embed_load_kernels ("") == GM_EMBED_OK);
  /* GPUMEM_KERNELS's parsing: empty entries skipped.  */
  snprintf (list, sizeof list, ":%s::", good);
  CHECK (gm_embed_load_kernels (list) == GM_EMBED_OK);
  CHECK (gm_embed_init (&host) == GM_EMBED_OK);
  CHECK (gm_embed_load_kernels (good) == GM_EMBED_STATE);
  CHECK (gm_embed_run_string (
           "import gpumem, numpy as np\n"
           "x = gpumem.to_device(np.ones(3, np.float32))\n"
           "gpumem.kernels.p_scale(3, 4.0, x)\n"
           "assert x.copy_to_host().tolist() == [4.0] * 3\n"
           "assert 'saxpy' in dict(gpumem.kernels.list())\n")
         == GM_EMBED_OK);
  CHECK (gm_embed_finish () == GM_EMBED_OK);
  return 0;
}

typedef struct
{
  const char *name;
  int (*run) (void);
} test_case;

static const test_case cases[] = {
  {"own_kernel", case_own_kernel},
  {"exceptions", case_exceptions},
  {"run_file", case_run_file},
  {"order", case_order},
  {"bad_tables", case_bad_tables},
  {"load_kernels", case_load_kernels},
};
#define NCASES ((int) (sizeof cases / sizeof cases[0]))

int
main (int argc, char **argv)
{
  int passed = 0, failed = 0;
  const char *slash = strrchr (argv[0], '/');

  if (slash != NULL)
    snprintf (plugins, sizeof plugins, "%.*s/plugins",
              (int) (slash - argv[0]), argv[0]);
  if (argc == 2)
    {
      for (int i = 0; i < NCASES; i++)
        if (strcmp (cases[i].name, argv[1]) == 0)
          return cases[i].run ();
      fprintf (stderr, "embed-api-test: no case '%s'\n", argv[1]);
      return 2;
    }
  for (int i = 0; i < NCASES; i++)
    {
      pid_t pid;
      int status = 1;

      fflush (stdout);
      pid = fork ();
      if (pid == 0)
        _exit (cases[i].run ());
      if (pid < 0 || waitpid (pid, &status, 0) != pid
          || !WIFEXITED (status)
          || (WEXITSTATUS (status) != 0 && WEXITSTATUS (status) != 77))
        {
          failed++;
          printf ("FAIL %s\n", cases[i].name);
        }
      else if (WEXITSTATUS (status) == 77)
        printf ("SKIP %s\n", cases[i].name);
      else
        {
          passed++;
          printf ("ok   %s\n", cases[i].name);
        }
    }
  printf ("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
