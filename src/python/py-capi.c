/* py-capi.c -- gpumem._C_API: the capsule through which Python
   extensions get device memory from any object without linking gpumem
   (include/gpumem/extension.h says how they use it).  */

#include "gm-python.h"

#include <string.h>

#include "gpumem/extension.h"
#include "py-dlpack.h"

/* A gm_buffer has room for every dimension a DeviceArray may have.  */
_Static_assert (GM_MAX_NDIM <= GM_BUFFER_MAX_NDIM,
                "a gm_buffer holds every dimension a DeviceArray may have");
/* A caster reads a record's head as a gm_hold.  */
_Static_assert (offsetof (gm_block, holds) == offsetof (gm_hold, holds)
                && offsetof (gm_block, native) == offsetof (gm_hold, native),
                "a gm_block begins with a gm_hold");
/* A gm_view borrows a DeviceArray's shape and strides as they are.  */
_Static_assert (_Generic ((Py_ssize_t) 0, int64_t: 1, default: 0),
                "a DeviceArray's Py_ssize_t dimensions read as int64_t");

/* Each dtype's typestr, made once by gmpy_capi_init: every argument of
   a C++ binding's call is checked with one.  */
static char typestrs[GM_NDTYPES][8];

/* What describe finds beside a gm_view's fields, and where it puts a
   shape it cannot borrow.  */
typedef struct
{
  /* Room for CAPACITY entries each: the caller's.  */
  int64_t *shape, *strides;
  int capacity;
  gm_dtype dtype;
  bool contiguous;              /* C-contiguous */
} description;

/* ARRAY (a DeviceArray, borrowed) into *VIEW as it is: its own strides
   (negative for a reversed view, any for a strided one) and the address
   of element 0, its shape and strides borrowed, VIEW->stream PENDING
   (the backend's handle of its pending stream, or NULL) and
   VIEW->launch NULL.  VIEW->owner is left alone.  */
static inline void
view_fields (const arraypy_object *array, gm_view *view, void *pending)
{
  view->ptr = array->data;
  view->shape = array->shape;
  view->strides = array->strides;
  view->stream = pending;
  view->launch = NULL;
  view->size = array->size;
  view->itemsize = (int64_t) gm_dtypes[array->dtype].itemsize;
  view->ndim = array->ndim;
  view->device = array->device;
  /* DLPack's device, as __dlpack_device__ names it.  */
  view->device_type = gm_backend_current->dlpack_device_type;
  view->readonly = array->readonly;
  view->dtype = gm_dtypes[array->dtype].name;
}

/* Whether ARRAY is an owner in use with no stream's work pending, on
   its device with no clean host copy the spill engine keeps: the
   common case, told apart without a call.  A spilled array must come
   back and a clean one be marked written (gmpy_array_usable) before
   native code gets its address.  */
static inline bool
array_is_plain (const arraypy_object *array)
{
  return array->base == NULL && !array->released
         && array->last_stream == NULL
         && (array->block == NULL || array->block->host == NULL);
}

/* Describes the DeviceArray ARRAY (borrowed) into *VIEW (view_fields)
   and *FOUND, with the stream of its pending work; VIEW->owner is a new
   reference to ARRAY.  0, or -1 with an exception (ValueError when the
   array was freed) and VIEW->owner NULL.  */
static inline int
describe_array (arraypy_object *array, gm_view *view, description *found)
{
  gm_stream *pending = NULL;

  view->owner = NULL;
  if (!array_is_plain (array)
      && (gmpy_array_usable (array) < 0
          || gmpy_array_pending_stream (array, &pending) < 0))
    return -1;
  view_fields (array, view, pending != NULL
                              ? gm_backend_current->stream_handle (pending)
                              : NULL);
  found->dtype = array->dtype;
  found->contiguous = array->contiguous;
  view->owner = Py_NewRef ((PyObject *) array);
  return 0;
}

/* describe_array of ARRAY_OBJ, a new DeviceArray whose reference it
   takes.  */
static int
describe_new_array (PyObject *array_obj, gm_view *view, description *found)
{
  int result;

  view->owner = NULL;
  if (array_obj == NULL)
    return -1;
  result = describe_array ((arraypy_object *) array_obj, view, found);
  Py_DECREF (array_obj);
  return result;
}

