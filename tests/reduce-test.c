/* reduce-test.c -- tests of the backends' reduce (gm.h): every
   reducible dtype and op, N of 1, 2, 3 and 8 arrays, 0, 1, 7 and 1000
   elements, DST apart or aliasing the first or last source, every array
   at the same 16-byte offset or not, against a reference computed here
   another way; large arrays; a stream and a graph; and the refusals with
   their status codes.
     reduce-test host    on the host backend
     reduce-test cuda    on the CUDA backend: exit 77, "skipped: no CUDA
                         device", where it cannot start
   Memory comes from the backend's malloc and moves by its copy, so both
   backends run the same cases.  Exit 0 iff every check passed.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "c-test.h"

static const gm_backend *backend;
static int cases;

static const gm_dtype reducible[] = {
  GM_BOOL, GM_INT8, GM_INT16, GM_INT32, GM_INT64, GM_UINT8, GM_UINT16,
  GM_UINT32, GM_UINT64, GM_FLOAT32, GM_FLOAT64, GM_COMPLEX64, GM_COMPLEX128
};
static const gm_reduce_op ops[] = {GM_REDUCE_SUM, GM_REDUCE_MAX,
                                   GM_REDUCE_MIN};
static const char *const op_names[] = {"sum", "max", "min"};

/* A float32 or float64 value, as a double: often one of the values that
   test the ties and NaN rule (both zeros, NaNs of either sign,
   infinities, a subnormal, small integers that repeat), else any.  */
static double
test_float (void)
{
  static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, 1.0,
                                   -1.0, 2.0, 3.0, 1e-310};
  uint64_t r = rng ();

  switch (r % 8)
    {
    case 0:
      return (r >> 8) % 2 ? NAN : -NAN;
    case 1:
    case 2:
      return special[(r >> 8) % (sizeof special / sizeof special[0])];
    default:
      return ((double) (int64_t) (r >> 11) / (double) (1ull << 40)) - 2048.0;
    }
}

/* Writes element I of DTYPE at P.  */
static void
fill_element (unsigned char *p, gm_dtype dtype)
{
  uint64_t r = rng ();

  switch (dtype)
    {
    case GM_BOOL:
      /* Mostly 0 and 1, now and then another nonzero byte.  */
      *p = r % 7 == 0 ? (unsigned char) (2 + r % 200) : (unsigned char) (r >> 9) % 2;
      break;
    case GM_FLOAT32:
      {
        float f = (float) test_float ();
        memcpy (p, &f, sizeof f);
      }
      break;
    case GM_FLOAT64:
      {
        double d = test_float ();
        memcpy (p, &d, sizeof d);
      }
      break;
    case GM_COMPLEX64:
      {
        float f[2] = {(float) test_float (), (float) test_float ()};
        memcpy (p, f, sizeof f);
      }
      break;
    case GM_COMPLEX128:
      {
        double d[2] = {test_float (), test_float ()};
        memcpy (p, d, sizeof d);
      }
      break;
    default:
      memcpy (p, &r, gm_dtypes[dtype].itemsize);
      break;
    }
}

/* An integer element widened: sign-extended for the signed dtypes.  */
static int64_t
load_signed (const unsigned char *p, size_t size)
{
  uint64_t u = 0;

  memcpy (&u, p, size);
  if (size < 8 && (u >> (size * 8 - 1)) & 1)
    u |= ~(uint64_t) 0 << (size * 8);
  return (int64_t) u;
}

static uint64_t
load_unsigned (const unsigned char *p, size_t size)
{
  uint64_t u = 0;

  memcpy (&u, p, size);
  return u;
}

/* Whether LATER replaces EARLIER under OP (max or min): only when
   neither is NaN and LATER is strictly beyond.  */
static bool
float_replaces (double earlier, double later, gm_reduce_op op)
{
  if (isnan (earlier) || isnan (later) || earlier == later)
    return false;
  return op == GM_REDUCE_MAX ? later > earlier : later < earlier;
}

/* The reference: OUT[i] for I < COUNT from the N arrays IN, computed
   apart from the backends' loops: integers summed in 64 bits and cut to
   their width at the end, bools counted, floats chosen by
   float_replaces.  */
