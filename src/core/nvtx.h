/* nvtx.h -- gpumem's NVTX annotation, in plain C: the switch, and the
   ranges every layer may open around what it does (copies, kernel
   launches, collectives, synchronizations, allocations), shown by
   Nsight Systems in a domain of gpumem's own.

   The switch is off unless GPUMEM_NVTX says otherwise (read once, by
   gm_nvtx_init at backend start) or gpumem.nvtx (True) turns it on.
   Off, a caller pays one load and one predictable branch (gm_nvtx_on).
   On, gm_nvtx_push, gm_nvtx_push_name and gm_nvtx_pop reach the tool the
   backend attached (cuda-nvtx.c for the CUDA backend); with none attached
   (the host backend) they do nothing.  No entry point formats text per
   range: a range is named by a string of static storage and carries its
   bytes as a number, so that the tool can name it by a string it
   registered once.  */

#ifndef GM_NVTX_H
#define GM_NVTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gm.h"

/* What a range is about; a category of its own in Nsight.  */
typedef enum gm_nvtx_kind
{
  GM_NVTX_COPY = 1,
  GM_NVTX_KERNEL,
  GM_NVTX_COLLECTIVE,
  GM_NVTX_SYNC,
  GM_NVTX_ALLOC,
  GM_NVTX_NKINDS
} gm_nvtx_kind;

/* A range's BYTES when it has none.  */
#define GM_NVTX_NO_BYTES UINT64_MAX

/* The entry points of an annotation tool, as gm_nvtx_push,
   gm_nvtx_push_name and gm_nvtx_pop below.  */
typedef struct gm_nvtx_tool
{
  void (*push) (gm_nvtx_kind kind, const char *what, int device,
                uint64_t bytes);
  void (*push_name) (gm_nvtx_kind kind, const char *name);
  void (*pop) (void);
} gm_nvtx_tool;

/* The switch; read it through gm_nvtx_on.  */
extern atomic_bool gm_nvtx_switch;

/* Whether annotation is on: callers open a range only when it is, and
   close the ranges they opened whatever it became meanwhile.  */
static inline bool
gm_nvtx_on (void)
{
  return __builtin_expect (atomic_load_explicit (&gm_nvtx_switch,
                                                 memory_order_relaxed), 0);
}

/* Sets the switch from GPUMEM_NVTX, a boolean (gm_env_bool's spellings;
   unset: off): GM_OK, or GM_ERR_VALUE with the error set.  The one place
   that reads it.  */
gm_status gm_nvtx_init (void);

/* Turns annotation on or off (gpumem.nvtx).  */
void gm_nvtx_set (bool on);

/* Makes TOOL the one that receives ranges (NULL: none).  TOOL must
   outlive its use; the backend attaches it at start.  */
void gm_nvtx_attach (const gm_nvtx_tool *tool);

/* Opens a range of KIND on the calling thread, through the attached
   tool (nothing without one), named WHAT, a string of static storage
   ("copy HtoD", a collective's name), followed by " on device DEVICE"
   when DEVICE >= 0, and carrying BYTES as its payload unless it is
   GM_NVTX_NO_BYTES.  */
void gm_nvtx_push (gm_nvtx_kind kind, const char *what, int device,
                   uint64_t bytes);

/* Opens a range of KIND named NAME, a string that needs to live only
   through the call (a kernel's name), like gm_nvtx_push.  */
void gm_nvtx_push_name (gm_nvtx_kind kind, const char *name);

/* Closes the calling thread's newest range opened by gm_nvtx_push or
   gm_nvtx_push_name.  */
void gm_nvtx_pop (void);

#endif /* GM_NVTX_H */
