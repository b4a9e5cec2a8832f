/* nvrtc-abi.h -- the part of NVRTC's C interface that jit.c calls,
   declared here so that gpumem builds without the CUDA toolkit's
   nvrtc.h: jit.c opens the library with dlopen and looks each call up.
   The names, argument types and NVRTC_SUCCESS == 0 are NVRTC's, stable
   since CUDA 11.2.  */

#ifndef GM_NVRTC_ABI_H
#define GM_NVRTC_ABI_H

#include <stddef.h>

typedef struct _nvrtcProgram *nvrtcProgram;
typedef int nvrtcResult;
#define NVRTC_SUCCESS 0

typedef struct nvrtc_api
{
  int major, minor;
  const char *(*GetErrorString) (nvrtcResult result);
  nvrtcResult (*Version) (int *major, int *minor);
  nvrtcResult (*GetNumSupportedArchs) (int *count);
  nvrtcResult (*GetSupportedArchs) (int *archs);
  nvrtcResult (*CreateProgram) (nvrtcProgram *program, const char *source,
                                const char *name, int num_headers,
                                const char *const *headers,
                                const char *const *include_names);
  nvrtcResult (*DestroyProgram) (nvrtcProgram *program);
  nvrtcResult (*CompileProgram) (nvrtcProgram program, int num_options,
                                 const char *const *options);
  nvrtcResult (*GetPTXSize) (nvrtcProgram program, size_t *size);
  nvrtcResult (*GetPTX) (nvrtcProgram program, char *ptx);
  nvrtcResult (*GetCUBINSize) (nvrtcProgram program, size_t *size);
  nvrtcResult (*GetCUBIN) (nvrtcProgram program, char *cubin);
  nvrtcResult (*GetProgramLogSize) (nvrtcProgram program, size_t *size);
  nvrtcResult (*GetProgramLog) (nvrtcProgram program, char *log);
  nvrtcResult (*AddNameExpression) (nvrtcProgram program,
                                    const char *name_expression);
  nvrtcResult (*GetLoweredName) (nvrtcProgram program,
                                 const char *name_expression,
                                 const char **lowered_name);
} nvrtc_api;

#endif /* GM_NVRTC_ABI_H */
