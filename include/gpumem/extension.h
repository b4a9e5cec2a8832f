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

   OBJ may be a gpumem.DeviceArray, any object with
   __cuda_array_interface__ (CuPy, PyTorch, Numba) or a DLPack producer;
   the checks are gpumem.asarray's.  gpumem-capi(3) is the manual.  */

#ifndef GPUMEM_EXTENSION_H
#define GPUMEM_EXTENSION_H

#include <Python.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of gm_c_api_table and gm_buffer; gm_import_c_api refuses a
   gpumem whose table has another.  */
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

typedef struct gm_c_api_table
{
  uint32_t abi;                 /* GM_C_API_ABI */
  uint32_t size;                /* sizeof (gm_c_api_table), exporter's */
  const char *version;          /* gpumem's version */
  /* Fills *BUF from OBJ.  0, or -1 with a Python exception set
     (TypeError when OBJ is no device memory, ValueError when it cannot
     be used: freed, an unsupported dtype, on another device).  */
  int (*get_buffer) (PyObject *obj, gm_buffer *buf);
} gm_c_api_table;

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
  if (api->abi != GM_C_API_ABI)
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
