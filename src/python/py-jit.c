/* py-jit.c -- gpumem.jit and gpumem.jit_stats: kernels compiled from
   CUDA C source at run time (jit.c), called as the built-in ones are.  */

#include "gm-python.h"

#include <stdlib.h>
#include <string.h>

#include "jit.h"
#include "kernel-signature.h"

/* What jit_stats () returns: counts since the process started.  */
static struct
{
  long calls;              /* jit () calls */
  long reused;             /* answered by a function made earlier */
  long compiles;           /* NVRTC runs */
  long cache_hits;         /* read from the disk cache */
  long cache_misses;       /* not in it (compiled, then written) */
  long cache_corrupt;      /* unreadable files replaced */
  long cache_untrusted;    /* folders or files others could have
                              written: not read, not written */
  long cache_unwritable;   /* compiled without caching */
  double compile_seconds;  /* NVRTC's time, all runs */
  double last_compile_seconds;
} stats;

/* Reads OPTIONS (a sequence of str) into a new NULL-terminated array of
   UTF-8 strings that live as long as *KEEP (a new tuple).  */
static const char **
read_options (PyObject *options, int *count, PyObject **keep)
{
  PyObject *seq;
  const char **out;
  Py_ssize_t n;

  *keep = NULL;
  if (PyUnicode_Check (options) || PyBytes_Check (options))
    {
      PyErr_SetString (PyExc_TypeError, "jit: options must be a sequence "
                       "of str (a tuple or list), not one str");
      return NULL;
    }
  seq = PySequence_Tuple (options);
  if (seq == NULL)
    {
      PyErr_Format (PyExc_TypeError, "jit: options must be a sequence of "
                    "str, not %.100s", GMPY_TYPE_NAME (Py_TYPE (options)));
      return NULL;
    }
  n = PyTuple_GET_SIZE (seq);
  if (n > 256)
    {
      Py_DECREF (seq);
      PyErr_SetString (PyExc_ValueError, "jit: more than 256 options");
      return NULL;
    }
  out = calloc ((size_t) n + 1, sizeof *out);
  if (out == NULL)
    {
      Py_DECREF (seq);
      PyErr_NoMemory ();
      return NULL;
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      PyObject *item = PyTuple_GET_ITEM (seq, i);
      if (!PyUnicode_Check (item)
          || (out[i] = PyUnicode_AsUTF8 (item)) == NULL)
        {
          if (!PyErr_Occurred ())
            PyErr_Format (PyExc_TypeError, "jit: options[%zd] must be str, "
                          "not %.100s", i, GMPY_TYPE_NAME (Py_TYPE (item)));
          free (out);
          Py_DECREF (seq);
          return NULL;
        }
    }
  *count = (int) n;
  *keep = seq;
  return out;
}

