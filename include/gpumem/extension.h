/* gpumem/extension.h -- device memory from Python objects, for Python
   extensions (plain C, pybind11, nanobind) that do not link libgpumem.

   gpumem exports one table of functions through the capsule
   gpumem._C_API, as NumPy does: an extension includes this header,
   calls gm_import_c_api () once (in its module's init, after Python
   and gpumem are up: inside a gpumem script or program), then

     gm_buffer buf;
     if (gm_c_api->get_buffer (obj, &buf) < 0)
       return NULL;                  // TypeError / ValueError set
     ... buf.ptr, buf.shape, buf.strides, buf.dtype, buf.device,
         buf.stream ...
     Py_DECREF (buf.owner);          // the memory may go after this

   OBJ may be a gpumem.DeviceArray, an object whose type publishes
   DLPack's C exchange API (__dlpack_c_exchange_api__), a DLPack
   producer or any object with __cuda_array_interface__ (CuPy, PyTorch,
   Numba); the checks are gpumem.asarray's.  BUF describes the memory as it is:
   shape, strides in bytes (negative for a reversed view, not C-order
   for a strided or transposed one) and the address of element 0, so
   walk it through (ptr, shape, strides), or check that it is
   C-contiguous first (gm_buffer_is_contiguous).  A caster that loads
   every argument of a call uses load_view instead: a small gm_view,
   checked against the parameter in the same call; and, for a
   DeviceArray that lends its view (gm_lent), reads that view in place
   without a call.  gpumem-capi(3) is the manual.  */

#ifndef GPUMEM_EXTENSION_H
#define GPUMEM_EXTENSION_H

#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of gm_c_api_table and gm_buffer; gm_import_c_api refuses a
   gpumem whose table has another.  The table only grows within one
   version: a member added later is there when the exporter's SIZE covers
   it (GM_C_API_HAS), so an extension built against this header runs on
   an older gpumem of the same version, and the reverse.  */
#define GM_C_API_ABI 1
#define GM_BUFFER_MAX_NDIM 32

typedef struct gm_buffer
{
  void *ptr;                    /* element 0 */
  int ndim;
  int64_t shape[GM_BUFFER_MAX_NDIM];
  int64_t strides[GM_BUFFER_MAX_NDIM];   /* in bytes */
  const char *dtype;            /* NumPy's name: "float32", ... */
  char typestr[8];              /* the array interface's: "<f4", ... */
  int64_t itemsize;
  int64_t size;                 /* elements */
  int device_type;              /* DLPack's: 2 CUDA, 1 host memory */
  int device;                   /* the device index */
  int readonly;
  /* The cudaStream_t whose work writing the memory gpumem still runs,
     which the caller orders its own work after; NULL when none is.  */
  void *stream;
  /* A new reference that keeps the memory alive: release it when done.  */
  PyObject *owner;
} gm_buffer;

/* Dimensions a gm_view holds itself; more are borrowed from a
   DeviceArray.  */
#define GM_VIEW_NDIM 4

/* Device memory as load_view describes it: a gm_buffer's description in
   a quarter of its size.  SHAPE and STRIDES are borrowed from what OWNER
   keeps alive (a DeviceArray's own, which never change), or point into
   DIMS: SHAPE at DIMS, STRIDES at DIMS + GM_VIEW_NDIM.  A copy of a view
   that points into its DIMS points into the copy's.  */
typedef struct gm_view
{
  void *ptr;                    /* element 0 */
  /* A new reference that keeps the memory, SHAPE and STRIDES alive:
     release it when done.  */
  PyObject *owner;
  const int64_t *shape;         /* NDIM entries */
  const int64_t *strides;       /* NDIM entries, in bytes */
  /* The cudaStream_t of pending work writing the memory, or NULL: as
     gm_buffer.stream.  */
  void *stream;
  /* The stream to launch on: as load_buffer's *LAUNCH.  */
  void *launch;
  int64_t size;                 /* elements */
  int64_t itemsize;
  int32_t ndim;
  int32_t device;               /* the device index */
  int32_t device_type;          /* DLPack's: 2 CUDA, 1 host memory */
  int32_t readonly;
  const char *dtype;            /* NumPy's name: "float32", ... */
  int64_t dims[2 * GM_VIEW_NDIM];   /* shape, then strides, when not
                                       borrowed */
} gm_view;

