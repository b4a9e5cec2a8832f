/* ipc-local-test.c -- the share server's authority over its records,
   from C (share.h), in the producer itself (the path that opens without a
   connection): every field of a shared view's handle rewritten, one at
   a time and to many values, with the checksum made right again, must
   open nothing, leave the books as they were, and map no byte; the
   handle as made opens its view, and after gm_ipc_unshare nothing.
     ipc-local-test host    on the host backend
     ipc-local-test cuda    on the CUDA backend: exit 77, "skipped: no
                            CUDA device", where it cannot start
   Exit 0 iff every check passed.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gm.h"
#include "share.h"
#include "c-test.h"

/* FNV-1a 64 of SIZE - 8 bytes of DATA into its last 8, as share-handle.c ends a
   handle.  */
static void
fix_checksum (uint8_t *data, size_t size)
{
  uint64_t hash = 0xcbf29ce484222325u;

  for (size_t i = 0; i + 8 < size; i++)
    hash = (hash ^ data[i]) * 0x100000001b3u;
  for (int i = 0; i < 8; i++)
    data[size - 8 + i] = (uint8_t) (hash >> (8 * i));
}

/* Opens the SIZE bytes ENCODED when they decode: true when it opened
   (and closes it again).  */
static bool
opens (const uint8_t *encoded, size_t size)
{
  gm_ipc_handle handle;
  gm_ipc_import *import;
  void *base;
  int device;

  if (gm_ipc_decode (encoded, size, &handle) != NULL)
    return false;
  if (gm_ipc_open (&handle, &import, &base, &device, NULL, NULL) != GM_OK)
    return false;
  gm_ipc_close (import);
  return true;
}

int
main (int argc, char **argv)
{
  static const uint8_t values[] = {0, 1, 2, 4, 0x10, 0x7f, 0x80, 0xff};
  uint8_t encoded[GM_IPC_MAX_BYTES], rewritten[GM_IPC_MAX_BYTES];
  size_t size, blocks, leases, imports, b2, l2, i2, tried = 0;
  gm_ipc_handle view;
  gm_ipc_block *block;
  gm_ipc_import *import;
  void *ptr, *base;
  int device, exit_status;

  exit_status = test_start_backend (argc, argv, "ipc-local-test");
  if (exit_status != 0)
    return exit_status;
  if (gm_ipc_alloc (0, 256, NULL, &block, &ptr) != GM_OK)
    {
      fprintf (stderr, "gm_ipc_alloc: %s\n", gm_last_error ()->message);
      return 1;
    }
  /* A read-only view of 4 x 4 float32 in the middle of the block.  */
  memset (&view, 0, sizeof view);
  view.object = GM_IPC_OBJECT_ARRAY;
  view.dtype = GM_FLOAT32;
  view.readonly = 1;
  view.offset = 64;
  view.ndim = 2;
  view.shape[0] = 4;
  view.shape[1] = 4;
  view.strides[0] = 16;
  view.strides[1] = 4;
  EXPECT (gm_ipc_export (block, NULL, false, NULL, 0, &view, encoded, &size)
          == GM_OK, "%s", gm_last_error ()->message);
  gm_ipc_counts (&blocks, &leases, &imports);

  /* Every byte but the checksum's, to each value, checksum right.  */
  for (size_t at = 0; at + 8 < size; at++)
    for (size_t v = 0; v < sizeof values; v++)
      {
        if (encoded[at] == values[v])
          continue;
        memcpy (rewritten, encoded, size);
        rewritten[at] = values[v];
        fix_checksum (rewritten, size);
        tried++;
        EXPECT (!opens (rewritten, size), "byte %zu set to 0x%02x opened",
                at, values[v]);
      }
  gm_ipc_counts (&b2, &l2, &i2);
  EXPECT (b2 == blocks && l2 == leases && i2 == imports,
          "the books moved: %zu %zu %zu, were %zu %zu %zu", b2, l2, i2,
          blocks, leases, imports);

  /* A view outside the block is refused at the export.  */
  {
    gm_ipc_handle wide = view;
    uint8_t out[GM_IPC_MAX_BYTES];
    size_t n;
    wide.offset = 200;
    EXPECT (gm_ipc_export (block, NULL, false, NULL, 0, &wide, out, &n)
            == GM_ERR_VALUE, "a view past the block's end was shared");
  }

  /* The handle as made opens its view, element 0 where it was.  */
  {
    gm_ipc_handle handle;
    EXPECT (gm_ipc_decode (encoded, size, &handle) == NULL, "decode");
    EXPECT (gm_ipc_open (&handle, &import, &base, &device, NULL, NULL)
            == GM_OK, "%s", gm_last_error ()->message);
    EXPECT (base == (char *) ptr + 64, "element 0 at %p, not %p", base,
            (void *) ((char *) ptr + 64));
    gm_ipc_close (import);
    EXPECT (gm_ipc_unshare (&handle) == GM_OK, "unshare");
    EXPECT (!opens (encoded, size), "a revoked handle opened");
    EXPECT (gm_ipc_unshare (&handle) == GM_ERR_FAILED, "unshare twice");
  }
  gm_ipc_drop (block);
  gm_ipc_counts (&b2, &l2, &i2);
  EXPECT (b2 == blocks - 1 && l2 == 0 && i2 == 0,
          "left: %zu blocks, %zu leases, %zu imports", b2, l2, i2);
  printf ("%zu rewritten handles refused; %d failure(s)\n", tried, failures);
  return failures == 0 ? 0 : 1;
}