/* Describes OBJ, whose type publishes the DLPack exchange API API,
   into *VIEW: its borrowed DLTensor when the table lends one and FOUND
   has room for its dimensions (no DeviceArray is made; the shape is
   copied there), else a DeviceArray over an export.  VIEW->stream is
   the producer's current work stream on the memory's device.  0, or -1
   with an exception and VIEW->owner NULL.  */
static int
describe_exchange (PyObject *obj, const gm_dl_exchange_api *api,
                   gm_view *view, description *found)
{
  Py_ssize_t dims[GM_MAX_NDIM], strides[GM_MAX_NDIM];
  gm_dl_tensor tensor;
  gm_dtype dtype = GM_FLOAT32;
  int ndim = 0, device = 0;
  char *data = NULL;
  void *stream = NULL;

  view->owner = NULL;
  if (api->dltensor_from_py_object_no_sync == NULL)
    return describe_new_array (gmpy_exchange_take (obj, api), view, found);
  if (api->dltensor_from_py_object_no_sync (obj, &tensor) < 0
      || gmpy_dlpack_read_tensor (&tensor, &ndim, dims, strides, &dtype,
                                  &device, &data) < 0)
    return -1;
  if (ndim > found->capacity)
    return describe_new_array (gmpy_exchange_take (obj, api), view, found);
  if (tensor.device.device_type != GM_DL_CPU
      && api->current_work_stream (tensor.device.device_type,
                                   tensor.device.device_id, &stream) < 0)
    return -1;
  view->ptr = data;
  view->size = 1;
  for (int i = 0; i < ndim; i++)
    {
      found->shape[i] = dims[i];
      found->strides[i] = strides[i];
      view->size *= dims[i];
    }
  view->shape = found->shape;
  view->strides = found->strides;
  view->stream = stream;
  view->itemsize = (int64_t) gm_dtypes[dtype].itemsize;
  view->ndim = ndim;
  view->device = device;
  view->device_type = gm_backend_current->dlpack_device_type;
  view->readonly = 0;
  view->dtype = gm_dtypes[dtype].name;
  found->dtype = dtype;
  found->contiguous = gm_view_is_contiguous (view);
  view->owner = Py_NewRef (obj);
  return 0;
}

/* 0 outside a graph recording of this thread; inside one, -1 with
   gpumem.Error: native code would launch at once, before the recorded
   work and never replayed.  */
static inline int
refuse_in_graph (void)
{
  if (gmpy_graph_capture == NULL)
    return 0;
  return gmpy_graph_refuse ("a native call taking device memory (a C++ "
                            "binding's gpumem::array, the C API's "
                            "get_buffer, load_buffer, load_view or "
                            "current_stream)");
}

/* 0 when the gpumem module is up, else -1 with RuntimeError.  */
static int
capi_ready (void)
{
  if (gmpy_state_get () != NULL)
    return 0;
  PyErr_SetString (PyExc_RuntimeError, "gpumem's C API: the gpumem "
                   "module is not initialized");
  return -1;
}

/* Describes OBJ into *VIEW (VIEW->launch left alone) and *FOUND.  The
   dispatch is keyed on OBJ's type: a DeviceArray is read directly, then
   a type's DLPack exchange API, then what asarray takes (__dlpack__,
   then __cuda_array_interface__; on the host backend DLPack producers
   of host memory too), through a DeviceArray whose shape is borrowed.
   0, or -1 with an exception and VIEW->owner NULL.  */
static inline int
describe (PyObject *obj, gm_view *view, description *found)
{
  gmpy_state *state = gmpy_state_get ();
  const gm_dl_exchange_api *api;

  view->owner = NULL;
  if (refuse_in_graph () < 0)
    return -1;
  if (state != NULL && obj != NULL && Py_TYPE (obj) == state->array_type)
    return describe_array ((arraypy_object *) obj, view, found);
  if (obj == NULL)
    {
      PyErr_SetString (PyExc_TypeError, "gpumem's C API needs an object, "
                       "got NULL");
      return -1;
    }
  if (capi_ready () < 0)
    return -1;
  if (gmpy_array_check (obj))
    return describe_array ((arraypy_object *) obj, view, found);
  api = gmpy_exchange_api_of (obj);
  if (api != NULL)
    return describe_exchange (obj, api, view, found);
  return describe_new_array (gmpy_asarray_for (obj, NULL, true), view,
                             found);
}