static void
reference (unsigned char *out, unsigned char *const *in, int n, size_t count,
           gm_dtype dtype, gm_reduce_op op)
{
  const size_t size = gm_dtypes[dtype].itemsize;
  const char kind = gm_dtypes[dtype].kind;

  for (size_t i = 0; i < count; i++)
    {
      unsigned char *o = out + i * size;

      if (kind == 'b')
        {
          int nonzero = 0;
          for (int k = 0; k < n; k++)
            nonzero += in[k][i] != 0;
          *o = op == GM_REDUCE_MIN ? nonzero == n : nonzero > 0;
        }
      else if (kind == 'i' || kind == 'u')
        {
          if (op == GM_REDUCE_SUM)
            {
              uint64_t total = 0;
              for (int k = 0; k < n; k++)
                total += load_unsigned (in[k] + i * size, size);
              memcpy (o, &total, size);
              continue;
            }
          int best = 0;
          for (int k = 1; k < n; k++)
            {
              bool beyond;
              if (kind == 'i')
                {
                  int64_t a = load_signed (in[best] + i * size, size);
                  int64_t b = load_signed (in[k] + i * size, size);
                  beyond = op == GM_REDUCE_MAX ? b > a : b < a;
                }
              else
                {
                  uint64_t a = load_unsigned (in[best] + i * size, size);
                  uint64_t b = load_unsigned (in[k] + i * size, size);
                  beyond = op == GM_REDUCE_MAX ? b > a : b < a;
                }
              if (beyond)
                best = k;
            }
          memcpy (o, in[best] + i * size, size);
        }
      else if (dtype == GM_FLOAT32 || dtype == GM_COMPLEX64)
        {
          int parts = kind == 'c' ? 2 : 1;
          for (int part = 0; part < parts; part++)
            {
              volatile float acc;
              float value;
              memcpy (&value, in[0] + i * size + part * 4, 4);
              acc = value;
              for (int k = 1; k < n; k++)
                {
                  memcpy (&value, in[k] + i * size + part * 4, 4);
                  if (op == GM_REDUCE_SUM)
                    acc = acc + value;
                  else if (float_replaces (acc, value, op))
                    acc = value;
                }
              value = acc;
              memcpy (o + part * 4, &value, 4);
            }
        }
      else
        {
          int parts = kind == 'c' ? 2 : 1;
          for (int part = 0; part < parts; part++)
            {
              volatile double acc;
              double value;
              memcpy (&value, in[0] + i * size + part * 8, 8);
              acc = value;
              for (int k = 1; k < n; k++)
                {
                  memcpy (&value, in[k] + i * size + part * 8, 8);
                  if (op == GM_REDUCE_SUM)
                    acc = acc + value;
                  else if (float_replaces (acc, value, op))
                    acc = value;
                }
              value = acc;
              memcpy (o + part * 8, &value, 8);
            }
        }
    }
}

/* Whether elements A and B of DTYPE, results of OP, are the same: the
   same bits, or for a float sum a NaN in both (where both are NaN the
   sum's bits are the hardware's: x86 keeps an operand's payload, whose
   order the compiler may swap; CUDA gives one canonical NaN).  */
static bool
same_sum (const unsigned char *a, const unsigned char *b, gm_dtype dtype,
          gm_reduce_op op)
{
  const size_t size = gm_dtypes[dtype].itemsize;
  const char kind = gm_dtypes[dtype].kind;
  const size_t part = kind == 'c' ? size / 2 : size;

  if (memcmp (a, b, size) == 0)
    return true;
  if (op != GM_REDUCE_SUM || (kind != 'f' && kind != 'c'))
    return false;
  for (size_t at = 0; at < size; at += part)
    {
      double x, y;
      if (part == 4)
        {
          float fx, fy;
          memcpy (&fx, a + at, 4);
          memcpy (&fy, b + at, 4);
          x = fx;
          y = fy;
        }
      else
        {
          memcpy (&x, a + at, 8);
          memcpy (&y, b + at, 8);
        }
      if (memcmp (a + at, b + at, part) != 0 && !(isnan (x) && isnan (y)))
        return false;
    }
  return true;
}

typedef enum alias_kind
{
  ALIAS_NONE, ALIAS_FIRST, ALIAS_LAST
} alias_kind;
static const char *const alias_names[] = {"apart", "srcs[0]", "srcs[n-1]"};

