/* spill-settings.c -- the spill engine's settings (on or off per
   device, the host limit, GPUMEM_SPILL) and what it reports: its
   figures, --stats' line, why a block may not move.  The engine's
   moves are spill.c's.  */

#include "config.h"

#include <stdio.h>
#include <string.h>

#include "gm.h"
#include "spill.h"
#include "spill-state.h"

gm_spill_device gm_spill_devices[GM_MAX_DEVICES];
size_t gm_spill_host_limit = SIZE_MAX;
bool gm_spill_ever_on;

gm_status
gm_spill_set (int device, bool enabled, size_t limit)
{
  if (device < -1 || device >= GM_MAX_DEVICES)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "spilling: no device %d",
                         device);
  for (int d = 0; d < GM_MAX_DEVICES; d++)
    if (device < 0 || d == device)
      gm_spill_devices[d].stats.enabled = enabled;
  gm_spill_ever_on |= enabled;
  gm_spill_host_limit = limit;
  return GM_OK;
}

bool
gm_spill_enabled (int device)
{
  return gm_spill_device_ok (device)
         && gm_spill_devices[device].stats.enabled;
}

gm_status
gm_spill_from_env (void)
{
  static bool read;
  bool on = false;
  gm_status status;

  if (read)
    return GM_OK;
  read = true;
  status = gm_env_bool ("GPUMEM_SPILL", false, &on);
  if (status != GM_OK)
    return status;
  return on ? gm_spill_set (-1, true, SIZE_MAX) : GM_OK;
}

gm_status
gm_spill_stats_get (int device, gm_spill_stats *stats)
{
  if (!gm_spill_device_ok (device))
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "spilling: no device %d",
                         device);
  *stats = gm_spill_devices[device].stats;
  stats->host_limit = gm_spill_host_limit;
  return GM_OK;
}

void
gm_spill_print_stats (FILE *out)
{
  for (int d = 0; d < GM_MAX_DEVICES; d++)
    {
      const gm_spill_stats *s = &gm_spill_devices[d].stats;
      char out_bytes[32], back_bytes[32], now[32];

      if (s->spills == 0 && s->returns == 0)
        continue;
      gm_format_bytes ((size_t) s->spill_bytes, out_bytes, sizeof out_bytes);
      gm_format_bytes ((size_t) s->return_bytes, back_bytes,
                       sizeof back_bytes);
      gm_format_bytes (s->spilled_bytes, now, sizeof now);
      fprintf (out, "device %d: %llu spills (%s, %.3f s), %llu returns "
               "(%s, %.3f s; %llu in place); %s in %zu arrays spilled at "
               "exit\n",
               d, (unsigned long long) s->spills, out_bytes,
               (double) s->spill_ns / 1e9, (unsigned long long) s->returns,
               back_bytes, (double) s->return_ns / 1e9,
               (unsigned long long) s->exchanges, now, s->spilled_blocks);
    }
}

const char *
gm_spill_why_not (const gm_block *block)
{
  if (!block->listed || block->gone != NULL || block->owner_gone)
    return "not an array's own memory";
  if (block->spilled)
    return "spilled already";
  if (block->native > 0)
    return "held by native code (a C++ gpumem::array, a C API hold, a "
           "DLPack consumer)";
  if (block->holds > 1)
    return "in use by a call";
  if (block->exposure & GM_BLOCK_EXPOSED_POINTER)
    return "its address was handed out (__cuda_array_interface__, .ptr)";
  if (block->exposure & GM_BLOCK_SHARED)
    return "shared with other processes";
  if (block->nbytes == 0)
    return "empty";
  return NULL;
}

void
gm_spill_explain (int device, char *buf, size_t size)
{
  enum { MAX_REASONS = 8 };
  const char *reasons[MAX_REASONS];
  size_t counts[MAX_REASONS] = {0}, bytes[MAX_REASONS] = {0};
  int nreasons = 0;
  size_t used = 0;

  if (size == 0)
    return;
  buf[0] = '\0';
  if (!gm_spill_device_ok (device))
    return;
  for (gm_block *block = gm_spill_devices[device].head; block != NULL;
       block = block->next)
    {
      const char *why = gm_spill_why_not (block);
      int r;
      if (why == NULL)
        continue;
      for (r = 0; r < nreasons && reasons[r] != why; r++)
        ;
      if (r == nreasons)
        {
          if (nreasons == MAX_REASONS)
            continue;
          reasons[nreasons++] = why;
        }
      counts[r]++;
      bytes[r] += block->nbytes;
    }
  for (int r = 0; r < nreasons && used < size; r++)
    {
      char text[32];
      int n;
      gm_format_bytes (bytes[r], text, sizeof text);
      n = snprintf (buf + used, size - used, "%s%zu block%s (%s) %s",
                    r ? "; " : "", counts[r], counts[r] == 1 ? "" : "s",
                    text, reasons[r]);
      if (n < 0)
        break;
      used += (size_t) n;
    }
}
