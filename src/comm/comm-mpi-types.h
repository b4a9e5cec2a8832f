/* comm-mpi-types.h -- gpumem's dtypes and reductions as MPI's
   datatypes and operations (comm-mpi-types.c), for comm-mpi.c's
   collectives.  Built only with MPI.  */

#ifndef GM_COMM_MPI_TYPES_H
#define GM_COMM_MPI_TYPES_H

#include <mpi.h>

#include "comm.h"

/* DTYPE's MPI datatype (float16 as its 16 bits: moved, never reduced),
   or MPI_DATATYPE_NULL for none.  */
MPI_Datatype gm_mpi_type (gm_dtype dtype);

/* NumPy's meaning of OP on DTYPE as an MPI operation: on bool arrays a
   sum is a logical or (as a += b is), max an or and min an and.  */
MPI_Op gm_mpi_op (gm_dtype dtype, gm_comm_op op);

#endif /* GM_COMM_MPI_TYPES_H */