/* Describes OBJ into *BUF as describe finds it, writing only the NDIM
   used entries of shape and strides (the rest of *BUF is left as it
   was).  0, or -1 with an exception and BUF->owner NULL.  */
static int
describe_buffer (PyObject *obj, gm_buffer *buf)
{
  description found = { buf->shape, buf->strides, GM_BUFFER_MAX_NDIM,
                        GM_FLOAT32, false };
  gm_view view;

  buf->owner = NULL;
  if (describe (obj, &view, &found) < 0)
    return -1;
  gm_view_to_buffer (&view, buf);
  memcpy (buf->typestr, typestrs[found.dtype], sizeof buf->typestr);
  return 0;
}

/* In *LAUNCH the stream to launch on for memory of DLPack's
   DEVICE_TYPE on DEVICE whose pending work is on STREAM: STREAM, else
   the current one of DEVICE (capi_current_stream's answer), NULL for
   host memory.  0, or -1 with an exception.  */
static inline int
launch_stream (int device_type, int device, void *stream, void **launch)
{
  *launch = stream;
  if (stream != NULL || device_type == GM_DL_CPU)
    return 0;
  return gmpy_dispatch_handle (device, launch);
}

/* gm_c_api_table.get_buffer: OBJ as gpumem.asarray takes it, described
   into *BUF (zeroed first) with a new reference to what keeps its
   memory alive.  */
static int
capi_get_buffer (PyObject *obj, gm_buffer *buf)
{
  memset (buf, 0, sizeof *buf);
  if (describe_buffer (obj, buf) < 0)
    {
      memset (buf, 0, sizeof *buf);
      return -1;
    }
  return 0;
}

/* gm_c_api_table.load_buffer: get_buffer without the zeroing, and in
   *LAUNCH the stream to launch on (launch_stream).  */
static int
capi_load_buffer (PyObject *obj, gm_buffer *buf, void **launch)
{
  *launch = NULL;
  if (describe_buffer (obj, buf) < 0)
    return -1;
  if (launch_stream (buf->device_type, buf->device, buf->stream, launch)
      < 0)
    {
      Py_CLEAR (buf->owner);
      return -1;
    }
  return 0;
}

/* Whether TYPESTR names DTYPE: four bytes compared at once, a typestr
   of three characters and its NUL, or the four of a longer one, which
   must end there (gm_dtype_typestr writes four at most).  */
static inline bool
typestr_is (const char *typestr, gm_dtype dtype)
{
  uint32_t got, want;

  memcpy (&got, typestr, sizeof got);
  memcpy (&want, typestrs[dtype], sizeof want);
  return got == want && (typestrs[dtype][3] == '\0' || typestr[4] == '\0');
}

/* What load_view checks of memory: its dtype, whether it is read-only,
   its number of dimensions and whether it is C-contiguous.  */
typedef struct
{
  gm_dtype dtype;
  bool readonly;
  int ndim;
  bool contiguous;
} traits;

/* Whether memory of TRAITS is what TYPESTR (NULL: any dtype), NDIM (-1:
   any) and FLAGS ask.  */
static inline bool
traits_pass (traits got, const char *typestr, int ndim, unsigned flags)
{
  return (typestr == NULL || typestr_is (typestr, got.dtype))
         && !((flags & GM_VIEW_WRITABLE) && got.readonly)
         && (ndim < 0 || got.ndim == ndim)
         && !((flags & GM_VIEW_C_CONTIG) && !got.contiguous);
}

/* Raises load_view's error for memory of traits GOT, which traits_pass
   refused (the arguments are its): TypeError for another dtype,
   ValueError for the rest.  Returns -1.  */
__attribute__ ((noinline, cold)) static int
refuse (traits got, const char *typestr, int ndim, unsigned flags)
{
  const char *wanted = typestr;

  if (typestr != NULL && !typestr_is (typestr, got.dtype))
    {
      for (int d = 0; d < GM_NDTYPES; d++)
        if (strcmp (typestr, typestrs[d]) == 0)
          wanted = gm_dtypes[d].name;
      PyErr_Format (PyExc_TypeError, GM_VIEW_ERROR_DTYPE, wanted,
                    gm_dtypes[got.dtype].name);
    }
  else if ((flags & GM_VIEW_WRITABLE) && got.readonly)
    PyErr_SetString (PyExc_ValueError, GM_VIEW_ERROR_READONLY);
  else if (ndim >= 0 && got.ndim != ndim)
    PyErr_Format (PyExc_ValueError, GM_VIEW_ERROR_NDIM, ndim,
                  ndim == 1 ? "" : "s", got.ndim);
  else
    PyErr_SetString (PyExc_ValueError, GM_VIEW_ERROR_LAYOUT);
  return -1;
}

