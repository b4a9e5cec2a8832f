/* share-handle.c -- the share handle's bytes: encoding, strict decoding, node id.

   Layout (little-endian, offsets in bytes):
     0 "GMSH"   4 version u16   6 kind u8   7 dtype u8   8 readonly u8
     9 ndim u8  10 object u8    11 zero u8   12 pid u32  16 device u32
    20 node[40] (NUL-padded)    60 server u64   68 block u64
    76 secret u64   84 device uuid[16]   100 nbytes u64   108 offset u64
   116 opaque[128]   244 uid u32   248 zero u32
   252 an array's shape i64 x ndim, then strides i64 x ndim, or an
   event's data[64]
   then FNV-1a 64 of everything before it.
   Anything from another process is input: the decoder trusts no field
   (tests/fuzz/fuzz-ipc-handle.c).  A handle that decodes is only well
   formed: what it opens is what the producer's server recorded for it
   (share-records.c), and the server answers only the handle it made.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "share.h"

static void
put_u16 (uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t) v;
  p[1] = (uint8_t) (v >> 8);
}

static void
put_u32 (uint8_t *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t) (v >> (8 * i));
}

static void
put_u64 (uint8_t *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t) (v >> (8 * i));
}

static uint16_t
get_u16 (const uint8_t *p)
{
  return (uint16_t) (p[0] | (p[1] << 8));
}

static uint32_t
get_u32 (const uint8_t *p)
{
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static uint64_t
get_u64 (const uint8_t *p)
{
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

/* FNV-1a, 64 bits, of the SIZE bytes at DATA: it catches a damaged or
   truncated handle; the secret, not this, stops a forged one.  */
static uint64_t
checksum (const uint8_t *data, size_t size)
{
  uint64_t hash = 0xcbf29ce484222325u;
  for (size_t i = 0; i < size; i++)
    hash = (hash ^ data[i]) * 0x100000001b3u;
  return hash;
}

size_t
gm_ipc_encode (const gm_ipc_handle *handle, uint8_t *out)
{
  size_t at = GM_IPC_FIXED_BYTES - 8, size;

  memset (out, 0, GM_IPC_MAX_BYTES);
  memcpy (out, "GMSH", 4);
  put_u16 (out + 4, GM_IPC_VERSION);
  out[6] = handle->kind;
  out[7] = handle->dtype;
  out[8] = handle->readonly;
  out[9] = handle->ndim;
  out[10] = handle->object;
  put_u32 (out + 12, handle->pid);
  put_u32 (out + 16, handle->device);
  memcpy (out + 20, handle->node, GM_IPC_NODE);
  put_u64 (out + 60, handle->server);
  put_u64 (out + 68, handle->block);
  put_u64 (out + 76, handle->secret);
  memcpy (out + 84, handle->device_uuid, 16);
  put_u64 (out + 100, handle->nbytes);
  put_u64 (out + 108, handle->offset);
  memcpy (out + 116, handle->opaque, GM_IPC_OPAQUE);
  put_u32 (out + 244, handle->uid);
  if (handle->object == GM_IPC_OBJECT_EVENT)
    {
      memcpy (out + at, handle->event, GM_IPC_EVENT_DATA);
      at += GM_IPC_EVENT_DATA;
    }
  for (int d = 0; d < handle->ndim; d++, at += 8)
    put_u64 (out + at, (uint64_t) handle->shape[d]);
  for (int d = 0; d < handle->ndim; d++, at += 8)
    put_u64 (out + at, (uint64_t) handle->strides[d]);
  size = at + 8;
  put_u64 (out + at, checksum (out, at));
  return size;
}

/* Whether every element of HANDLE's layout lies in its block: the
   lowest and highest byte any index reaches, from OFFSET, stay in
   0 .. NBYTES-1.  An empty array reaches none.  */
static bool
layout_fits (const gm_ipc_handle *handle, uint64_t itemsize)
{
  /* Each term is checked against the block's size (under 2**63) before
     it is added, so the sums of at most GM_MAX_NDIM terms stay far from
     the 128-bit limits.  */
  __int128 low = 0, high = 0;

  for (int d = 0; d < handle->ndim; d++)
    if (handle->shape[d] == 0)
      return true;
  for (int d = 0; d < handle->ndim; d++)
    {
      __int128 reach = (__int128) handle->strides[d]
                       * (handle->shape[d] - 1);
      if (reach > (__int128) handle->nbytes
          || -reach > (__int128) handle->nbytes)
        return false;
      if (reach < 0)
        low += reach;
      else
        high += reach;
    }
  low += handle->offset;
  high += (__int128) handle->offset + itemsize;
  return low >= 0 && high <= (__int128) handle->nbytes;
}

/* Whether NODE is a node id as gm_ipc_node_id writes it: printable
   ASCII without spaces, then NULs to the end.  */
static bool
node_valid (const char node[GM_IPC_NODE])
{
  size_t n = 0;

  while (n < GM_IPC_NODE && node[n] > ' ' && node[n] < 0x7f)
    n++;
  if (n == 0 || n == GM_IPC_NODE)
    return false;
  for (; n < GM_IPC_NODE; n++)
    if (node[n] != '\0')
      return false;
  return true;
}

