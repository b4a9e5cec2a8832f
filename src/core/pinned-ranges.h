/* pinned-ranges.h -- the page-locked host blocks gpumem allocated
   itself (the CUDA backend's host_alloc: pinned_empty, the concurrent
   blocks' bounce buffers), so that a copy from or into one of them
   knows the memory page-locked without asking CUDA.  Asking
   (cudaPointerGetAttributes) costs some 0.13 us a copy on an H200
   machine, a tenth of what a 4 KiB copy and a synchronize cost gpumem
   over raw C (bench/HISTORY.md, "Where a small copy's microseconds
   went").  Memory page-locked by others (cudaHostRegister, CuPy's
   pinned pool) is not listed: the backend asks CUDA about it, as about
   every address not found here.  Safe from any thread.  */

#ifndef GM_PINNED_RANGES_H
#define GM_PINNED_RANGES_H

#include <stdbool.h>
#include <stddef.h>

/* Records the block of NBYTES (at least 1) at START.  False where the
   list could not grow: the block is then not listed, and copies ask
   CUDA about it, as before.  */
bool gm_pinned_ranges_add (const void *start, size_t nbytes);

/* Forgets the block that starts at START (before it is freed: an
   address freed and then reused by pageable memory must not be taken
   for page-locked).  Nothing where none starts there.  */
void gm_pinned_ranges_remove (const void *start);

/* Whether PTR lies in a listed block.  */
bool gm_pinned_ranges_holds (const void *ptr);

/* Forgets every block and frees the list (the backend's shutdown).  */
void gm_pinned_ranges_clear (void);

#endif /* GM_PINNED_RANGES_H */