typedef enum offset_kind
{
  OFFSET_NONE, OFFSET_ALL, OFFSET_MIXED
} offset_kind;
static const char *const offset_names[] = {"aligned", "all shifted",
                                           "mixed"};

/* Spare elements around every array, filled and checked untouched.  */
#define SPARE 3

/* Allocates BYTES on device 0 and copies HOST there; NULL on failure
   (counted).  */
static void *
to_device (const unsigned char *host, size_t bytes)
{
  void *ptr = NULL;
  gm_status status = backend->malloc (0, bytes, NULL, &ptr);

  EXPECT (status == GM_OK && ptr != NULL, "malloc %zu bytes: %s", bytes,
          gm_last_error ()->message);
  if (status != GM_OK || ptr == NULL)
    return NULL;
  status = backend->copy (ptr, 0, host, -1, bytes, NULL);
  EXPECT (status == GM_OK, "copy in: %s", gm_last_error ()->message);
  return ptr;
}

/* How one case is run: on no stream, on a stream made for it, or
   recorded into a graph and launched.  */
typedef enum run_kind
{
  RUN_PLAIN, RUN_STREAM, RUN_GRAPH
} run_kind;

/* Calls reduce on DST and SRCS as RUN says; its status.  */
static gm_status
run_reduce (run_kind run, void *dst, void *const *srcs, int n, size_t count,
            gm_dtype dtype, gm_reduce_op op)
{
  gm_stream *stream = NULL;
  gm_graph *graph = NULL;
  gm_status status;

  if (run == RUN_PLAIN)
    return backend->reduce (dst, srcs, n, count, dtype, op, 0, NULL);
  status = backend->stream_create (0, 0, &stream);
  if (status != GM_OK)
    return status;
  if (run == RUN_GRAPH)
    {
      status = backend->graph_begin (stream);
      if (status != GM_OK)
        goto done;
    }
  status = backend->reduce (dst, srcs, n, count, dtype, op, 0, stream);
  if (run == RUN_GRAPH)
    {
      gm_status end = backend->graph_end (stream, &graph);
      if (status == GM_OK)
        status = end;
      if (status == GM_OK)
        status = backend->graph_launch (graph, NULL);
      /* A replay without a stream is waited for by its caller.  */
      while (status == GM_OK
             && (status = backend->wait (0, NULL, 100000))
                  == GM_ERR_NOT_READY)
        continue;
      if (graph != NULL)
        backend->graph_destroy (graph);
    }
  else if (status == GM_OK)
    do
      status = backend->wait (0, stream, 100000);
    while (status == GM_ERR_NOT_READY);
done:
  backend->stream_destroy (stream);
  return status;
}

/* One case: N arrays of COUNT elements of DTYPE reduced with OP, DST as
   ALIAS says, the arrays placed as OFFSET says, run as RUN says.  */
