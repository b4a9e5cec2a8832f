/* comm-mpi-types.c -- gpumem's dtypes and reductions as MPI's
   (comm-mpi-types.h).  */

#include "config.h"

#include "comm-mpi-types.h"

MPI_Datatype
gm_mpi_type (gm_dtype dtype)
{
  switch (dtype)
    {
    case GM_BOOL:
      return MPI_C_BOOL;
    case GM_INT8:
      return MPI_INT8_T;
    case GM_INT16:
      return MPI_INT16_T;
    case GM_INT32:
      return MPI_INT32_T;
    case GM_INT64:
      return MPI_INT64_T;
    case GM_UINT8:
      return MPI_UINT8_T;
    case GM_UINT16:
    case GM_FLOAT16:          /* moved as bits, never reduced */
      return MPI_UINT16_T;
    case GM_UINT32:
      return MPI_UINT32_T;
    case GM_UINT64:
      return MPI_UINT64_T;
    case GM_FLOAT32:
      return MPI_FLOAT;
    case GM_FLOAT64:
      return MPI_DOUBLE;
    case GM_COMPLEX64:
      return MPI_C_FLOAT_COMPLEX;
    case GM_COMPLEX128:
      return MPI_C_DOUBLE_COMPLEX;
    default:
      return MPI_DATATYPE_NULL;
    }
}

MPI_Op
gm_mpi_op (gm_dtype dtype, gm_comm_op op)
{
  if (dtype == GM_BOOL)
    return op == GM_COMM_MIN ? MPI_LAND : MPI_LOR;
  switch (op)
    {
    case GM_COMM_MAX:
      return MPI_MAX;
    case GM_COMM_MIN:
      return MPI_MIN;
    default:
      return MPI_SUM;
    }
}
