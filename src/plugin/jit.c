/* jit.c -- compiling kernels with NVRTC, and caching what it compiled
   (jit.h).

   NVRTC is opened with dlopen (nvrtc-abi.h declares the dozen calls
   used), so a gpumem built without it, or run where it is missing,
   works and says so only when asked to compile.

   The cache.  What NVRTC made is kept in one file per kernel, in the
   folder gm_jit_cache_dir names, called KEY.bin, KEY being the SHA-256
   (hex) of everything the code depends on, and of the signature it was
   checked against: this file format's version, NVRTC's version, the
   architecture, the kernel's name, the signature, the options and the
   source.  A file is

     "GMJIT001"            8 bytes, the format
     key                   32 bytes, the SHA-256 the name is made of
     entry length          4 bytes, little-endian
     image length          8 bytes, little-endian
     image checksum        32 bytes, SHA-256 of the image
     entry, image          the symbol to launch, the CUBIN or PTX

   and is used only when it is trusted and all of it checks out.  The
   key and the checksum protect against damage, not against other
   users: anyone can compute both, so a file is read only from a folder
   and a file that nobody but the user or root can have written
   (jit-cache.c, which reads and writes the files, says exactly what
   is trusted); anything else is compiled again, kept in memory for the
   process, and nothing is written there.  A trusted file that does not
   check out (truncated, overwritten, another format) counts as corrupt and is
   replaced by a fresh compile.  Files are written whole to a temporary
   name in the same folder and renamed into place, so a reader never
   sees half a file, and two processes compiling the same kernel each
   write a complete one.  A folder that cannot be made or written
   (read-only, on a read-only file system, a file in the way) only
   stops the caching: the kernel is compiled each time, and the result
   says why.  */

/* strdup, clock_gettime.  */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config-facts.h"
#include "jit.h"
#include "jit-cache.h"
#include "nvrtc-abi.h"
#include "sha256.h"

static nvrtc_api nvrtc;
static bool nvrtc_loaded;

/* Looks up every call of API in the library HANDLE.  0, or -1 when one
   is missing.  */
static int
nvrtc_api_bind (nvrtc_api *api, void *handle)
{
#define BIND(field, symbol)                                  \
  if ((*(void **) &api->field = dlsym (handle, symbol)) == NULL) \
    return -1;
  BIND (GetErrorString, "nvrtcGetErrorString");
  BIND (Version, "nvrtcVersion");
  BIND (GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  BIND (GetSupportedArchs, "nvrtcGetSupportedArchs");
  BIND (CreateProgram, "nvrtcCreateProgram");
  BIND (DestroyProgram, "nvrtcDestroyProgram");
  BIND (CompileProgram, "nvrtcCompileProgram");
  BIND (GetPTXSize, "nvrtcGetPTXSize");
  BIND (GetPTX, "nvrtcGetPTX");
  BIND (GetCUBINSize, "nvrtcGetCUBINSize");
  BIND (GetCUBIN, "nvrtcGetCUBIN");
  BIND (GetProgramLogSize, "nvrtcGetProgramLogSize");
  BIND (GetProgramLog, "nvrtcGetProgramLog");
  BIND (AddNameExpression, "nvrtcAddNameExpression");
  BIND (GetLoweredName, "nvrtcGetLoweredName");
#undef BIND
  return 0;
}

gm_status
gm_jit_nvrtc (int *major, int *minor)
{
  static const char *const fallbacks[] = {
    "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"
  };
  /* NVIDIA's NVRTC wheels in the site-packages folder of a pip-installed
     module: nvidia-cuda-nvrtc (CUDA 13 on), nvidia-cuda-nvrtc-cu12.  */
  static const char *const wheels[] = {
    "nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
  };
  char wheel_paths[2][4096];
  const char *tried[8];
  int ntried = 0;
  const char *env = getenv ("GPUMEM_NVRTC");
  void *handle = NULL;
  char list[2048] = "";

  if (nvrtc_loaded)
    {
      *major = nvrtc.major;
      *minor = nvrtc.minor;
      return GM_OK;
    }
  if (env != NULL && *env != '\0')
    tried[ntried++] = env;
  else
    {
      for (size_t i = 0; i < sizeof wheels / sizeof wheels[0]; i++)
        if (gm_env_beside_self (wheels[i], wheel_paths[i],
                                sizeof wheel_paths[i]))
          tried[ntried++] = wheel_paths[i];
#ifdef GM_NVRTC_LIBRARY
      tried[ntried++] = GM_NVRTC_LIBRARY;
#endif
      for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; i++)
        tried[ntried++] = fallbacks[i];
    }
  for (int i = 0; i < ntried && handle == NULL; i++)
    handle = dlopen (tried[i], RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL)
    {
      for (int i = 0; i < ntried; i++)
        snprintf (list + strlen (list), sizeof list - strlen (list), "%s%s",
                  i ? ", " : "", tried[i]);
      return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "NVRTC, CUDA's "
                           "run-time compiler, is not available (tried %s): "
                           "pip install 'gpumem[jit]' (NVIDIA's "
                           "nvidia-cuda-nvrtc wheel), install the CUDA "
                           "toolkit, or name the library in GPUMEM_NVRTC",
                           list);
    }
  if (nvrtc_api_bind (&nvrtc, handle) != 0
      || nvrtc.Version (&nvrtc.major, &nvrtc.minor) != NVRTC_SUCCESS)
    {
      dlclose (handle);
      return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the NVRTC library "
                           "found lacks the calls gpumem needs (NVRTC 11.2 "
                           "or newer is)");
    }
  nvrtc_loaded = true;
  *major = nvrtc.major;
  *minor = nvrtc.minor;
  return GM_OK;
}

