/* dlpack-abi.h -- the DLPack data structures gpumem exchanges, written
   from DLPack 1.3's dlpack.h (ABI version 1; the legacy unversioned
   structures are those of DLPack 0.8; the C exchange API,
   DLPackExchangeAPI, is 1.3's).  Plain C: the py-dlpack*.c files
   use the structures, dtype.c the type codes
   (gm_dtypes[].dlpack_code), the backends the device types
   (gm_backend.dlpack_device_type).

   The layout is an ABI shared with every other DLPack library in the
   process: members, their types and their order must stay exactly as
   the specification has them.  */

#ifndef GM_DLPACK_ABI_H
#define GM_DLPACK_ABI_H

#include <stdint.h>

/* The version gpumem produces, and the highest major version it reads.  */
#define GM_DLPACK_MAJOR 1
#define GM_DLPACK_MINOR 0

/* The version of the C exchange API table gpumem publishes: DLPack 1.3,
   the first release that has it.  A consumer checks the major version
   before it reads past the header.  */
#define GM_DLPACK_EXCHANGE_MAJOR 1
#define GM_DLPACK_EXCHANGE_MINOR 3

/* The exchange API's capsule name and the attribute of the producer's
   type that holds the capsule.  */
#define GM_DLPACK_EXCHANGE_CAPSULE "dlpack_exchange_api"
#define GM_DLPACK_EXCHANGE_ATTR "__dlpack_c_exchange_api__"

/* Bits of DLManagedTensorVersioned.flags.  */
#define GM_DLPACK_FLAG_READ_ONLY (UINT64_C (1) << 0)
#define GM_DLPACK_FLAG_IS_COPIED (UINT64_C (1) << 1)

/* DLDeviceType: the values gpumem meets.  */
enum
{
  GM_DL_CPU = 1,
  GM_DL_CUDA = 2,
  GM_DL_CUDA_HOST = 3,
  GM_DL_CUDA_MANAGED = 13
};

/* DLDataTypeCode values are in gm_dtypes[].dlpack_code (dtype.c).  */
enum
{
  GM_DL_INT = 0,
  GM_DL_UINT = 1,
  GM_DL_FLOAT = 2,
  GM_DL_BFLOAT = 4,
  GM_DL_COMPLEX = 5,
  GM_DL_BOOL = 6
};

typedef struct gm_dl_device
{
  int32_t device_type;     /* DLDeviceType, an enum of int size */
  int32_t device_id;
} gm_dl_device;

typedef struct gm_dl_data_type
{
  uint8_t code;            /* DLDataTypeCode */
  uint8_t bits;            /* bits of one lane */
  uint16_t lanes;          /* 1 for scalars */
} gm_dl_data_type;

typedef struct gm_dl_tensor
{
  void *data;
  gm_dl_device device;
  int32_t ndim;
  gm_dl_data_type dtype;
  int64_t *shape;
  int64_t *strides;        /* in elements; NULL: C-contiguous */
  uint64_t byte_offset;
} gm_dl_tensor;

/* The legacy structure, in capsules named "dltensor".  */
typedef struct gm_dl_managed_tensor
{
  gm_dl_tensor dl_tensor;
  void *manager_ctx;
  void (*deleter) (struct gm_dl_managed_tensor *self);
} gm_dl_managed_tensor;

typedef struct gm_dl_pack_version
{
  uint32_t major;
  uint32_t minor;
} gm_dl_pack_version;

/* The versioned structure, in capsules named "dltensor_versioned".
   Everything up to flags stays put across major versions, so a
   consumer can always read the version and call the deleter.  */
typedef struct gm_dl_managed_tensor_versioned
{
  gm_dl_pack_version version;
  void *manager_ctx;
  void (*deleter) (struct gm_dl_managed_tensor_versioned *self);
  uint64_t flags;
  gm_dl_tensor dl_tensor;
} gm_dl_managed_tensor_versioned;

/* The C exchange API (DLPackExchangeAPI): a table of C functions a
   library publishes on its tensor type, so that another library takes
   its tensors without a Python call.  Every function returns 0, or -1
   with a Python exception set (the allocator: through SET_ERROR); none
   synchronizes streams: the consumer launches on current_work_stream's
   answer.  */

/* The stable header: the table's version, and an older table of another
   major version, or NULL.  */
typedef struct gm_dl_exchange_header
{
  gm_dl_pack_version version;
  struct gm_dl_exchange_header *prev_api;
} gm_dl_exchange_header;

/* A new tensor of PROTOTYPE's dtype, ndim, shape and device, owned by
   the producer, in *OUT; on failure SET_ERROR (ERROR_CTX, KIND, MESSAGE)
   is called once, KIND an exception name ("ValueError", ...).  */
typedef int (*gm_dl_managed_tensor_allocator) (
  gm_dl_tensor *prototype, gm_dl_managed_tensor_versioned **out,
  void *error_ctx,
  void (*set_error) (void *error_ctx, const char *kind, const char *message));

/* PY_OBJECT (of the type the table was found on) exported into *OUT,
   which the caller deletes.  */
typedef int (*gm_dl_managed_tensor_from_py_object) (
  void *py_object, gm_dl_managed_tensor_versioned **out);

/* TENSOR (whose ownership is taken, also on failure) as a new Python
   object of the producer's type, in *OUT_PY_OBJECT.  */
typedef int (*gm_dl_managed_tensor_to_py_object) (
  gm_dl_managed_tensor_versioned *tensor, void **out_py_object);

/* PY_OBJECT described into *OUT, borrowing the producer's shape and
   strides: valid while PY_OBJECT lives and is not changed.  May be NULL
   in a table.  */
typedef int (*gm_dl_tensor_from_py_object) (void *py_object,
                                            gm_dl_tensor *out);

/* The stream the producer's next work on device DEVICE_TYPE, DEVICE_ID
   goes to, in *OUT_STREAM (a cudaStream_t; NULL for the legacy default
   stream, and for host memory).  DEVICE_TYPE is DLDeviceType, an enum
   of int32_t size.  */
typedef int (*gm_dl_current_work_stream) (int32_t device_type,
                                          int32_t device_id,
                                          void **out_stream);

typedef struct gm_dl_exchange_api
{
  gm_dl_exchange_header header;
  gm_dl_managed_tensor_allocator managed_tensor_allocator;
  gm_dl_managed_tensor_from_py_object managed_tensor_from_py_object_no_sync;
  gm_dl_managed_tensor_to_py_object managed_tensor_to_py_object_no_sync;
  gm_dl_tensor_from_py_object dltensor_from_py_object_no_sync;
  gm_dl_current_work_stream current_work_stream;
} gm_dl_exchange_api;

#endif /* GM_DLPACK_ABI_H */