/* load_view for any OBJ: described into *VIEW (describe), checked, and
   VIEW->launch the stream to launch on (launch_stream).  0, or -1 with
   an exception and VIEW->owner NULL.  Never inlined, so that
   capi_load_view's common case saves no registers.  */
__attribute__ ((noinline)) static int
load_view_described (PyObject *obj, gm_view *view, const char *typestr,
                     int ndim, unsigned flags)
{
  description found = { view->dims, view->dims + GM_VIEW_NDIM,
                        GM_VIEW_NDIM, GM_FLOAT32, false };

  traits got;

  if (describe (obj, view, &found) < 0)
    return -1;
  got = (traits) { found.dtype, view->readonly, view->ndim,
                   found.contiguous };
  if ((!traits_pass (got, typestr, ndim, flags)
       && refuse (got, typestr, ndim, flags) < 0)
      || launch_stream (view->device_type, view->device, view->stream,
                        &view->launch) < 0)
    {
      Py_CLEAR (view->owner);
      return -1;
    }
  return 0;
}

/* The end of capi_load_view's common case for device memory: VIEW->launch
   the current stream of VIEW->device (nothing is pending on OBJ), then
   VIEW->owner a new reference to OBJ.  0, or -1 with an exception and
   VIEW->owner NULL.  */
__attribute__ ((noinline)) static int
own_device_view (PyObject *obj, gm_view *view)
{
  if (gmpy_dispatch_handle (view->device, &view->launch) < 0)
    {
      view->owner = NULL;
      return -1;
    }
  view->owner = Py_NewRef (obj);
  return 0;
}

/* Lends ARRAY's description (view_fields', no stream pending, no
   owner) to casters in ARRAY's gm_lent, which gpumem/array.hpp then
   reads in place, where its dtype's typestr fits the four bytes they
   compare.  ARRAY must be plain (array_is_plain).  */
__attribute__ ((noinline)) static void
lend (arraypy_object *array)
{
  gm_lent *lent = &array->lent;

  if (strlen (typestrs[array->dtype]) > 3)
    return;
  view_fields (array, &lent->view, NULL);
  lent->view.owner = NULL;
  lent->contiguous = array->contiguous;
  memcpy (lent->typestr, typestrs[array->dtype], sizeof lent->typestr);
  lent->reserved = 0;
  lent->hold = (gm_hold *) array->block;
  lent->usable = 1;
}


/* gm_c_api_table.load_view: OBJ described into *VIEW (shape and strides
   borrowed from a DeviceArray, else in VIEW->dims), checked against
   TYPESTR, NDIM and FLAGS, and VIEW->launch the stream to launch on.
   The common case, a DeviceArray that owns its memory with no stream's
   work pending, is read here, calling only own_device_view for device
   memory; every other goes through load_view_described.  A DeviceArray
   found plain lends its view (lend), checks passed or not.  0, or -1
   with an exception and VIEW->owner NULL.  */
static int
capi_load_view (PyObject *obj, gm_view *view, const char *typestr, int ndim,
                unsigned flags)
{
  gmpy_state *state = gmpy_state_get ();
  arraypy_object *array = (arraypy_object *) obj;
  traits got;

  if (state == NULL || obj == NULL || Py_TYPE (obj) != state->array_type)
    return load_view_described (obj, view, typestr, ndim, flags);
  if (refuse_in_graph () < 0)
    {
      view->owner = NULL;
      return -1;
    }
  if (!array_is_plain (array))
    {
      /* Describing it may find its stream's work done: plain again.  */
      int result = load_view_described (obj, view, typestr, ndim, flags);
      if (array_is_plain (array))
        lend (array);
      return result;
    }
  if (!array->lent.usable)
    lend (array);
  got = (traits) { array->dtype, array->readonly, array->ndim,
                   array->contiguous };
  if (!traits_pass (got, typestr, ndim, flags))
    {
      view->owner = NULL;
      return refuse (got, typestr, ndim, flags);
    }
  view_fields (array, view, NULL);
  if (view->device_type != GM_DL_CPU)
    return own_device_view (obj, view);
  view->owner = Py_NewRef (obj);
  return 0;
}