static void
run_case (gm_dtype dtype, gm_reduce_op op, int n, size_t count,
          alias_kind alias, offset_kind offset, run_kind run)
{
  const size_t size = gm_dtypes[dtype].itemsize;
  const size_t bytes = (count + 2 * SPARE) * size;
  unsigned char *host[GM_REDUCE_MAX_INPUTS + 1] = {0};
  unsigned char *expect[GM_REDUCE_MAX_INPUTS + 1] = {0};
  unsigned char *inputs[GM_REDUCE_MAX_INPUTS];
  unsigned char *back = malloc (bytes);
  unsigned char *result = malloc (count * size + 1);
  void *dev[GM_REDUCE_MAX_INPUTS + 1] = {0};
  void *srcs[GM_REDUCE_MAX_INPUTS];
  size_t at[GM_REDUCE_MAX_INPUTS + 1];
  int written;
  gm_status status;

  cases++;
  for (int k = 0; k <= n; k++)
    {
      host[k] = malloc (bytes);
      expect[k] = malloc (bytes);
      if (host[k] == NULL || expect[k] == NULL)
        abort ();
      for (size_t i = 0; i < count + 2 * SPARE; i++)
        fill_element (host[k] + i * size, dtype);
      memcpy (expect[k], host[k], bytes);
      /* The element where array K starts.  */
      at[k] = offset == OFFSET_NONE ? 0
        : offset == OFFSET_ALL || k == n ? 1 : (size_t) (k % 2);
      if (k < n)
        inputs[k] = host[k] + at[k] * size;
    }
  if (back == NULL || result == NULL)
    abort ();
  reference (result, inputs, n, count, dtype, op);
  written = alias == ALIAS_NONE ? n : alias == ALIAS_FIRST ? 0 : n - 1;
  memcpy (expect[written] + at[written] * size, result, count * size);

  for (int k = 0; k <= n; k++)
    if ((dev[k] = to_device (host[k], bytes)) == NULL)
      goto done;
  for (int k = 0; k < n; k++)
    srcs[k] = (char *) dev[k] + at[k] * size;
  status = run_reduce (run, (char *) dev[written] + at[written] * size, srcs,
                       n, count, dtype, op);
  EXPECT (status == GM_OK, "%s", gm_last_error ()->message);
  for (int k = 0; k <= n; k++)
    {
      status = backend->copy (back, -1, dev[k], 0, bytes, NULL);
      EXPECT (status == GM_OK, "copy out: %s", gm_last_error ()->message);
      if (memcmp (back, expect[k], bytes) == 0)
        continue;
      size_t i = 0;
      while (i < count + 2 * SPARE
             && (memcmp (back + i * size, expect[k] + i * size, size) == 0
                 || (k == written && i >= at[k] && i < at[k] + count
                     && same_sum (back + i * size, expect[k] + i * size,
                                  dtype, op))))
        i++;
      if (i == count + 2 * SPARE)
        continue;
      EXPECT (false, "%s %s n=%d count=%zu dst %s, %s, %s: array %d%s "
              "differs first at element %zu (of %zu with spares)",
              gm_dtypes[dtype].name, op_names[op], n, count,
              alias_names[alias], offset_names[offset],
              run == RUN_PLAIN ? "no stream"
              : run == RUN_STREAM ? "a stream" : "a graph", k,
              k == written ? " (DST)" : "", i, count + 2 * SPARE);
    }
done:
  for (int k = 0; k <= n; k++)
    {
      if (dev[k] != NULL)
        backend->free (0, dev[k], bytes, NULL);
      free (host[k]);
      free (expect[k]);
    }
  free (back);
  free (result);
}

/* Facts worked out by hand, so that the reference itself is checked:
   int8 sums wrap, bool min is an and, max keeps the earlier of two
   NaNs and of two zeros.  */
static void
check_known (void)
{
  const unsigned char i8[3] = {100, 100, 100};    /* 300 - 256 = 44 */
  unsigned char *three[3] = {(unsigned char *) &i8[0],
                             (unsigned char *) &i8[1],
                             (unsigned char *) &i8[2]};
  unsigned char out[16];
  const unsigned char b[2] = {1, 0};
  unsigned char *two_bools[2] = {(unsigned char *) &b[0],
                                 (unsigned char *) &b[1]};
  double zeros[2] = {-0.0, 0.0}, nans[2] = {-NAN, NAN};
  unsigned char *two_zeros[2] = {(unsigned char *) &zeros[0],
                                 (unsigned char *) &zeros[1]};
  unsigned char *two_nans[2] = {(unsigned char *) &nans[0],
                                (unsigned char *) &nans[1]};
  double got;

  reference (out, three, 3, 1, GM_INT8, GM_REDUCE_SUM);
  EXPECT ((int8_t) out[0] == 44, "int8 100+100+100 gave %d", (int8_t) out[0]);
  reference (out, two_bools, 2, 1, GM_BOOL, GM_REDUCE_MIN);
  EXPECT (out[0] == 0, "bool 1 and 0 gave %d", out[0]);
  reference (out, two_bools, 2, 1, GM_BOOL, GM_REDUCE_MAX);
  EXPECT (out[0] == 1, "bool 1 or 0 gave %d", out[0]);
  reference (out, two_zeros, 2, 1, GM_FLOAT64, GM_REDUCE_MAX);
  memcpy (&got, out, 8);
  EXPECT (got == 0.0 && signbit (got), "max(-0.0, 0.0) kept %g", got);
  reference (out, two_nans, 2, 1, GM_FLOAT64, GM_REDUCE_MIN);
  memcpy (&got, out, 8);
  EXPECT (isnan (got) && signbit (got), "min(-nan, nan) kept %g", got);
}

