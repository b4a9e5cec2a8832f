/* py-comm.h -- what the Python files of the collectives share
   (py-comm.c, py-comm-devices.c, py-comm-share.c), in terms of comm.h's types: the rest
   of the Python layer does without comm.h.  */

#ifndef GM_PY_COMM_H
#define GM_PY_COMM_H

#include "gm-python.h"
#include "comm.h"

/* Reads an op= argument (NULL: 'sum') of the function FNAME into *OP
   (comm.h's gm_comm_op).  0 or -1 (TypeError, ValueError).  */
int gmpy_comm_op_arg (PyObject *obj, const char *fname, gm_comm_op *op);

/* Adds send_shared and recv_shared (py-comm-share.c) to COMM, the
   gpumem.comm module.  0 or -1.  */
int gmpy_comm_share_add (PyObject *comm);

#endif /* GM_PY_COMM_H */