/* The head of gpumem's record of a block of device memory: how many
   hold it (HOLDS) and, of them, how many are native code (NATIVE).  The
   memory stays while HOLDS is nonzero, whatever Python does (free ()
   only ends the array's own hold).  Read and written only with the GIL
   held; take a hold with gm_c_api_table.hold, or, from a lent view,
   with gm_hold_take, and end it with gm_hold_drop.  */
typedef struct gm_hold
{
  uint32_t holds;
  uint32_t native;
} gm_hold;

/* What a gpumem.DeviceArray lends a caster, read in place without a
   call (gm_c_api_table.lent_offset).  While USABLE is nonzero and no
   block that picks the launch stream is open (*launch_blocks is 0),
   VIEW is what load_view gives for the array, but for OWNER (NULL
   here: take a reference of your own) and LAUNCH (NULL: the default
   stream).  USABLE is nonzero only for an array that owns its memory,
   is not freed, and has no stream's work pending; it drops to 0 before
   any of that changes, and gpumem sets it again in load_view.  TYPESTR
   is the dtype's typestr of three characters and its NUL, compared as
   four bytes (a dtype with a longer one is never lent).  Read it only
   with the GIL held.  */
typedef struct gm_lent
{
  uint32_t usable;
  uint32_t contiguous;          /* C-contiguous (GM_VIEW_C_CONTIG) */
  char typestr[4];
  uint32_t reserved;
  gm_view view;
  /* The record of the array's memory, while USABLE: a caster that keeps
     the view takes a hold on it (gm_hold_take).  Present where the
     table has hold_gone (GM_C_API_HAS).  */
  gm_hold *hold;
} gm_lent;

/* What load_view's FLAGS ask of the memory.  */
#define GM_VIEW_WRITABLE 1u     /* not read-only */
#define GM_VIEW_C_CONTIG 2u     /* C-contiguous (gm_view_is_contiguous) */

/* The messages of load_view's refusals, worded for gpumem::array's
   parameters (gpumem/array.hpp), which raise the same against a gpumem
   without load_view.  */
#define GM_VIEW_ERROR_DTYPE "must hold %s elements, not %s"
#define GM_VIEW_ERROR_READONLY                                            \
  "is written here but the array is read-only (declare the parameter "    \
  "const T to take read-only arrays)"
#define GM_VIEW_ERROR_NDIM "must have %d dimension%s, not %d"
#define GM_VIEW_ERROR_LAYOUT                                              \
  "must be C-contiguous, not a strided or reversed view, so that data () " \
  "and size () are a bare pointer and its length (pass a copy: x.copy (); " \
  "or declare the parameter gpumem::array<T, NDIM, gpumem::strided> and " \
  "walk its strides)"