bool
gm_jit_nvrtc_path (char *buf, size_t size)
{
  if (!nvrtc_loaded)
    {
      if (size > 0)
        buf[0] = '\0';
      return false;
    }
  return gm_loaded_from (*(void **) &nvrtc.Version, buf, size);
}

gm_status
gm_jit_arch_for (int major, int minor, char *buf, size_t size)
{
  int want = major * 10 + minor, count = 0, best = 0;
  int archs[128];

  if (nvrtc.GetNumSupportedArchs (&count) != NVRTC_SUCCESS || count <= 0
      || count > 128 || nvrtc.GetSupportedArchs (archs) != NVRTC_SUCCESS)
    {
      snprintf (buf, size, "sm_%d", want);
      return GM_OK;
    }
  for (int i = 0; i < count; i++)
    {
      if (archs[i] == want)
        {
          snprintf (buf, size, "sm_%d", want);
          return GM_OK;
        }
      if (archs[i] < want && archs[i] > best)
        best = archs[i];
    }
  if (best == 0)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "NVRTC %d.%d cannot "
                         "compile for compute capability %d.%d", nvrtc.major,
                         nvrtc.minor, major, minor);
  snprintf (buf, size, "compute_%d", best);
  return GM_OK;
}

const char *
gm_jit_cache_dir (void)
{
  /* Read at each compile (a script may set GPUMEM_CACHE_DIR before it
     compiles), here alone.  */
  static _Thread_local char dir[4096];
  const char *env = getenv ("GPUMEM_CACHE_DIR"), *base;

  if (env != NULL && *env != '\0')
    {
      snprintf (dir, sizeof dir, "%s", env);
      return dir;
    }
  base = getenv ("XDG_CACHE_HOME");
  if (base != NULL && base[0] == '/')
    {
      snprintf (dir, sizeof dir, "%s/gpumem", base);
      return dir;
    }
  base = getenv ("HOME");
  if (base != NULL && *base != '\0')
    {
      snprintf (dir, sizeof dir, "%s/.cache/gpumem", base);
      return dir;
    }
  return NULL;
}

