/* test-plugin.c -- kernel plugins for tests/test_plugins.py, built as
   plain C (no CUDA) into one library per variant: -DVARIANT_good is a
   plugin that loads; -DVARIANT_marker one that loads and, as it is
   loaded, makes the file GM_TEST_PLUGIN_MARKER names (so a test sees
   whether its code ran); every other variant is refused in its own
   way.  */

#include <gpumem/kernel.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef VARIANT_marker
__attribute__ ((constructor)) static void
make_marker (void)
{
  const char *path = getenv ("GM_TEST_PLUGIN_MARKER");
  FILE *fp = path ? fopen (path, "w") : NULL;

  if (fp != NULL)
    fclose (fp);
}
#endif

#ifdef VARIANT_good

/* x[i] = a * x[i] for i < n.  */
GM_PLUGIN_KERNEL_HOST (p_scale, "x[i] = a * x[i] for i < n.",
  GM_SCALAR (0, n, int64)
  GM_SCALAR (1, a, float32)
  GM_INOUT  (2, x, float32, "n"))

void
gm_ref_p_scale (int64_t n, float a, float *x)
{
  for (int64_t i = 0; i < n; i++)
    x[i] = a * x[i];
}

/* y[i] = value for i < 2 * rows + 1.  */
GM_PLUGIN_KERNEL_HOST (p_fill, "y[i] = value for i < 2 * rows + 1.",
  GM_OUT    (0, y, int32, "2 * rows + 1")
  GM_SCALAR (1, rows, int32)
  GM_SCALAR (2, value, int32))

void
gm_ref_p_fill (int32_t *y, int32_t rows, int32_t value)
{
  for (int64_t i = 0; i < 2 * (int64_t) rows + 1; i++)
    y[i] = value;
}

/* A kernel with a launcher and no C reference, written by hand: the
   launcher does nothing (this file has no CUDA); the tests call it on
   the host backend only, which must refuse it.  */
static int
p_noref_launch (const gm_arg *args, const gm_launch_cfg *cfg, void *stream)
{
  (void) args;
  (void) cfg;
  (void) stream;
  return 0;
}

static const gm_plugin_kernel gm_plugin_kernel_p_noref = {
  "p_noref", "Has no C reference.", "inout float32 *x[1]", p_noref_launch,
  NULL
};

GM_PLUGIN_TABLE (p_scale, p_fill, p_noref)

#else /* the refused variants */

static void
nothing (const gm_arg *args)
{
  (void) args;
}

#if defined VARIANT_clash
#define NAME "saxpy"
#define SIGNATURE "int64 n"
#elif defined VARIANT_clash_plugin
#define NAME "p_scale"
#define SIGNATURE "int64 n"
#elif defined VARIANT_bad_signature
#define NAME "bad_sig"
#define SIGNATURE "int64 n, float32 *x"
#elif defined VARIANT_bad_dtype
#define NAME "bad_dtype"
#define SIGNATURE "int64 n, float17 *x[n]"
#elif defined VARIANT_bad_length
#define NAME "bad_length"
#define SIGNATURE "int64 n, float32 *x[m + 1]"
#elif defined VARIANT_bad_name
#define NAME "9lives"
#define SIGNATURE "int64 n"
#else
#define NAME "k_one"
#define SIGNATURE "int64 n"
#endif

#ifdef VARIANT_neither
#define REFERENCE NULL
#else
#define REFERENCE nothing
#endif

static const gm_plugin_kernel one = {NAME, "A test kernel.", SIGNATURE, NULL,
                                     REFERENCE};
static const gm_plugin_kernel two = {"k_two", "A test kernel.", "int64 n",
                                     NULL, nothing};
#ifdef VARIANT_duplicate
static const gm_plugin_kernel *const kernels[] = {&one, &two, &one};
#else
static const gm_plugin_kernel *const kernels[] = {&one, &two};
#endif

#ifdef VARIANT_abi2
#define ABI 2
#else
#define ABI GM_PLUGIN_ABI
#endif

static const gm_plugin_info info = {
  ABI, sizeof kernels / sizeof kernels[0], kernels
};

#ifndef VARIANT_no_table
GM_PLUGIN_EXTERN_C GM_PLUGIN_EXPORT const gm_plugin_info *
gm_plugin_table (void);

const gm_plugin_info *
gm_plugin_table (void)
{
#ifdef VARIANT_null_table
  (void) info;
  return NULL;
#else
  return &info;
#endif
}
#else
/* A library that is no plugin: it exports something else.  */
GM_PLUGIN_EXTERN_C GM_PLUGIN_EXPORT const gm_plugin_info *not_a_table (void);

const gm_plugin_info *
not_a_table (void)
{
  return &info;
}
#endif

#endif
