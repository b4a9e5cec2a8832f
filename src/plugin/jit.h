/* jit.h -- kernels compiled at run time from CUDA C source with NVRTC,
   and the on-disk cache of what it compiled.

   Plain C, no CUDA headers: NVRTC is opened with dlopen, so gpumem
   runs (and compiles kernels for an explicit architecture) where the
   library exists, with or without a GPU or the CUDA backend; the CUDA
   backend loads and launches the code (gm_jit_code).  */

#ifndef GM_JIT_H
#define GM_JIT_H

#include <stdbool.h>
#include <stddef.h>

#include "gm.h"

/* Compiled code, owned by its gm_kernel.  */
typedef struct gm_jit_code
{
  void *image;           /* CUBIN, or PTX with its terminating NUL */
  size_t size;
  char *entry;           /* the kernel's symbol (the lowered name) */
  char arch[32];         /* "sm_90" (CUBIN) or "compute_90" (PTX) */
  char key[65];          /* the cache key, hex */
  void *library;         /* the CUDA backend's loaded library and */
  void *function;        /* kernel handle, NULL until the first launch */
} gm_jit_code;

typedef struct gm_jit_request
{
  const char *source;
  const char *name;              /* the __global__ function's name */
  const char *signature;         /* its parameters, gpumem's notation */
  const char *const *options;    /* NVRTC options */
  int noptions;
  const char *arch;              /* "sm_XY" or "compute_XY" */
} gm_jit_request;

typedef struct gm_jit_result
{
  gm_jit_code *code;          /* malloc'd; gm_jit_code_free */
  bool cache_hit;             /* read from the cache, not compiled */
  bool cache_corrupt;         /* a cache file was unreadable and replaced */
  bool cache_untrusted;       /* the folder or file was not the user's
                                 alone (jit-cache.h): not read, not
                                 written */
  bool cache_written;         /* what was compiled is now in the cache */
  char cache_problem[512];    /* why the cache was not used, or "" */
  double compile_seconds;     /* NVRTC's time; 0 on a hit */
  char *log;                  /* NVRTC's log on a compile error, or NULL */
} gm_jit_result;

/* Opens NVRTC (GPUMEM_NVRTC, else the library configure found, else
   libnvrtc.so from the library path), once; *MAJOR.*MINOR its version.
   GM_ERR_UNAVAILABLE saying what was tried when none opens.  */
gm_status gm_jit_nvrtc (int *major, int *minor);

/* The path of the NVRTC library gm_jit_nvrtc opened, into BUF of SIZE
   bytes; false, with BUF empty, before it has opened one.  */
bool gm_jit_nvrtc_path (char *buf, size_t size);

/* The architecture to compile for a device of compute capability
   MAJOR.MINOR: "sm_XY" when NVRTC makes code for it, else PTX of the
   newest "compute_XY" it supports below.  Into BUF of SIZE bytes;
   GM_ERR_UNAVAILABLE when NVRTC supports none at or below it.  */
gm_status gm_jit_arch_for (int major, int minor, char *buf, size_t size);

/* GM_OK when ARCH names an architecture: "sm_" or "compute_" and two
   or three digits, an "a" after them allowed; else GM_ERR_VALUE saying
   what is accepted.  Needs no NVRTC.  */
gm_status gm_jit_check_arch (const char *arch);

/* Compiles REQUEST, or reads it from the cache (jit.c says where and
   how), into RESULT.  GM_ERR_VALUE for a bad architecture
   (gm_jit_check_arch), GM_ERR_FAILED when NVRTC does not compile it
   (RESULT->log holds NVRTC's log when it wrote one), GM_ERR_UNAVAILABLE
   without NVRTC, GM_ERR_HOST_NOMEM.  A cache that cannot be read or written is
   no error: RESULT->cache_problem says why.  Thread-safe once
   gm_jit_nvrtc has succeeded; may run without the GIL.  */
gm_status gm_jit_compile (const gm_jit_request *request,
                          gm_jit_result *result);

/* The cache folder: GPUMEM_CACHE_DIR, else $XDG_CACHE_HOME/gpumem, else
   $HOME/.cache/gpumem; NULL when none can be named.  Read once.  */
const char *gm_jit_cache_dir (void);

void gm_jit_code_free (gm_jit_code *code);

#endif /* GM_JIT_H */