const char *
gm_ipc_decode (const uint8_t *data, size_t size, gm_ipc_handle *handle)
{
  size_t at = GM_IPC_FIXED_BYTES - 8;
  uint64_t itemsize;

  if (size < GM_IPC_FIXED_BYTES || memcmp (data, "GMSH", 4) != 0)
    return "it is not a gpumem share handle";
  if (get_u16 (data + 4) != GM_IPC_VERSION)
    return "it was made by another version of gpumem";
  if (data[9] > GM_MAX_NDIM)
    return "it has too many dimensions";
  if (data[10] > GM_IPC_OBJECT_EVENT)
    return "it names an unknown kind of object";
  if (data[10] == GM_IPC_OBJECT_EVENT
      ? size != GM_IPC_EVENT_BYTES || data[9] != 0
      : size != GM_IPC_ENCODED_BYTES (data[9]))
    return "its length does not match its dimensions";
  if (get_u64 (data + size - 8) != checksum (data, size - 8))
    return "its checksum does not match (damaged or forged)";
  memset (handle, 0, sizeof *handle);
  handle->kind = data[6];
  handle->dtype = data[7];
  handle->readonly = data[8];
  handle->ndim = data[9];
  handle->object = data[10];
  if (handle->kind != GM_IPC_KIND_HOST && handle->kind != GM_IPC_KIND_CUDA)
    return "it names an unknown kind of memory";
  if (handle->dtype >= GM_NDTYPES)
    return "it names an unknown dtype";
  if (handle->readonly > 1 || data[11] != 0)
    return "its flags are not valid";
  handle->pid = get_u32 (data + 12);
  handle->device = get_u32 (data + 16);
  memcpy (handle->node, data + 20, GM_IPC_NODE);
  if (!node_valid (handle->node))
    return "its node id is not valid";
  handle->server = get_u64 (data + 60);
  handle->block = get_u64 (data + 68);
  handle->secret = get_u64 (data + 76);
  memcpy (handle->device_uuid, data + 84, 16);
  handle->nbytes = get_u64 (data + 100);
  handle->offset = get_u64 (data + 108);
  memcpy (handle->opaque, data + 116, GM_IPC_OPAQUE);
  handle->uid = get_u32 (data + 244);
  if (get_u32 (data + 248) != 0)
    return "its flags are not valid";
  if (handle->pid == 0 || handle->pid > INT32_MAX)
    return "its process id is not valid";
  if (handle->device > INT32_MAX || handle->nbytes == 0
      || handle->nbytes > INT64_MAX || handle->offset > handle->nbytes)
    return "its device or block size is not valid";
  if (handle->object == GM_IPC_OBJECT_EVENT)
    {
      if (handle->dtype != 0 || handle->readonly != 0
          || handle->nbytes != GM_IPC_EVENT_WORD || handle->offset != 0)
        return "its event fields are not valid";
      memcpy (handle->event, data + at, GM_IPC_EVENT_DATA);
      return NULL;
    }
  itemsize = gm_dtypes[handle->dtype].itemsize;
  for (int d = 0; d < handle->ndim; d++, at += 8)
    {
      handle->shape[d] = (int64_t) get_u64 (data + at);
      if (handle->shape[d] < 0)
        return "it has a negative dimension";
    }
  for (int d = 0; d < handle->ndim; d++, at += 8)
    {
      handle->strides[d] = (int64_t) get_u64 (data + at);
      if (handle->strides[d] % (int64_t) itemsize != 0)
        return "its strides are not multiples of the item size";
    }
  if (!layout_fits (handle, itemsize))
    return "its elements reach outside its block";
  return NULL;
}

/* This node's id, read once (it does not change while the node runs).  */
static char node_id[GM_IPC_NODE];
static pthread_once_t node_id_once = PTHREAD_ONCE_INIT;

static void
read_node_id (void)
{
  char *node = node_id;
  FILE *file = fopen ("/proc/sys/kernel/random/boot_id", "r");
  size_t n = 0;

  memset (node, 0, GM_IPC_NODE);
  if (file != NULL)
    {
      n = fread (node, 1, GM_IPC_NODE - 1, file);
      fclose (file);
      while (n > 0 && (node[n - 1] == '\n' || node[n - 1] == ' '))
        node[--n] = '\0';
    }
  if (n == 0)
    {
      memcpy (node, "host:", 5);
      if (gethostname (node + 5, GM_IPC_NODE - 6) != 0 || node[5] == '\0')
        memcpy (node + 5, "unknown", 8);
      node[GM_IPC_NODE - 1] = '\0';
    }
  /* Only what the decoder accepts (node_valid).  */
  for (size_t i = 0; i < GM_IPC_NODE && node[i] != '\0'; i++)
    if (node[i] <= ' ' || node[i] >= 0x7f)
      node[i] = '_';
}

void
gm_ipc_node_id (char node[GM_IPC_NODE])
{
  pthread_once (&node_id_once, read_node_id);
  memcpy (node, node_id, GM_IPC_NODE);
}