/* gm_c_api_table.new_array: a new, uninitialized C-contiguous
   DeviceArray of NDIM dimensions SHAPE and dtype DTYPE (NumPy's name) on
   DEVICE (-1: the current device), as gpumem.empty makes it, described
   into *BUF; BUF->owner is the new array.  0, or -1 with an exception
   (ValueError for a bad shape or dtype, gpumem.OutOfMemoryError).  */
static int
capi_new_array (int ndim, const int64_t *shape, const char *dtype,
                int device, gm_buffer *buf)
{
  PyObject *shape_obj = NULL, *dtype_obj = NULL, *array_obj = NULL;
  PyObject *device_obj = NULL;
  int result;

  memset (buf, 0, sizeof *buf);
  if (capi_ready () < 0)
    return -1;
  if (ndim < 0 || ndim > GM_BUFFER_MAX_NDIM || (ndim > 0 && shape == NULL)
      || dtype == NULL)
    {
      PyErr_Format (PyExc_ValueError, "gpumem's C API: new_array needs "
                    "0 to %d dimensions with their shape and a dtype name, "
                    "got ndim %d", GM_BUFFER_MAX_NDIM, ndim);
      return -1;
    }
  shape_obj = PyTuple_New (ndim);
  if (shape_obj == NULL)
    return -1;
  for (int i = 0; i < ndim; i++)
    {
      PyObject *extent = PyLong_FromLongLong ((long long) shape[i]);
      if (extent == NULL)
        goto done;
      PyTuple_SET_ITEM (shape_obj, i, extent);
    }
  device_obj = device < 0 ? Py_NewRef (Py_None) : PyLong_FromLong (device);
  if (device_obj == NULL)
    goto done;
  dtype_obj = PyUnicode_FromString (dtype);
  if (dtype_obj == NULL)
    goto done;
  {
    PyObject *args[3] = {shape_obj, dtype_obj, device_obj};
    array_obj = gmpy_empty (NULL, args, 3, NULL);
  }

done:
  Py_XDECREF (dtype_obj);
  Py_XDECREF (device_obj);
  Py_DECREF (shape_obj);
  if (array_obj == NULL)
    return -1;
  result = describe_buffer (array_obj, buf);
  Py_DECREF (array_obj);
  return result;
}

/* gm_c_api_table.current_stream: in *STREAM the cudaStream_t that a call
   without stream= would use on DEVICE (-1: the current device) in this
   thread: the innermost `with stream:` block's, else an open
   gpumem.concurrent() block's; NULL when neither is open (the default
   stream: the caller synchronizes before it returns to Python, as every
   gpumem call without stream= is complete on return).  0, or -1 with an
   exception.  */
static int
capi_current_stream (int device, void **stream)
{
  *stream = NULL;
  if (capi_ready () < 0 || refuse_in_graph () < 0)
    return -1;
  if (device < 0)
    device = gmpy_current_device ();
  if (gmpy_device_check (device) < 0)
    return -1;
  return gmpy_dispatch_handle (device, stream);
}

/* gm_c_api_table.stream_wait: the cudaStream_t WAITER (NULL: the legacy
   default stream) on DEVICE waits, without blocking the host, for the
   work queued on SOURCE so far; nothing when SOURCE is NULL or WAITER,
   or on the host backend.  0, or -1 with an exception.  */