typedef struct gm_c_api_table
{
  uint32_t abi;                 /* GM_C_API_ABI */
  uint32_t size;                /* sizeof (gm_c_api_table), exporter's */
  const char *version;          /* gpumem's version */
  /* Fills *BUF from OBJ.  0, or -1 with a Python exception set
     (TypeError when OBJ is no device memory, ValueError when it cannot
     be used: freed, an unsupported dtype, on another device).  */
  int (*get_buffer) (PyObject *obj, gm_buffer *buf);
  /* Members from gpumem 0.2 on: test with GM_C_API_HAS first.  */
  /* A new, uninitialized C-contiguous gpumem.DeviceArray of NDIM
     dimensions SHAPE and dtype DTYPE (NumPy's name: "float32", ...) on
     DEVICE (-1: the current device), described into *BUF; BUF->owner is
     the new array (a new reference: return it to Python, or release it).
     0, or -1 with a Python exception (ValueError, OutOfMemoryError).  */
  int (*new_array) (int ndim, const int64_t *shape, const char *dtype,
                    int device, gm_buffer *buf);
  /* In *STREAM the cudaStream_t that a gpumem call without stream= would
     use on DEVICE (-1: the current device) in this thread: the innermost
     `with stream:` block's, or an open gpumem.concurrent() block's; NULL
     for the default stream, after which the caller synchronizes before
     returning to Python (gpumem calls without stream= are complete on
     return).  0, or -1 with a Python exception.  */
  int (*current_stream) (int device, void **stream);
  /* Members from gpumem 0.3 on: test with GM_C_API_HAS first.  */
  /* get_buffer for a caster: the same *BUF, but only the NDIM used
     entries of shape and strides are written (the rest of *BUF is left
     as it was), and *LAUNCH is the stream to launch on for this memory:
     BUF->stream when not NULL, else current_stream's for BUF->device.
     The dispatch is keyed on OBJ's type (a DeviceArray is read directly,
     then a type's DLPack C exchange API, __dlpack__, then
     __cuda_array_interface__), so that it costs tens of nanoseconds for
     a DeviceArray.  0, or -1 with an exception and BUF->owner NULL.  */
  int (*load_buffer) (PyObject *obj, gm_buffer *buf, void **launch);
  /* Makes the cudaStream_t WAITER (NULL: the legacy default stream) on
     DEVICE (-1: the current one) wait, without blocking the host, for
     the work queued on SOURCE so far: an event, no host wait.  Nothing
     when SOURCE is NULL or WAITER, or on the host backend.  0, or -1
     with an exception.  */
  int (*stream_wait) (int device, void *waiter, void *source);
  /* Ends a launch on STREAM on DEVICE (-1: the current one).  With
     STREAM NULL (the default stream: no `with stream:` block was open)
     it waits for that work, the GIL released and Ctrl-C answered, so the
     call is complete on return as gpumem's own calls are; else each of
     the N objects WRITTEN that is a gpumem.DeviceArray records that the
     current block's stream writes it, as gpumem's calls in a block do.
     0, or -1 with an exception (CudaError from the work,
     KeyboardInterrupt).  */
  int (*launch_done) (int device, void *stream, PyObject *const *written,
                      int n);
  /* Members from gpumem 0.4 on: test with GM_C_API_HAS first.  */
  /* load_buffer and a parameter's checks in one call, into the small
     *VIEW: OBJ (anything get_buffer takes) must hold the dtype of
     TYPESTR (the array interface's, as gm_buffer.typestr: "<f4", "|b1";
     NULL: any), have NDIM dimensions (-1: any), and be what FLAGS
     (GM_VIEW_WRITABLE, GM_VIEW_C_CONTIG) ask.  VIEW->launch is the
     stream to launch on, as load_buffer's *LAUNCH.  A DeviceArray's
     shape and strides are borrowed from it; another object's are copied
     into VIEW->dims, or, past GM_VIEW_NDIM dimensions, borrowed from a
     DeviceArray made over its memory (which is then VIEW->owner).  0, or
     -1 with VIEW->owner NULL and an exception: get_buffer's, TypeError
     (GM_VIEW_ERROR_DTYPE) for another dtype, ValueError for a read-only
     array where GM_VIEW_WRITABLE (GM_VIEW_ERROR_READONLY), another ndim
     (GM_VIEW_ERROR_NDIM) or a layout that is not C-contiguous where
     GM_VIEW_C_CONTIG (GM_VIEW_ERROR_LAYOUT).  TYPESTR's first four
     bytes are read at once: a typestr has three characters or more.  */
  int (*load_view) (PyObject *obj, gm_view *view, const char *typestr,
                    int ndim, unsigned flags);
  /* Members from gpumem 0.5 on: test with GM_C_API_HAS first.  */
  /* gpumem.DeviceArray's type, and where in such an object its gm_lent
     lies, in bytes from the object's address: an object whose type is
     exactly ARRAY_TYPE is described by that gm_lent while it is
     usable and *LAUNCH_BLOCKS is 0 (gpumem/array.hpp reads it so).  */
  PyTypeObject *array_type;
  Py_ssize_t lent_offset;
  /* Nonzero while a block that picks the stream of calls without
     stream= (`with stream:`, gpumem.concurrent ()) is open in any
     thread, or a non-blocking gpumem.Stream exists (the default stream
     must then first wait for it, which load_view arranges): a lent
     view's launch stream is then load_view's to say.  */
  const uint32_t *launch_blocks;
  /* Members from gpumem 0.6 on: test with GM_C_API_HAS first.  */
  /* Takes a hold on the memory that OWNER (a gm_buffer's or gm_view's
     owner from this table) keeps alive, so that it stays until
     gm_hold_drop even after free () in Python: gpumem counts it as
     native code's, and share () refuses to move memory so held.  The
     hold to drop, or NULL where OWNER's memory is not gpumem's to count
     (another library's, kept by the owner reference itself).  With the
     GIL; never fails.  */
  gm_hold *(*hold) (PyObject *owner);
  /* What gm_hold_drop calls once HOLD's count reached 0: gives the
     memory back.  With the GIL; never fails (an error is unraisable).  */
  void (*hold_gone) (gm_hold *hold);
} gm_c_api_table;

/* Whether API, a table gm_import_c_api accepted, has MEMBER.  */
#define GM_C_API_HAS(api, member)                                         \
  ((api)->size >= offsetof (gm_c_api_table, member)                       \
                  + sizeof ((api)->member))

