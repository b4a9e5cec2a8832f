/* spill-state.h -- the spill engine's state, which spill.c (its moves)
   and spill-settings.c (its settings and reports) share; no other file
   includes it.  Callers serialize their use (spill.h).  */

#ifndef GM_SPILL_STATE_H
#define GM_SPILL_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "gm.h"
#include "spill.h"

/* One device's engine.  */
typedef struct gm_spill_device
{
  gm_block *head, *tail;        /* least recently used first */
  gm_spill_stats stats;
} gm_spill_device;

extern gm_spill_device gm_spill_devices[GM_MAX_DEVICES];
/* Host memory for spilled blocks and clean copies, every device: at
   most this many bytes (SIZE_MAX: no limit).  */
extern size_t gm_spill_host_limit;

static inline bool
gm_spill_device_ok (int device)
{
  return device >= 0 && device < GM_MAX_DEVICES;
}

#endif /* GM_SPILL_STATE_H */
