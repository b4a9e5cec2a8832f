/* fuzz-ipc-handle.c -- libFuzzer target: the share handle's decoder
   (gm_ipc_decode in src/share/share-handle.c), which reads bytes another process
   made (docs/sharing.md, docs/security.md).

   The input is decoded as SIZE bytes exactly, with no byte of room
   after them (so that a read past the end is an AddressSanitizer
   error), and once more with its last 8 bytes made the right checksum
   of the rest, so that the fields behind the checksum are reached too,
   and once more as rewrites of a valid handle's fields (each: a field
   number and 8 bytes of its new value), encoded by gm_ipc_encode with a
   right checksum, as a holder of a handle rewrites it to widen, shift
   or unlock a view.  A handle the decoder accepts must encode back to
   the same
   bytes, name a known dtype and no more than GM_MAX_NDIM dimensions,
   and keep every element inside its block, checked here again by
   walking the corners of its layout; an accepted event handle has no
   dimensions and names its GM_IPC_EVENT_WORD-byte word.  */

#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "share.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

/* Whether every corner of HANDLE's layout, and so every element, lies in
   its block: the lowest and highest element reachable, each with all
   ITEMSIZE bytes.  */
static bool
corners_inside (const gm_ipc_handle *handle, size_t itemsize)
{
  __int128 low = (__int128) handle->offset, high = low;

  for (int d = 0; d < handle->ndim; d++)
    if (handle->shape[d] == 0)
      return true;
  for (int d = 0; d < handle->ndim; d++)
    {
      __int128 reach = (__int128) handle->strides[d]
                       * (handle->shape[d] - 1);
      if (reach < 0)
        low += reach;
      else
        high += reach;
    }
  return low >= 0 && high + (__int128) itemsize
                     <= (__int128) handle->nbytes;
}

/* Decodes the SIZE bytes at COPY and checks what is accepted.  */
static void
check (const uint8_t *copy, size_t size)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  gm_ipc_handle handle;

  if (gm_ipc_decode (copy, size, &handle) != NULL)
    return;
  if (handle.ndim > GM_MAX_NDIM || handle.dtype >= GM_NDTYPES
      || handle.node[GM_IPC_NODE - 1] != '\0')
    abort ();
  if (!corners_inside (&handle, gm_dtypes[handle.dtype].itemsize))
    abort ();
  if (handle.object == GM_IPC_OBJECT_EVENT
      && (handle.ndim != 0 || handle.nbytes != GM_IPC_EVENT_WORD
          || handle.offset != 0 || size != GM_IPC_EVENT_BYTES))
    abort ();
  if (gm_ipc_encode (&handle, encoded) != size
      || memcmp (encoded, copy, size) != 0)
    abort ();
}

/* Applies the rewrites in DATA to a valid array handle, encodes it
   (with a right checksum) and checks it.  */
static void
check_rewritten (const uint8_t *data, size_t size)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  gm_ipc_handle handle;
  size_t n;

  memset (&handle, 0, sizeof handle);
  handle.kind = GM_IPC_KIND_HOST;
  memcpy (handle.node, "0f0e0d0c-0b0a-0908-0706-050403020100", 36);
  handle.pid = 4242;
  handle.uid = 1000;
  handle.block = 7;
  handle.secret = 0x1234567890abcdefu;
  handle.nbytes = 64;
  handle.dtype = GM_FLOAT32;
  handle.ndim = 2;
  handle.shape[0] = 4;
  handle.shape[1] = 4;
  handle.strides[0] = 16;
  handle.strides[1] = 4;
  for (size_t at = 0; at + 9 <= size; at += 9)
    {
      uint64_t value = 0;
      for (int i = 0; i < 8; i++)
        value |= (uint64_t) data[at + 1 + i] << (8 * i);
      switch (data[at] % 12)
        {
        case 0: handle.nbytes = value; break;
        case 1: handle.offset = value; break;
        case 2: handle.dtype = (uint8_t) value; break;
        case 3: handle.readonly = (uint8_t) value; break;
        case 4: handle.ndim = (uint8_t) (value % (GM_MAX_NDIM + 1)); break;
        case 5: handle.object = (uint8_t) value; break;
        case 6: handle.kind = (uint8_t) value; break;
        case 7: handle.node[value % GM_IPC_NODE] = (char) (value >> 8);
          break;
        case 8: handle.pid = (uint32_t) value; break;
        case 9: handle.device = (uint32_t) value; break;
        default:
          {
            int d = (int) ((value >> 56) % GM_MAX_NDIM);
            int64_t v = (int64_t) (value << 8) >> 8;
            if (data[at] % 12 == 10)
              handle.shape[d] = v;
            else
              handle.strides[d] = v;
          }
        }
    }
  if (handle.object == GM_IPC_OBJECT_EVENT)
    handle.ndim = 0;
  n = gm_ipc_encode (&handle, encoded);
  check (encoded, n);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  uint8_t *copy = malloc (size ? size : 1);

  if (copy == NULL)
    return 0;
  memcpy (copy, data, size);
  check (copy, size);
  if (size >= 8)
    {
      /* FNV-1a 64, as src/share/share-handle.c writes it, little-endian.  */
      uint64_t hash = 0xcbf29ce484222325u;
      for (size_t i = 0; i < size - 8; i++)
        hash = (hash ^ copy[i]) * 0x100000001b3u;
      for (int i = 0; i < 8; i++)
        copy[size - 8 + i] = (uint8_t) (hash >> (8 * i));
      check (copy, size);
    }
  check_rewritten (data, size);
  free (copy);
  return 0;
}