static int
capi_stream_wait (int device, void *waiter, void *source)
{
  gm_stream *wrapped = NULL;
  gm_status status;

  if (capi_ready () < 0)
    return -1;
  if (source == NULL || source == waiter
      || gm_backend_current->device_memory != GM_MEMORY_CUDA)
    return 0;
  if (device < 0)
    device = gmpy_current_device ();
  if (gmpy_device_check (device) < 0)
    return -1;
  status = gm_backend_current->stream_wrap (device, source, &wrapped);
  if (status == GM_OK)
    status = gm_backend_current->foreign_stream_wait (
      device, wrapped, waiter != NULL ? waiter : (void *) (uintptr_t) 1);
  if (wrapped != NULL)
    gm_backend_current->stream_destroy (wrapped);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

/* gm_c_api_table.launch_done: the end of a launch on STREAM on DEVICE.
   STREAM NULL (the default stream: no block was open) is waited for,
   the GIL released and Ctrl-C answered, so that the call is complete on
   return; otherwise each of the N objects WRITTEN that is a DeviceArray
   records that the current block's stream writes it, as gpumem's own
   calls do.  0, or -1 with an exception (CudaError from the work,
   KeyboardInterrupt).  */
static int
capi_launch_done (int device, void *stream, PyObject *const *written, int n)
{
  if (capi_ready () < 0)
    return -1;
  if (device < 0)
    device = gmpy_current_device ();
  if (stream == NULL)
    return gm_backend_current->device_memory == GM_MEMORY_CUDA
             ? gmpy_wait (device, NULL) : 0;
  if (gm_backend_current->device_memory == GM_MEMORY_CUDA)
    {
      void *current;
      if (gmpy_dispatch_handle (device, &current) < 0)
        return -1;
      if (current == NULL)
        {
          /* No block picks a stream: the launch went to the stream of
             the memory's pending work, and the call is complete on
             return all the same.  */
          gm_stream *wrapped = NULL;
          gm_status status = gm_backend_current->stream_wrap (device, stream,
                                                              &wrapped);
          int result = status == GM_OK ? gmpy_wait (device, wrapped)
                                       : gmpy_raise_int (status);
          if (wrapped != NULL)
            gm_backend_current->stream_destroy (wrapped);
          return result;
        }
    }
  for (int i = 0; i < n; i++)
    if (written[i] != NULL)
      gmpy_array_note_stream (written[i], NULL);
  return 0;
}

/* gm_c_api_table.hold: a native hold on the record of the memory OWNER
   keeps (a DeviceArray's, a view's its base's), or NULL for other
   memory.  */
static gm_hold *
capi_hold (PyObject *owner)
{
  gm_block *block;

  if (gmpy_state_get () == NULL || owner == NULL
      || (block = gmpy_array_block (owner)) == NULL)
    return NULL;
  gm_block_hold (block, true);
  return (gm_hold *) block;
}

/* gm_c_api_table.hold_gone: HOLD's count reached 0 in gm_hold_drop.  */
static void
capi_hold_gone (gm_hold *hold)
{
  gm_status status = gm_block_gone ((gm_block *) hold);

  if (status != GM_OK)
    {
      PyObject *type, *value, *traceback;
      PyErr_Fetch (&type, &value, &traceback);
      gmpy_raise (status);
      PyErr_WriteUnraisable (NULL);
      PyErr_Restore (type, value, traceback);
    }
}

/* The table; array_type is set by gmpy_capi_init.  */
static gm_c_api_table c_api = {
  .abi = GM_C_API_ABI,
  .size = sizeof (gm_c_api_table),
  .version = PACKAGE_VERSION,
  .get_buffer = capi_get_buffer,
  .new_array = capi_new_array,
  .current_stream = capi_current_stream,
  .load_buffer = capi_load_buffer,
  .stream_wait = capi_stream_wait,
  .launch_done = capi_launch_done,
  .load_view = capi_load_view,
  .array_type = NULL,
  .lent_offset = offsetof (arraypy_object, lent),
  .launch_blocks = NULL,
  .hold = capi_hold,
  .hold_gone = capi_hold_gone,
};

int
gmpy_capi_init (PyObject *module)
{
  PyObject *capsule = PyCapsule_New ((void *) &c_api, GM_C_API_CAPSULE,
                                     NULL);
  int result;

  for (int d = 0; d < GM_NDTYPES; d++)
    gm_dtype_typestr ((gm_dtype) d, typestrs[d]);
  /* The type stays alive while the table names it: a caster compares
     an argument's type with it.  */
  Py_XSETREF (c_api.array_type,
              (PyTypeObject *) Py_NewRef (
                (PyObject *) gmpy_state_get ()->array_type));
  c_api.launch_blocks = gmpy_launch_blocks ();
  if (capsule == NULL)
    return -1;
  result = PyModule_AddObjectRef (module, "_C_API", capsule);
  Py_DECREF (capsule);
  return result;
}
