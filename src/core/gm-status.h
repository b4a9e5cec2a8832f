/* gm-status.h -- the status every layer's functions return, and the calling
   thread's error record (error.c).  */

#ifndef GM_STATUS_H
#define GM_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Status of every backend and memory function.  Details of the last
   failure are in gm_last_error ().  */
typedef enum gm_status
{
  GM_OK = 0,
  GM_ERR_VALUE,        /* a bad argument value (ValueError) */
  GM_ERR_TYPE,         /* an argument of the wrong type (TypeError) */
  GM_ERR_NOMEM,        /* device memory or the set limit exhausted */
  GM_ERR_HOST_NOMEM,   /* host memory exhausted (MemoryError) */
  GM_ERR_CUDA,         /* a CUDA call failed (gpumem.CudaError) */
  GM_ERR_UNAVAILABLE,  /* the backend cannot run here */
  GM_ERR_NOT_READY,    /* work is still pending (not an error) */
  GM_ERR_FAILED        /* the work itself was refused, for the reason the
                          message gives: neither a bad argument nor this
                          machine's fault (source that does not compile, a
                          plugin library whose table is wrong): gpumem.Error */
} gm_status;

/* Room for an out-of-memory message: the request, the free and idle
   bytes, each owner's totals and the five largest blocks with the line
   that made each.  */
#define GM_ERROR_MESSAGE_MAX 2048

typedef struct gm_error
{
  gm_status status;
  int cuda_code;             /* cudaError_t, or 0 */
  char cuda_name[64];        /* e.g. "cudaErrorIllegalAddress", or "" */
  char message[GM_ERROR_MESSAGE_MAX];
} gm_error;

/* Record STATUS with a printf-style message as the calling thread's last
   error, and return STATUS.  CUDA_CODE and CUDA_NAME may be 0 / NULL.  */
gm_status gm_error_set (gm_status status, int cuda_code,
                        const char *cuda_name, const char *fmt, ...)
  __attribute__ ((format (printf, 4, 5)));

/* The calling thread's last error (never NULL).  */
const gm_error *gm_last_error (void);

#endif /* GM_STATUS_H */