void
gm_jit_code_free (gm_jit_code *code)
{
  if (code == NULL)
    return;
  free (code->image);
  free (code->entry);
  free (code);
}


static void
hex (const unsigned char digest[32], char out[65])
{
  for (int i = 0; i < 32; i++)
    snprintf (out + 2 * i, 3, "%02x", digest[i]);
}

/* The cache key of REQUEST into DIGEST.  */
static void
cache_key (const gm_jit_request *request, unsigned char digest[32])
{
  gm_sha256 ctx;
  char version[32];
  int n = snprintf (version, sizeof version, "%d.%d", nvrtc.major,
                    nvrtc.minor);

  gm_sha256_init (&ctx);
  gm_sha256_update (&ctx, GM_JIT_CACHE_MAGIC, sizeof GM_JIT_CACHE_MAGIC);
  gm_sha256_update (&ctx, version, (size_t) n + 1);
  gm_sha256_update (&ctx, request->arch, strlen (request->arch) + 1);
  gm_sha256_update (&ctx, request->name, strlen (request->name) + 1);
  gm_sha256_update (&ctx, request->signature,
                    strlen (request->signature) + 1);
  for (int i = 0; i < request->noptions; i++)
    gm_sha256_update (&ctx, request->options[i],
                      strlen (request->options[i]) + 1);
  gm_sha256_update (&ctx, "\n", 1);
  gm_sha256_update (&ctx, request->source, strlen (request->source));
  gm_sha256_final (&ctx, digest);
}


/* Runs NVRTC on REQUEST into CODE (image, size, entry).  */
static gm_status
compile (const gm_jit_request *request, gm_jit_code *code, char **log)
{
  const char **options = NULL;
  nvrtcProgram program = NULL;
  char arch_option[64];
  const char *lowered = NULL;
  bool cubin = strncmp (request->arch, "sm_", 3) == 0;
  size_t size = 0, log_size = 0;
  gm_status status = GM_OK;
  int rc;

  *log = NULL;
  options = calloc ((size_t) request->noptions + 1, sizeof *options);
  if (options == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of host memory");
  for (int i = 0; i < request->noptions; i++)
    options[i] = request->options[i];
  snprintf (arch_option, sizeof arch_option, "--gpu-architecture=%s",
            request->arch);
  options[request->noptions] = arch_option;

  rc = nvrtc.CreateProgram (&program, request->source, request->name, 0,
                            NULL, NULL);
  if (rc != NVRTC_SUCCESS)
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "jit: kernel '%s': "
                             "nvrtcCreateProgram: %s", request->name,
                             nvrtc.GetErrorString (rc));
      goto done;
    }
  /* A name expression finds the kernel by its C++ name, extern "C" or
     not, templates included.  */
  rc = nvrtc.AddNameExpression (program, request->name);
  if (rc == NVRTC_SUCCESS)
    rc = nvrtc.CompileProgram (program, request->noptions + 1, options);
  if (rc != NVRTC_SUCCESS)
    {
      if (nvrtc.GetProgramLogSize (program, &log_size) == NVRTC_SUCCESS
          && log_size > 1 && (*log = malloc (log_size)) != NULL
          && nvrtc.GetProgramLog (program, *log) != NVRTC_SUCCESS)
        {
          free (*log);
          *log = NULL;
        }
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "jit: kernel '%s' does "
                             "not compile for %s (%s)", request->name,
                             request->arch, nvrtc.GetErrorString (rc));
      goto done;
    }
  rc = nvrtc.GetLoweredName (program, request->name, &lowered);
  if (rc != NVRTC_SUCCESS || lowered == NULL)
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "jit: the source has no "
                             "__global__ function '%s'", request->name);
      goto done;
    }
  code->entry = strdup (lowered);
  rc = cubin ? nvrtc.GetCUBINSize (program, &size)
             : nvrtc.GetPTXSize (program, &size);
  if (rc != NVRTC_SUCCESS || size == 0)
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "jit: kernel '%s': NVRTC "
                             "made no %s: %s", request->name,
                             cubin ? "CUBIN" : "PTX",
                             nvrtc.GetErrorString (rc));
      goto done;
    }
  code->image = malloc (size);
  if (code->entry == NULL || code->image == NULL)
    {
      status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                             "out of host memory");
      goto done;
    }
  rc = cubin ? nvrtc.GetCUBIN (program, code->image)
             : nvrtc.GetPTX (program, code->image);
  if (rc != NVRTC_SUCCESS)
    {
      status = gm_error_set (GM_ERR_FAILED, 0, NULL, "jit: kernel '%s': %s",
                             request->name, nvrtc.GetErrorString (rc));
      goto done;
    }
  code->size = size;
