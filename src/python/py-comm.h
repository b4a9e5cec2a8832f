/* py-comm.h -- what the Python files of the collectives share
   (py-comm.c, py-comm-devices.c, py-comm-share.c), in terms of comm.h's types: the rest
   of the Python layer does without comm.h.  */

#ifndef GM_PY_COMM_H
#define GM_PY_COMM_H

#include "gm-python.h"
#include "comm.h"
#include "comm-net.h"

/* Reads an op= argument (NULL: 'sum') of the function FNAME into *OP
   (comm.h's gm_comm_op).  0 or -1 (TypeError, ValueError).  */
int gmpy_comm_op_arg (PyObject *obj, const char *fname, gm_comm_op *op);

/* Adds send_shared and recv_shared (py-comm-share.c) to COMM, the
   gpumem.comm module.  0 or -1.  */
int gmpy_comm_share_add (PyObject *comm);

/* A transport over an mpi4py communicator (py-comm-net.c), where gpumem
   was built without MPI: NET's ctx is this struct.  */
typedef struct gmpy_net
{
  gm_comm_net net;
  PyObject *comm;           /* the mpi4py communicator */
} gmpy_net;

/* A comm= argument: the group, and its transport where it has one.  */
typedef struct gmpy_comm_group
{
  gm_comm_group group;
  gmpy_net net;
} gmpy_comm_group;

/* Reads OBJ, an mpi4py intracommunicator, as the group of one call of
   gpumem.comm.FNAME into *GROUP, its transport in *NET (OBJ borrowed:
   alive for the call).  0, or -1 (TypeError, ValueError; ImportError
   without mpi4py).  */
int gmpy_comm_net_group (PyObject *obj, const char *fname,
                         gm_comm_group *group, gmpy_net *net);

/* Fills FACTS's MPI fields from the MPI beneath mpi4py where the job
   runs over it.  0 or -1.  */
int gmpy_comm_net_describe (gm_comm_facts *facts);

#endif /* GM_PY_COMM_H */
