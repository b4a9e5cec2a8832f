/* dlpack-abi.h -- the DLPack data structures gpumem exchanges, written
   from the DLPack specification (ABI version 1; the legacy unversioned
   structures are those of DLPack 0.8).  Plain C: py-dlpack.c uses the
   structures, dtype.c the type codes (gm_dtypes[].dlpack_code), the
   backends the device types (gm_backend.dlpack_device_type).

   The layout is an ABI shared with every other DLPack library in the
   process: members, their types and their order must stay exactly as
   the specification has them.  */

#ifndef GM_DLPACK_ABI_H
#define GM_DLPACK_ABI_H

#include <stdint.h>

/* The version gpumem produces, and the highest major version it reads.  */
#define GM_DLPACK_MAJOR 1
#define GM_DLPACK_MINOR 0

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

#endif /* GM_DLPACK_ABI_H */