/* Reads a str argument WHAT into *TEXT (UTF-8, owned by OBJ).  */
static int
str_arg (PyObject *obj, const char *what, const char **text)
{
  if (!PyUnicode_Check (obj))
    {
      PyErr_Format (PyExc_TypeError, "jit: %s must be str, not %.100s", what,
                    GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  *text = PyUnicode_AsUTF8 (obj);
  return *text == NULL ? -1 : 0;
}

/* A new gm_kernel NAME with the parameters of SIGNATURE, parsed once
   here: the caller's error (ValueError) before anything compiles.  It
   lives as long as the process once jit_kernel_finish gives it code (its
   function may be kept anywhere); until then jit_kernel_free frees it
   and *STORAGE, the block its parameters' names point into.  NULL with
   an exception set.  */
static gm_kernel *
jit_kernel_new (const char *name, const char *signature, char **storage)
{
  gm_kernel *kernel = calloc (1, sizeof *kernel);
  gm_status status;

  *storage = NULL;
  if (kernel == NULL || (kernel->name = strdup (name)) == NULL)
    {
      free (kernel);
      PyErr_NoMemory ();
      return NULL;
    }
  status = gm_kernel_signature_parse (kernel, signature, storage);
  if (status != GM_OK)
    {
      free ((char *) kernel->name);
      free (kernel);
      gmpy_raise (status);
      return NULL;
    }
  return kernel;
}

/* Frees KERNEL and STORAGE from jit_kernel_new (no code given yet).  */
static void
jit_kernel_free (gm_kernel *kernel, char *storage)
{
  if (kernel == NULL)
    return;
  free (storage);
  free ((char *) kernel->name);
  free (kernel);
}

/* Gives KERNEL the compiled CODE and its doc.  -1 with an exception
   set (KERNEL and CODE unchanged).  */
static int
jit_kernel_finish (gm_kernel *kernel, gm_jit_code *code)
{
  size_t size = 256 + strlen (code->arch);
  char *doc = malloc (size);

  if (doc == NULL)
    {
      PyErr_NoMemory ();
      return -1;
    }
  if (gm_backend_current->launches_jit)
    snprintf (doc, size, "A kernel compiled with NVRTC (gpumem.jit) for %s.",
              code->arch);
  else
    snprintf (doc, size, "A kernel compiled with NVRTC (gpumem.jit) for %s; "
              "the %s backend cannot launch it: compiled and checked only.",
              code->arch, gm_backend_current->name);
  kernel->doc = doc;
  kernel->origin = "jit";
  kernel->jit = code;
  return 0;
}

static PyObject *
jitpy_jit (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
  static const char *const names[] = {"source", "name", "signature",
                                      "options", "arch", NULL};
  gmpy_state *state = gmpy_state_get ();
  PyObject *arg[5], *options_keep = NULL, *memo_key = NULL, *fn = NULL;
  const char *source, *name, *signature, *arch_text = NULL;
  const char **options = NULL;
  char arch[32], *storage = NULL;
  /* The signature in one spelling, for the disk cache's key.  */
  char canonical[GM_MAX_KERNEL_PARAMS * 160];
  gm_jit_request request;
  gm_jit_result result;
  gm_kernel *kernel = NULL;
  gm_status status;
  int noptions = 0, major, minor;

  stats.calls++;
  if (gmpy_parse_args (args, nargs, kwnames, "jit", names, 3, 4, arg) < 0
      || str_arg (arg[0], "source", &source) < 0
      || str_arg (arg[1], "name", &name) < 0
      || str_arg (arg[2], "signature", &signature) < 0)
    return NULL;
  if (arg[3] != NULL
      && (options = read_options (arg[3], &noptions, &options_keep)) == NULL)
    return NULL;
  if (arg[4] != NULL && arg[4] != Py_None
      && str_arg (arg[4], "arch", &arch_text) < 0)
    goto done;
  if (name[0] == '\0')
    {
      PyErr_SetString (PyExc_ValueError, "jit: name is empty");
      goto done;
    }

  /* The arguments first: a bad signature or architecture is the
     caller's error (ValueError), found before NVRTC is looked for.  */
  if (arch_text != NULL)
    {
      status = gm_jit_check_arch (arch_text);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          goto done;
        }
    }
  kernel = jit_kernel_new (name, signature, &storage);
  if (kernel == NULL)
    goto done;

  status = gm_jit_nvrtc (&major, &minor);
  if (status != GM_OK)
    {
      gmpy_raise (status);
      goto done;
    }
  if (arch_text != NULL)
    snprintf (arch, sizeof arch, "%s", arch_text);
  else if (!gm_backend_current->launches_jit)
    {
      PyErr_Format (state->error, "jit: the %s backend cannot launch JIT "
                    "kernels (the cuda backend does), so it has no GPU to "
                    "compile for: give arch= (such as 'compute_90') to "
                    "compile and check the kernel only; the function "
                    "returned then refuses every call",
                    gm_backend_current->name);
      goto done;
    }
  else
    {
      gm_device_props props;
      status = gm_backend_current->device_props (gmpy_current_device (),
                                                 &props);
      if (status == GM_OK)
        status = gm_jit_arch_for (props.cc_major, props.cc_minor, arch,
                                  sizeof arch);
      if (status != GM_OK)
        {
          gmpy_raise (status);
          goto done;
        }
    }

  /* The same call for the same architecture gives the same function.  */
  memo_key = Py_BuildValue ("(OOOOs)", arg[0], arg[1], arg[2],
                            options_keep ? options_keep : Py_None, arch);
  if (memo_key == NULL)
    goto done;
  if (state->jit_kernels == NULL
      && (state->jit_kernels = PyDict_New ()) == NULL)
    goto done;
  fn = PyDict_GetItemWithError (state->jit_kernels, memo_key);
  if (fn != NULL)
    {
      stats.reused++;
      Py_INCREF (fn);
      goto done;
    }
  if (PyErr_Occurred ())
    goto done;

  request.source = source;
  request.name = name;
  /* (A signature too long for the buffer is keyed as written.)  */
  request.signature = gm_kernel_signature_format (kernel, canonical,
                                                  sizeof canonical) == 0
                      ? canonical : signature;
  request.options = options;
  request.noptions = noptions;
  request.arch = arch;
  Py_BEGIN_ALLOW_THREADS
  status = gm_jit_compile (&request, &result);
  Py_END_ALLOW_THREADS
  if (status != GM_OK)
    {
      if (result.log != NULL)
        PyErr_Format (state->error, "%s; NVRTC's log:\n%s",
                      gm_last_error ()->message, result.log);
      else
        gmpy_raise (status);
      free (result.log);
      goto done;
    }
  if (result.cache_hit)
    stats.cache_hits++;
  else
    {
      stats.compiles++;
      stats.cache_misses++;
      stats.compile_seconds += result.compile_seconds;
      stats.last_compile_seconds = result.compile_seconds;
    }
  if (result.cache_corrupt)
    stats.cache_corrupt++;
  if (result.cache_untrusted)
    {
      stats.cache_untrusted++;
      if (PyErr_WarnFormat (PyExc_RuntimeWarning, 1, "gpumem.jit: %s: it is "
                            "not trusted, so the kernel is compiled again, "
                            "kept for this process only, and nothing is "
                            "written there", result.cache_problem) < 0)
        {
          gm_jit_code_free (result.code);
          goto done;
        }
    }
  else if (!result.cache_hit && !result.cache_written)
    {
      stats.cache_unwritable++;
      if (PyErr_WarnFormat (PyExc_RuntimeWarning, 1, "gpumem.jit: %s; the "
                            "kernel is compiled without a cache",
                            result.cache_problem) < 0)
        {
          gm_jit_code_free (result.code);
          goto done;
        }
    }

  /* The signature against the kernel: a C++ kernel's lowered name
     gives its parameters' types.  */
  status = gm_kernel_signature_check_lowered (kernel, result.code->entry);
  if (status != GM_OK)
    {
      gm_jit_code_free (result.code);
      gmpy_raise (status);
      goto done;
    }
  if (jit_kernel_finish (kernel, result.code) < 0)
    {
      gm_jit_code_free (result.code);
      goto done;
    }
  /* Compiled for this device (no ARCH given): loaded now, so that the
     parameters the loaded kernel reports are checked here, not at its
     first call (code for a given ARCH may be another device's).  */
  if (arch_text == NULL && gm_backend_current->jit_load != NULL)
    {
      int device = gmpy_current_device ();
      Py_BEGIN_ALLOW_THREADS
      status = gm_backend_current->jit_load (kernel, device);
      Py_END_ALLOW_THREADS
      if (status != GM_OK)
        {
          gm_jit_code_free (kernel->jit);
          free ((char *) kernel->doc);
          kernel->jit = NULL;
          kernel->doc = NULL;
          gmpy_raise (status);
          goto done;
        }
    }
  /* The kernel has its code: it is the process's now, as is its
     function, held below or by the caller.  */
  fn = gmpy_kernel_function (kernel);
  kernel = NULL;
  storage = NULL;
  if (fn != NULL && PyDict_SetItem (state->jit_kernels, memo_key, fn) < 0)
    Py_CLEAR (fn);

done:
  jit_kernel_free (kernel, storage);
  free (options);
  Py_XDECREF (options_keep);
  Py_XDECREF (memo_key);
  return fn;
}

static PyObject *
jitpy_stats (PyObject *module, PyObject *unused)
{
  const char *dir = gm_jit_cache_dir ();

  return Py_BuildValue ("{s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:d,s:d,s:s}",
                        "calls", stats.calls, "reused", stats.reused,
                        "compiles", stats.compiles,
                        "cache_hits", stats.cache_hits,
                        "cache_misses", stats.cache_misses,
                        "cache_corrupt", stats.cache_corrupt,
                        "cache_unwritable", stats.cache_unwritable,
                        "cache_untrusted", stats.cache_untrusted,
                        "compile_seconds", stats.compile_seconds,
                        "last_compile_seconds", stats.last_compile_seconds,
                        "cache_dir", dir ? dir : "");
}

PyMethodDef gmpy_jit_methods[] = {
  {"jit", (PyCFunction) (void (*) (void)) jitpy_jit,
   METH_FASTCALL | METH_KEYWORDS,
   "jit(source, name, signature, options=(), arch=None)\n--\n\n"
   "Compile the __global__ function NAME of CUDA C SOURCE with NVRTC and\n"
   "return it as a checked function, called as gpumem.kernels.NAME is.\n"
   "SIGNATURE lists its parameters in gpumem's notation, such as\n"
   "'int64 n, float32 a, inout float32 *x[n]' (gpumem-kernels(7)); they\n"
   "must match the source's, and are checked against the compiled\n"
   "kernel (ValueError): a C++ kernel's mangled name gives their count,\n"
   "dtypes and const-ness, the cuda backend their count and sizes.\n"
   "OPTIONS go to NVRTC.  ARCH: 'sm_XY' or\n"
   "'compute_XY'; by default the current device's.  Compiled code is\n"
   "cached on disk under GPUMEM_CACHE_DIR, else $XDG_CACHE_HOME/gpumem,\n"
   "else ~/.cache/gpumem, and read back only from a folder and a file\n"
   "that only the user (or root) can write; the same call again\n"
   "returns the same function.\n"
   "Without grid= and block=, a launch has one thread per element of the\n"
   "longest array (blocks of 256).  Compile errors raise gpumem.Error\n"
   "with NVRTC's log; a bad signature or ARCH ValueError.  Launching\n"
   "needs the cuda backend: on the host backend ARCH is required, and\n"
   "the kernel is compiled and checked only."},
  {"jit_stats", jitpy_stats, METH_NOARGS,
   "jit_stats()\n--\n\n"
   "A dict of gpumem.jit's counts in this process: calls, reused,\n"
   "compiles, cache_hits, cache_misses, cache_corrupt, cache_unwritable,\n"
   "cache_untrusted (cache folders or files that others could have\n"
   "written, passed over),\n"
   "compile_seconds (all compiles), last_compile_seconds, cache_dir."},
  {NULL, NULL, 0, NULL}
};
