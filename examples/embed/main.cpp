// main.cpp -- an existing C++ program that embeds gpumem: it registers
// a kernel of its own, starts gpumem and runs Python code that uses its
// kernel and gpumem's built-in ones, then reads the status codes.
//
//   embed [host|cuda|auto] [SCRIPT]
//
// CMakeLists.txt builds it against an installed gpumem found by
// pkg-config.  gpumem-capi(3) is the manual.

#include <gpumem/embed.h>
#include <gpumem/kernel.h>

#include <cstdio>
#include <cstring>

// The program's own kernel, in the notation of gpumem's kernels.def:
// a C reference only, so the host backend runs it and the cuda backend
// refuses it with a Python exception (the script shows both).
GM_PLUGIN_KERNEL_HOST (clamp, "x[i] = min (max (x[i], lo), hi) for i < n.",
  GM_SCALAR (0, n, int64)
  GM_SCALAR (1, lo, float32)
  GM_SCALAR (2, hi, float32)
  GM_INOUT  (3, x, float32, "n"))

void
gm_ref_clamp (int64_t n, float lo, float hi, float *x)
{
  for (int64_t i = 0; i < n; i++)
    x[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

GM_PLUGIN_TABLE (clamp)

static const char script[] = R"(
import numpy as np
import gpumem

k = gpumem.kernels
x = gpumem.to_device(np.linspace(-2, 2, 9, dtype=np.float32))
y = gpumem.zeros(9)
k.saxpy(9, 2.0, x, y)                       # gpumem's own kernel
assert np.allclose(y.copy_to_host(), 2 * np.linspace(-2, 2, 9))
try:
    k.clamp(9, -1.0, 1.0, x)                # the program's kernel
    assert x.copy_to_host().min() == -1 and x.copy_to_host().max() == 1
    print("embed: clamp ran on the", gpumem.backend, "backend")
except gpumem.Error as exc:
    print("embed: clamp refused on the", gpumem.backend, "backend:", exc)
print("embed: kernels", [name for name, _ in k.list()])
)";

int
main (int argc, char **argv)
{
  gm_embed_options options = {GM_EMBED_BACKEND_AUTO, 1, nullptr, 0, nullptr};

  if (argc > 1 && std::strcmp (argv[1], "host") == 0)
    options.backend = GM_EMBED_BACKEND_HOST;
  else if (argc > 1 && std::strcmp (argv[1], "cuda") == 0)
    options.backend = GM_EMBED_BACKEND_CUDA;

  if (gm_embed_register_kernels (gm_plugin_table (), "embed example")
      != GM_EMBED_OK)
    {
      std::fprintf (stderr, "embed: %s\n", gm_embed_last_error ());
      return 1;
    }
  gm_embed_status status = gm_embed_init (&options);
  if (status != GM_EMBED_OK)
    {
      std::fprintf (stderr, "embed: %s\n", gm_embed_last_error ());
      return status == GM_EMBED_UNAVAILABLE ? 77 : 1;
    }
  status = gm_embed_run_string (script);
  if (status == GM_EMBED_OK && argc > 2)
    status = gm_embed_run_file (argv[2]);
  // An error the program expects, and its status code (Python prints
  // the traceback to standard error).
  if (status == GM_EMBED_OK)
    std::printf ("embed: next, a ValueError on purpose\n");
  if (status == GM_EMBED_OK
      && gm_embed_run_string ("raise ValueError('on purpose')")
         != GM_EMBED_EXCEPTION)
    status = GM_EMBED_USAGE;
  if (gm_embed_finish () != GM_EMBED_OK && status == GM_EMBED_OK)
    status = GM_EMBED_EXCEPTION;
  if (status != GM_EMBED_OK)
    std::fprintf (stderr, "embed: %s\n", gm_embed_last_error ());
  else
    std::printf ("embed example: ok\n");
  return status == GM_EMBED_OK ? 0 : 1;
}
