/* gm.h -- gpumem's internal C interface, shared by every layer: one
   header a concern, all of them included here.

   Data flows one way: the Python layer (src/python) checks arguments
   and calls the functions declared here; memory.c keeps the books; a
   backend (src/cuda, src/host) moves bytes.  Nothing declared here
   knows about Python or includes CUDA headers.  */

#ifndef GM_H
#define GM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gm-launch.h"
#include "gm-status.h"
#include "gm-env.h"
#include "gm-dtype.h"
#include "gm-kernel.h"
#include "gm-backend.h"
#include "gm-memory.h"
#include "block-record.h"
#include "spill.h"

#endif /* GM_H */