done:
  if (program != NULL)
    nvrtc.DestroyProgram (&program);
  free (options);
  return status;
}

gm_status
gm_jit_check_arch (const char *arch)
{
  const char *digits = strncmp (arch, "sm_", 3) == 0 ? arch + 3
                       : strncmp (arch, "compute_", 8) == 0 ? arch + 8
                                                            : NULL;
  size_t n = digits ? strspn (digits, "0123456789") : 0;

  if (digits == NULL || n < 2 || n > 3
      || (digits[n] != '\0' && !(digits[n] == 'a' && digits[n + 1] == '\0')))
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "jit: arch '%s' is not an "
                         "architecture: give sm_XY (code for compute "
                         "capability X.Y) or compute_XY (PTX)", arch);
  return GM_OK;
}

gm_status
gm_jit_compile (const gm_jit_request *request, gm_jit_result *result)
{
  unsigned char key[32];
  char name[80];
  const char *dir;
  gm_jit_code *code;
  gm_status status;
  gm_jit_cache_found found;
  int major, minor;

  memset (result, 0, sizeof *result);
  status = gm_jit_check_arch (request->arch);
  if (status != GM_OK)
    return status;
  status = gm_jit_nvrtc (&major, &minor);
  if (status != GM_OK)
    return status;
  code = calloc (1, sizeof *code);
  if (code == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL, "out of host memory");
  snprintf (code->arch, sizeof code->arch, "%s", request->arch);
  cache_key (request, key);
  hex (key, code->key);

  dir = gm_jit_cache_dir ();
  snprintf (name, sizeof name, "%s.bin", code->key);
  if (dir == NULL)
    snprintf (result->cache_problem, sizeof result->cache_problem,
              "no cache folder: set GPUMEM_CACHE_DIR, XDG_CACHE_HOME or "
              "HOME");
  else
    {
      found = gm_jit_cache_read (dir, name, key, code, result->cache_problem,
                                 sizeof result->cache_problem);
      result->cache_hit = found == GM_JIT_CACHE_HIT;
      result->cache_corrupt = found == GM_JIT_CACHE_CORRUPT;
      result->cache_untrusted = found == GM_JIT_CACHE_UNTRUSTED;
    }

  if (!result->cache_hit)
    {
      struct timespec t0, t1;
      clock_gettime (CLOCK_MONOTONIC, &t0);
      status = compile (request, code, &result->log);
      clock_gettime (CLOCK_MONOTONIC, &t1);
      result->compile_seconds = (double) (t1.tv_sec - t0.tv_sec)
                                + (double) (t1.tv_nsec - t0.tv_nsec) * 1e-9;
      if (status != GM_OK)
        {
          gm_jit_code_free (code);
          return status;
        }
      /* Nothing is written where others could have written.  */
      if (dir != NULL && !result->cache_untrusted)
        {
          int written = gm_jit_cache_write (dir, name, key, code,
                                            result->cache_problem,
                                            sizeof result->cache_problem);
          result->cache_written = written == 0;
          result->cache_untrusted = written == -2;
        }
    }
  result->code = code;
  return GM_OK;
}
