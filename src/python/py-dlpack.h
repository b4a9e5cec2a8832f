/* py-dlpack.h -- DLPack in gpumem's Python layer: the prototypes of
   py-dlpack.c (the dispatch: from_dlpack, asarray's DLPack step),
   py-dlpack-export.c (the producer), py-dlpack-import.c (the consumer's
   low level) and py-dlpack-exchange.c (the C exchange API, both ways).
   Calls among them run one way: the dispatch, the exchange API, the
   producer, the consumer's low level.  */

#ifndef GM_PY_DLPACK_H
#define GM_PY_DLPACK_H

#include "gm-python.h"
#include "dlpack-abi.h"

/* The capsules' names, and the stream numbers with a meaning (DLPack's
   and the CUDA Array Interface's).  */
#define GM_DLTENSOR "dltensor"
#define GM_DLTENSOR_VERSIONED "dltensor_versioned"
#define GM_DLTENSOR_USED "used_dltensor"
#define GM_DLTENSOR_USED_VERSIONED "used_dltensor_versioned"
#define GM_DL_STREAM_NO_SYNC (-1)
#define GM_DL_STREAM_LEGACY 1

/* The dispatch (py-dlpack.c).  */
PyObject *gmpy_from_dlpack (PyObject *module, PyObject *obj);
/* gmpy_from_dlpack (OBJ) when OBJ is a DLPack producer whose data is in
   device memory (as asarray takes it): 1 with *RESULT a new reference,
   0 when OBJ is not such a producer, -1 with an exception.  */
int gmpy_dlpack_asarray (PyObject *obj, PyObject **result);

/* The producer (py-dlpack-export.c).  */
PyObject *gmpy_array_dlpack (PyObject *self, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames);
PyObject *gmpy_array_dlpack_device (PyObject *self, PyObject *unused);
/* A new DLPack 1.x export of the DeviceArray ARRAY_OBJ into *OUT (the
   read-only flag set for a read-only array), without any stream
   ordering; the caller owns it and calls its deleter.  0, or -1 with
   ValueError (freed) or MemoryError.  */
int gmpy_dlpack_export (PyObject *array_obj,
                        gm_dl_managed_tensor_versioned **out);

/* The consumer's low level (py-dlpack-import.c).  */
/* MANAGED wrapped in a new DeviceArray that calls its deleter when the
   memory's last array goes, after from_dlpack's checks; MANAGED is
   taken, also on failure (its deleter is called then).  New reference
   or NULL.  */
PyObject *gmpy_dlpack_wrap (gm_dl_managed_tensor_versioned *managed);
/* from_dlpack's checks of TENSOR, and what a DeviceArray needs from it:
   *NDIM, DIMS, STRIDES (bytes), *DTYPE, *DEVICE and *DATA.  0, or -1
   with BufferError, TypeError or ValueError.  */
int gmpy_dlpack_read_tensor (const gm_dl_tensor *tensor, int *ndim,
                             Py_ssize_t dims[GM_MAX_NDIM],
                             Py_ssize_t strides[GM_MAX_NDIM],
                             gm_dtype *dtype, int *device, char **data);
/* Takes CAPSULE, a "dltensor" or "dltensor_versioned" capsule: checks it
   all, then renames it "used_..." and wraps its memory in a DeviceArray
   that calls the producer's deleter when it goes.  New reference, or
   NULL with an exception and CAPSULE untouched (its own destructor then
   deletes the tensor).  */
PyObject *gmpy_dlpack_consume_capsule (PyObject *capsule);
/* Calls the deleter of the managed tensor that CAPSULE holds under the
   name VERSIONED (a DLManagedTensorVersioned) or LEGACY (a
   DLManagedTensor), if it holds one and it has a deleter.  A capsule
   destructor: leaves any pending exception as it was.  */
void gmpy_dlpack_capsule_delete (PyObject *capsule, const char *versioned,
                                 const char *legacy);
/* Whether the backend uses memory of DLPack device type TYPE.  */
bool gmpy_dlpack_device_usable (int32_t type);
/* Sets BufferError for data on DLPack device type TYPE, which the
   backend cannot use; returns -1.  */
int gmpy_dlpack_wrong_device (int32_t type);

/* The DLPack C exchange API, both ways (py-dlpack-exchange.c).  */
/* Puts __dlpack_c_exchange_api__ on the DeviceArray type TYPE.  0 or
   -1.  */
int gmpy_exchange_init (PyTypeObject *type);
/* The exchange API that OBJ's type publishes (DLPack 1.x), or NULL when
   it publishes none; never fails.  Cached by type.  */
const gm_dl_exchange_api *gmpy_exchange_api_of (PyObject *obj);
/* OBJ, whose type publishes API, as a new DeviceArray over its memory,
   gpumem's default stream ordered after the producer's current work on
   it.  New reference or NULL.  */
PyObject *gmpy_exchange_take (PyObject *obj, const gm_dl_exchange_api *api);
/* Makes gpumem's default stream on DEVICE wait, without blocking the
   host, for the work queued so far on HANDLE, another library's
   cudaStream_t (nothing for NULL, or on the host backend).  0 or -1.  */
int gmpy_default_stream_wait (int device, void *handle);
/* Lets go of the types the dispatch remembers (the module's free).  */
void gmpy_exchange_clear (void);

#endif /* GM_PY_DLPACK_H */