/* gm_hold_take and gm_hold_drop are inlined also where a binding is
   built for size: each is a few instructions, a call costs more.  */
#if defined(__GNUC__)
#define GM_HOLD_INLINE static inline __attribute__ ((always_inline))
#else
#define GM_HOLD_INLINE static inline
#endif

/* One more hold of native code on HOLD (a lent view's gm_lent.hold):
   with the GIL.  */
GM_HOLD_INLINE void
gm_hold_take (gm_hold *hold)
{
  hold->holds++;
  hold->native++;
}

/* Ends a hold that API's hold or gm_hold_take took: the memory goes if
   it was the last (free () was called, and nothing else holds it).
   With the GIL.  */
GM_HOLD_INLINE void
gm_hold_drop (const struct gm_c_api_table *api, gm_hold *hold)
{
  hold->native--;
  if (--hold->holds == 0)
    api->hold_gone (hold);
}

/* Whether the NDIM dimensions SHAPE with STRIDES (bytes) of SIZE
   elements of ITEMSIZE bytes are C-contiguous: the layout a kernel that
   takes a bare pointer and a length expects.  An empty array is.  */
static inline int
gm_layout_is_contiguous (int ndim, const int64_t *shape,
                         const int64_t *strides, int64_t itemsize,
                         int64_t size)
{
  int64_t expected = itemsize;

  for (int i = ndim - 1; i >= 0; i--)
    {
      if (shape[i] != 1 && strides[i] != expected)
        return size == 0;
      expected *= shape[i];
    }
  return 1;
}

/* Whether BUF is C-contiguous.  */
static inline int
gm_buffer_is_contiguous (const gm_buffer *buf)
{
  return gm_layout_is_contiguous (buf->ndim, buf->shape, buf->strides,
                                  buf->itemsize, buf->size);
}

/* Whether VIEW is C-contiguous.  */
static inline int
gm_view_is_contiguous (const gm_view *view)
{
  return gm_layout_is_contiguous (view->ndim, view->shape, view->strides,
                                  view->itemsize, view->size);
}

/* Fills *BUF from VIEW: every field but typestr, and the NDIM used
   entries of shape and strides (the rest of *BUF is left as it was).
   BUF->owner is VIEW->owner, the same reference.  */
static inline void
gm_view_to_buffer (const gm_view *view, gm_buffer *buf)
{
  buf->ptr = view->ptr;
  buf->ndim = view->ndim;
  for (int i = 0; i < view->ndim; i++)
    {
      buf->shape[i] = view->shape[i];
      buf->strides[i] = view->strides[i];
    }
  buf->dtype = view->dtype;
  buf->itemsize = view->itemsize;
  buf->size = view->size;
  buf->device_type = view->device_type;
  buf->device = view->device;
  buf->readonly = view->readonly;
  buf->stream = view->stream;
  buf->owner = view->owner;
}

/* The capsule's name, module attribute included.  */
#define GM_C_API_CAPSULE "gpumem._C_API"

/* Each file that includes this header gets its own pointer; define
   GM_C_API_UNIQUE_SYMBOL to share one among the files of a module.  */
#ifdef GM_C_API_UNIQUE_SYMBOL
extern const gm_c_api_table *GM_C_API_UNIQUE_SYMBOL;
#define gm_c_api GM_C_API_UNIQUE_SYMBOL
#else
static const gm_c_api_table *gm_c_api;
#endif

/* Imports gpumem's table into gm_c_api.  0, or -1 with ImportError set
   (not running under gpumem, or a gpumem of another ABI).  */
static inline int
gm_import_c_api (void)
{
  const gm_c_api_table *api
    = (const gm_c_api_table *) PyCapsule_Import (GM_C_API_CAPSULE, 0);

  if (api == NULL)
    return -1;
  if (api->abi != GM_C_API_ABI
      || api->size < offsetof (gm_c_api_table, get_buffer)
                     + sizeof (api->get_buffer))
    {
      PyErr_Format (PyExc_ImportError, "gpumem's C API has ABI version %u; "
                    "this extension was built for %d: rebuild it against "
                    "this gpumem's gpumem/extension.h", (unsigned) api->abi,
                    GM_C_API_ABI);
      return -1;
    }
  gm_c_api = api;
  return 0;
}

#ifdef __cplusplus
}
#endif

#endif /* GPUMEM_EXTENSION_H */
