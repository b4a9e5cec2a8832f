/* comm-devices.c -- collectives over arrays on several devices of one
   process (comm-devices.h).

   Where NCCL can move the arrays (comm-engine.c says), comm-nccl.c runs
   them, one communicator per device; elsewhere (the host backend's
   simulated devices, a build without NCCL, GPUMEM_COMM=mpi, a dtype
   NCCL cannot reduce) plain loops do: the arrays are copied through host
   memory in chunks and reduced in C with NumPy's meaning of each op.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "comm-devices.h"
#include "comm-engine.h"
#include "nvtx.h"
#ifdef GM_HAVE_NCCL
#include "comm-nccl.h"
#endif

/* The plain loops stage at most this many bytes of an array at once.  */
#define DEVICES_CHUNK ((size_t) 16 << 20)

#define REDUCE_LOOP(TYPE, EXPR)                                         \
  do                                                                    \
    {                                                                   \
      TYPE *a = (TYPE *) acc;                                           \
      const TYPE *b = (const TYPE *) other;                             \
      for (size_t i = 0; i < n; i++)                                    \
        a[i] = (EXPR);                                                  \
    }                                                                   \
  while (0)

#define REDUCE_ORDERED(TYPE, ADD)                                       \
  do                                                                    \
    {                                                                   \
      if (op == GM_COMM_SUM)                                            \
        REDUCE_LOOP (TYPE, ADD);                                        \
      else if (op == GM_COMM_MAX)                                       \
        REDUCE_LOOP (TYPE, b[i] > a[i] ? b[i] : a[i]);                  \
      else                                                              \
        REDUCE_LOOP (TYPE, b[i] < a[i] ? b[i] : a[i]);                  \
    }                                                                   \
  while (0)

/* ACC[i] = ACC[i] OP OTHER[i] for N numbers of DTYPE, as NumPy computes
   it: integers wrap around, bool sum and max are an or and min an and,
   complex numbers add by parts.  */
static void
reduce_into (void *acc, const void *other, size_t n, gm_dtype dtype,
             gm_comm_op op)
{
  switch (dtype)
    {
    case GM_BOOL:
      if (op == GM_COMM_MIN)
        REDUCE_LOOP (unsigned char, a[i] && b[i]);
      else
        REDUCE_LOOP (unsigned char, a[i] || b[i]);
      break;
    case GM_INT8:
      REDUCE_ORDERED (int8_t, (int8_t) (uint8_t) ((uint8_t) a[i]
                                                  + (uint8_t) b[i]));
      break;
    case GM_INT16:
      REDUCE_ORDERED (int16_t, (int16_t) (uint16_t) ((uint16_t) a[i]
                                                     + (uint16_t) b[i]));
      break;
    case GM_INT32:
      REDUCE_ORDERED (int32_t, (int32_t) ((uint32_t) a[i] + (uint32_t) b[i]));
      break;
    case GM_INT64:
      REDUCE_ORDERED (int64_t, (int64_t) ((uint64_t) a[i] + (uint64_t) b[i]));
      break;
    case GM_UINT8:
      REDUCE_ORDERED (uint8_t, (uint8_t) (a[i] + b[i]));
      break;
    case GM_UINT16:
      REDUCE_ORDERED (uint16_t, (uint16_t) (a[i] + b[i]));
      break;
    case GM_UINT32:
      REDUCE_ORDERED (uint32_t, a[i] + b[i]);
      break;
    case GM_UINT64:
      REDUCE_ORDERED (uint64_t, a[i] + b[i]);
      break;
    case GM_FLOAT32:
      REDUCE_ORDERED (float, a[i] + b[i]);
      break;
    case GM_FLOAT64:
      REDUCE_ORDERED (double, a[i] + b[i]);
      break;
    case GM_COMPLEX64:          /* sum only: gm_comm_op_check */
      n *= 2;
      REDUCE_LOOP (float, a[i] + b[i]);
      break;
    case GM_COMPLEX128:
      n *= 2;
      REDUCE_LOOP (double, a[i] + b[i]);
      break;
    default:                    /* float16: refused by gm_comm_op_check */
      break;
    }
}

/* CALL by copies through host memory and loops in C.  */
static gm_status
run_loops (const gm_comm_devices_call *call)
{
  const gm_backend *backend = gm_backend_current;
  size_t itemsize = gm_dtypes[call->dtype].itemsize;
  size_t chunk = DEVICES_CHUNK / itemsize;
  size_t staged = (call->count < chunk ? call->count : chunk) * itemsize;
  char *acc = NULL, *other = NULL;
  gm_status status = GM_OK;

  if (call->kind == GM_COMM_BCAST)
    {
      for (int i = 0; i < call->n && status == GM_OK; i++)
        if (i != call->root)
          status = backend->copy (call->data[i], call->devices[i],
                                  call->data[call->root],
                                  call->devices[call->root],
                                  call->count * itemsize, NULL);
      return status;
    }
  acc = malloc (staged);
  other = malloc (staged);
  if (acc == NULL || other == NULL)
    {
      status = gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                             "no host memory to stage a reduction over "
                             "devices (%zu bytes)", 2 * staged);
      goto done;
    }
  for (size_t off = 0; off < call->count && status == GM_OK; off += chunk)
    {
      size_t n = call->count - off < chunk ? call->count - off : chunk;
      size_t at = off * itemsize, nbytes = n * itemsize;

      status = backend->copy (acc, -1, (char *) call->data[0] + at,
                              call->devices[0], nbytes, NULL);
      for (int i = 1; i < call->n && status == GM_OK; i++)
        {
          status = backend->copy (other, -1, (char *) call->data[i] + at,
                                  call->devices[i], nbytes, NULL);
          if (status == GM_OK)
            reduce_into (acc, other, n, call->dtype, call->op);
        }
      for (int i = 0; i < call->n && status == GM_OK; i++)
        status = backend->copy ((char *) call->data[i] + at,
                                call->devices[i], acc, -1, nbytes, NULL);
    }
done:
  free (acc);
  free (other);
  return status;
}

/* gm_comm_devices_run without its NVTX range.  */
static gm_status
run_call (const gm_comm_devices_call *call)
{
  gm_nccl_verdict verdict
    = gm_nccl_verdict_for (call->kind, call->dtype, call->op);

  /* GPUMEM_COMM=nccl insists on NCCL, but for dtypes it has none of.  */
  if (verdict != GM_NCCL_OK && verdict != GM_NCCL_DTYPE
      && gm_comm_engine_setting () == GM_COMM_ENGINE_NCCL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "GPUMEM_COMM=nccl, but NCCL cannot run this %s: %s",
                         gm_comm_kind_name (call->kind),
                         gm_nccl_verdict_text (verdict));
  if (call->n < 2 || call->count == 0)
    return GM_OK;
#ifdef GM_HAVE_NCCL
  if (verdict == GM_NCCL_OK)
    return gm_nccl_run_devices (call);
#endif
  return run_loops (call);
}

gm_status
gm_comm_devices_run (const gm_comm_devices_call *call)
{
  gm_status status;

  if (!gm_nvtx_on ())
    return run_call (call);
  gm_nvtx_push (GM_NVTX_COLLECTIVE, gm_comm_kind_name (call->kind), -1,
                call->count * gm_dtypes[call->dtype].itemsize);
  status = run_call (call);
  gm_nvtx_pop ();
  return status;
}
