/* fuzz-ipc-handle.c -- libFuzzer target: the share handle's decoder
   (gm_ipc_decode in src/share/share-handle.c), which reads bytes another process
   made (docs/sharing.md, docs/security.md).

   The input is decoded as SIZE bytes exactly, with no byte of room
   after them (so that a read past the end is an AddressSanitizer
   error), and once more with its last 8 bytes made the right checksum
   of the rest, so that the fields behind the checksum are reached too.
   A handle the decoder accepts must encode back to the same
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
  free (copy);
  return 0;
}