/* The refusals gm.h names, each leaving DST as it was.  */
static void
check_refusals (void)
{
  static const struct
  {
    gm_dtype dtype;
    gm_reduce_op op;
    int n;
    gm_status status;
  } refused[] = {
    {GM_FLOAT16, GM_REDUCE_SUM, 2, GM_ERR_TYPE},
    {GM_COMPLEX64, GM_REDUCE_MAX, 2, GM_ERR_TYPE},
    {GM_COMPLEX128, GM_REDUCE_MIN, 2, GM_ERR_TYPE},
    {GM_FLOAT32, GM_REDUCE_SUM, 0, GM_ERR_VALUE},
    {GM_FLOAT32, GM_REDUCE_SUM, 9, GM_ERR_VALUE},
    {GM_INT32, GM_REDUCE_SUM, -1, GM_ERR_VALUE},
    {GM_INT32, (gm_reduce_op) 3, 2, GM_ERR_VALUE},
  };
  unsigned char host[64], back[64];
  void *dev;
  void *srcs[GM_REDUCE_MAX_INPUTS + 1];

  for (size_t i = 0; i < sizeof host; i++)
    host[i] = (unsigned char) (i * 37 + 5);
  if ((dev = to_device (host, sizeof host)) == NULL)
    return;
  for (int k = 0; k <= GM_REDUCE_MAX_INPUTS; k++)
    srcs[k] = dev;
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    {
      gm_status status = backend->reduce (dev, srcs, refused[i].n, 4,
                                          refused[i].dtype, refused[i].op,
                                          0, NULL);
      cases++;
      EXPECT (status == refused[i].status && gm_last_error ()->status
              == refused[i].status, "%s op %d n=%d gave status %d, not %d",
              gm_dtypes[refused[i].dtype].name, (int) refused[i].op,
              refused[i].n, (int) status, (int) refused[i].status);
      EXPECT (backend->copy (back, -1, dev, 0, sizeof back, NULL) == GM_OK
              && memcmp (back, host, sizeof host) == 0,
              "refused %s changed DST", gm_dtypes[refused[i].dtype].name);
    }
  backend->free (0, dev, sizeof host, NULL);
}

int
main (int argc, char **argv)
{
  static const int ns[] = {1, 2, 3, 8};
  static const size_t counts[] = {0, 1, 7, 1000};
  int exit_status;

  exit_status = test_start_backend (argc, argv, "reduce-test");
  if (exit_status != 0)
    return exit_status;
  backend = gm_backend_current;
  if (backend->reduce == NULL)
    {
      fprintf (stderr, "the %s backend has no reduce\n", backend->name);
      return 1;
    }

  check_known ();
  for (size_t d = 0; d < sizeof reducible / sizeof reducible[0]; d++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
      {
        if (gm_dtypes[reducible[d]].kind == 'c' && ops[o] != GM_REDUCE_SUM)
          continue;
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
          for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
            for (int alias = ALIAS_NONE; alias <= ALIAS_LAST; alias++)
              for (int offset = OFFSET_NONE; offset <= OFFSET_MIXED; offset++)
                run_case (reducible[d], ops[o], ns[j], counts[c],
                          (alias_kind) alias, (offset_kind) offset,
                          RUN_PLAIN);
        /* Ordered on a stream, and recorded into a graph.  */
        run_case (reducible[d], ops[o], 3, 1000, ALIAS_LAST, OFFSET_ALL,
                  RUN_STREAM);
        run_case (reducible[d], ops[o], 3, 1000, ALIAS_FIRST, OFFSET_NONE,
                  RUN_GRAPH);
      }
  /* Large enough that a kernel's grid strides over its arrays more than
     once.  */
  run_case (GM_FLOAT32, GM_REDUCE_SUM, 3, 5000003, ALIAS_NONE, OFFSET_ALL,
            RUN_PLAIN);
  run_case (GM_INT8, GM_REDUCE_MAX, 8, 4200007, ALIAS_FIRST, OFFSET_NONE,
            RUN_PLAIN);
  run_case (GM_COMPLEX128, GM_REDUCE_SUM, 2, 600001, ALIAS_LAST,
            OFFSET_MIXED, RUN_PLAIN);
  check_refusals ();

  gm_backend_shutdown ();
  printf ("%s backend: %d cases, %d failed checks\n", argv[1], cases,
          failures);
  return failures == 0 ? 0 : 1;
}
