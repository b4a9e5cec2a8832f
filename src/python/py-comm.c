/* py-comm.c -- gpumem.comm: the processes of an MPI job, and collectives
   on DeviceArrays.

   `mpirun -n N gpumem script.py` (or `mpirun -n N python script.py`)
   runs N processes; each sees its rank and the job's size here, and
   moves DeviceArrays between them with barrier, bcast, allreduce and
   gather (comm.c moves the bytes: over gpumem's own MPI, or, in a build
   without MPI, over mpi4py, py-comm-net.c).  Outside a launcher the job
   is one process: rank 0 of 1.

   Every collective meets the other ranks even when this rank refuses its
   own arguments: it then raises its own error while every other rank
   raises ValueError naming it, so a mistake on one rank never leaves the
   others waiting.  */

#include "gm-python.h"

#include "py-comm.h"
#include "comm-engine.h"

/* Runs CALL with the other ranks, without the GIL; ARRAY (a DeviceArray,
   or NULL) is the array CALL moves, held meanwhile so that free () from
   another thread leaves its memory to the collective
   (gmpy_array_hold).  When CALL->refused, the exception this rank
   already has is kept.  0 or -1.  */
static int
run (const gm_comm_call *call, PyObject *array)
{
  PyObject *type = NULL, *value = NULL, *traceback = NULL, *held;
  gm_comm_call checked = *call;
  gm_status status;

  /* Python code run since ARRAY was read (a finalizer while gather
     allocated its result) may have freed it: this rank refuses then,
     still meeting the others.  */
  if (!checked.refused && array != NULL && gmpy_array_check (array)
      && gmpy_array_usable ((arraypy_object *) array) < 0)
    checked.refused = true;
  if (checked.refused)
    PyErr_Fetch (&type, &value, &traceback);
  held = checked.refused ? NULL : gmpy_array_hold (array);
  Py_BEGIN_ALLOW_THREADS
  status = gm_comm_run (&checked);
  Py_END_ALLOW_THREADS
  gmpy_array_unhold (held);
  if (checked.refused)
    {
      PyErr_Restore (type, value, traceback);
      return -1;
    }
  if (status != GM_OK)
    return gmpy_raise_int (status);
  return 0;
}

/* Reads OBJ, a DeviceArray in use, into CALL, its dimensions into DIMS;
   WRITES says the collective writes into it.  0 or -1 (TypeError,
   ValueError).  */
static int
array_arg (PyObject *obj, bool writes, const char *fname, gm_comm_call *call,
           int64_t dims[GM_MAX_NDIM])
{
  arraypy_object *array;

  if (!gmpy_array_check (obj))
    {
      PyErr_Format (PyExc_TypeError,
                    "gpumem.comm.%s: a must be a gpumem.DeviceArray, not "
                    "%.100s (gpumem.asarray or to_device make one)", fname,
                    GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  array = (arraypy_object *) obj;
  if (gmpy_array_usable (array) < 0)
    return -1;
  if (!array->contiguous)
    {
      PyErr_Format (PyExc_ValueError, "gpumem.comm.%s: a is a strided "
                    "(non-contiguous) view; collectives take contiguous "
                    "arrays: pass a.copy()", fname);
      return -1;
    }
  if (writes && array->readonly)
    {
      PyErr_Format (PyExc_ValueError,
                    "gpumem.comm.%s: the array is read-only", fname);
      return -1;
    }
  for (int i = 0; i < array->ndim; i++)
    dims[i] = array->shape[i];
  call->dtype = array->dtype;
  call->ndim = array->ndim;
  call->shape = dims;
  call->count = (size_t) array->size;
  call->data = array->data;
  call->device = array->device;
  return 0;
}

/* Reads OBJ, the stream= argument, into CALL->stream for CALL->device,
   and where the call goes into *D.
   Inside a gpumem.concurrent() block a collective without one takes the
   block's stream of its device: NCCL queues it there, after the block's
   work on the device and before the block's later calls, and the block's
   wait() or end waits for it; MPI, which reads the memory from the host,
   waits for all the device's work first (the block's included) and is
   complete on return.  0 or -1.  */
static int
stream_arg (PyObject *obj, gm_comm_call *call, gmpy_dispatch *d)
{
  if (gmpy_graph_refuse ("a collective (gpumem.comm)") < 0
      || gmpy_dispatch_get (obj, call->device, d) < 0)
    return -1;
  return gmpy_dispatch_stream (d, call->device, &call->stream);
}

/* Reads OBJ, the comm= argument (NULL or None: the job's ranks; else a
   communicator of mpi4py's: with MPI built in, its py2f () gives MPI's
   handle; without, mpi4py carries the call, py-comm-net.c) into *GROUP,
   and CALL->group: NULL or GROUP's.  0, or -1 (TypeError for another
   object; ValueError for no communicator or an intercommunicator;
   gpumem.Error where gpumem does not use MPI).  */
static int
group_arg (PyObject *obj, const char *fname, gmpy_comm_group *group,
           gm_comm_call *call)
{
#ifdef GM_HAVE_MPI
  PyObject *py2f, *handle;
  long value;
  gm_status status;
#endif

  call->group = NULL;
  if (obj == NULL || obj == Py_None)
    return 0;
#ifdef GM_HAVE_MPI
  py2f = PyObject_GetAttrString (obj, "py2f");
  if (py2f == NULL || !PyCallable_Check (py2f))
    {
      Py_XDECREF (py2f);
      PyErr_Format (PyExc_TypeError, "gpumem.comm.%s: comm must be None or "
                    "an mpi4py communicator (mpi4py.MPI.Intracomm), not "
                    "%.100s", fname, GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  handle = PyObject_CallNoArgs (py2f);
  Py_DECREF (py2f);
  if (handle == NULL)
    return -1;
  value = PyLong_Check (handle) ? PyLong_AsLong (handle) : -1;
  Py_DECREF (handle);
  if (PyErr_Occurred ())
    return -1;
  if (value < INT_MIN || value > INT_MAX)
    {
      PyErr_Format (PyExc_ValueError, "gpumem.comm.%s: comm.py2f () gave "
                    "no MPI handle", fname);
      return -1;
    }
  status = gm_comm_group_open ((int) value, &group->group);
  if (status != GM_OK)
    return gmpy_raise_int (status);
#else
  if (gmpy_comm_net_group (obj, fname, &group->group, &group->net) < 0)
    return -1;
#endif
  call->group = &group->group;
  return 0;
}

/* Reads OBJ, the root= argument, into *ROOT: a rank of CALL->group
   where given, else of the job.  0 or -1 (TypeError, ValueError).  */
static int
root_arg (PyObject *obj, const char *fname, gm_comm_call *call)
{
  PyObject *index;
  Py_ssize_t value;
  int size;

  if (call->group == NULL)
    return gmpy_comm_rank_arg (obj, fname, "root", &call->root);
  if (obj == NULL)
    return 0;
  if (gmpy_rank_arg (obj, fname, "root", &index, &value) < 0)
    return -1;
  size = call->group->size;
  if (value < 0 || value >= size)
    {
      PyErr_Format (PyExc_ValueError, "%s: root %S is not a rank of comm: "
                    "it has %d process%s (ranks 0 to %d)", fname, index,
                    size, size == 1 ? "" : "es", size - 1);
      Py_DECREF (index);
      return -1;
    }
  Py_DECREF (index);
  call->root = (int) value;
  return 0;
}

/* This rank in CALL's communicator.  */
static int
call_rank (const gm_comm_call *call)
{
  return call->group != NULL ? call->group->rank : gm_comm_rank ();
}

/* The arguments every collective on an array takes: the array, the
   root (a broadcast, a gather) or the reduction's op (allreduce), the
   stream and the communicator (*GROUP, where given).  -2 when COMM=
   is wrong: the caller raises without meeting the other ranks.  Sets CALL's fields, ARG and where the call goes, *D; 0,
   or -1 with an exception set.  */
static int
collective_args (PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 const char *name, gm_comm_call *call, PyObject *arg[4],
                 int64_t dims[GM_MAX_NDIM], gmpy_dispatch *d,
                 gmpy_comm_group *group)
{
  static const char *const rooted[] = {"a", "root", "stream", "comm", NULL};
  static const char *const reduced[] = {"a", "op", "stream", "comm", NULL};
  bool reduce = call->kind == GM_COMM_ALLREDUCE;
  char qualified[32];
  bool writes;

  snprintf (qualified, sizeof qualified, "gpumem.comm.%s", name);
  if (gmpy_parse_args (args, nargs, kwnames, name, reduce ? reduced : rooted,
                       1, 2, arg) < 0)
    return -1;
  /* No rank to meet on a communicator that cannot be read.  */
  if (group_arg (arg[3], name, group, call) < 0)
    return -2;
  if (reduce ? gmpy_comm_op_arg (arg[1], qualified, &call->op) < 0
             : root_arg (arg[1], qualified, call) < 0)
    return -1;
  /* A broadcast writes every rank's array but the root's; a reduction
     every rank's; a gather none.  */
  writes = reduce || (call->kind == GM_COMM_BCAST
                      && call_rank (call) != call->root);
  if (array_arg (arg[0], writes, name, call, dims) < 0
      || stream_arg (arg[2], call, d) < 0)
    return -1;
  return 0;
}

static PyObject *
commpy_barrier (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                PyObject *kwnames)
{
  static const char *const names[] = {"comm", NULL};
  PyObject *arg[1] = {NULL};
  gmpy_comm_group group;
  gm_comm_call call = {.kind = GM_COMM_BARRIER};

  /* No rank to meet on a communicator that cannot be read: raise.  */
  if (gmpy_parse_args (args, nargs, kwnames, "barrier", names, 0, 0, arg) < 0
      || group_arg (arg[0], "barrier", &group, &call) < 0)
    return NULL;
  if (run (&call, NULL) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *
commpy_bcast (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames)
{
  PyObject *arg[4] = {NULL, NULL, NULL, NULL};
  gmpy_dispatch d = {.stream_obj = NULL};
  int64_t dims[GM_MAX_NDIM];
  gmpy_comm_group group;
  gm_comm_call call = {.kind = GM_COMM_BCAST};
  int parsed = collective_args (args, nargs, kwnames, "bcast", &call, arg,
                                dims, &d, &group);

  if (parsed == -2)
    return NULL;
  if (parsed < 0)
    call.refused = true;
  if (run (&call, arg[0]) < 0)
    return NULL;
  if (call_rank (&call) != call.root)
    gmpy_array_note_stream (arg[0], &d);
  Py_RETURN_NONE;
}

static PyObject *
commpy_allreduce (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
  PyObject *arg[4] = {NULL, NULL, NULL, NULL};
  gmpy_dispatch d = {.stream_obj = NULL};
  int64_t dims[GM_MAX_NDIM];
  gmpy_comm_group group;
  gm_comm_call call = {.kind = GM_COMM_ALLREDUCE};
  gm_status status;
  int parsed = collective_args (args, nargs, kwnames, "allreduce", &call,
                                arg, dims, &d, &group);

  if (parsed == -2)
    return NULL;
  if (parsed < 0)
    call.refused = true;
  else if ((status = gm_comm_op_check (call.dtype, call.op)) != GM_OK)
    {
      gmpy_raise (status);
      call.refused = true;
    }
  if (run (&call, arg[0]) < 0)
    return NULL;
  gmpy_array_note_stream (arg[0], &d);
  Py_RETURN_NONE;
}

/* The root's result of a gather of CALL's array: a new DeviceArray of
   shape (size,) + the array's shape on its device, or NULL with an
   exception set.  */
static arraypy_object *
gather_result (const gm_comm_call *call)
{
  Py_ssize_t shape[GM_MAX_NDIM];
  size_t total;
  int rows = call->group != NULL ? call->group->size : gm_comm_size ();

  if (call->ndim + 1 > GM_MAX_NDIM)
    {
      PyErr_Format (PyExc_ValueError,
                    "gpumem.comm.gather: the result would have %d "
                    "dimensions; at most %d are supported", call->ndim + 1,
                    GM_MAX_NDIM);
      return NULL;
    }
  if (__builtin_mul_overflow (call->count, (size_t) rows, &total)
      || __builtin_mul_overflow (total, gm_dtypes[call->dtype].itemsize,
                                 &total)
      || total > PY_SSIZE_T_MAX)
    {
      PyErr_SetString (PyExc_ValueError,
                       "gpumem.comm.gather: the result is too large");
      return NULL;
    }
  shape[0] = rows;
  for (int i = 0; i < call->ndim; i++)
    shape[i + 1] = (Py_ssize_t) call->shape[i];
  return gmpy_array_new (call->ndim + 1, shape, call->dtype, call->device,
                         call->stream);
}

static PyObject *
commpy_gather (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
  PyObject *arg[4] = {NULL, NULL, NULL, NULL};
  gmpy_dispatch d = {.stream_obj = NULL};
  int64_t dims[GM_MAX_NDIM];
  gmpy_comm_group group;
  gm_comm_call call = {.kind = GM_COMM_GATHER};
  arraypy_object *result = NULL;
  int parsed = collective_args (args, nargs, kwnames, "gather", &call, arg,
                                dims, &d, &group);

  if (parsed == -2)
    return NULL;
  if (parsed < 0)
    call.refused = true;
  else if (call_rank (&call) == call.root)
    {
      result = gather_result (&call);
      if (result == NULL)
        call.refused = true;
      else
        call.result = result->data;
    }
  if (run (&call, arg[0]) < 0)
    {
      Py_XDECREF ((PyObject *) result);
      return NULL;
    }
  if (result == NULL)
    Py_RETURN_NONE;
  gmpy_array_note_stream ((PyObject *) result, &d);
  return (PyObject *) result;
}

/* gpumem.comm.backend, answered when read (PEP 562's module
   __getattr__): deciding it may open NCCL, which `import gpumem` must
   not map.  */
static PyObject *
commpy_getattr (PyObject *comm, PyObject *name)
{
  if (PyUnicode_Check (name)
      && PyUnicode_CompareWithASCIIString (name, "backend") == 0)
    return PyUnicode_FromString (gm_comm_backend_name ());
  PyErr_Format (PyExc_AttributeError,
                "module 'gpumem.comm' has no attribute %R", name);
  return NULL;
}

/* dir(gpumem.comm): its names, backend among them.  */
static PyObject *
commpy_dir (PyObject *comm, PyObject *unused)
{
  PyObject *names = PyObject_GetAttrString (comm, "__dict__");
  PyObject *list, *backend;
  int failed;

  (void) unused;
  if (names == NULL)
    return NULL;
  list = PySequence_List (names);
  Py_DECREF (names);
  backend = PyUnicode_FromString ("backend");
  failed = list == NULL || backend == NULL
           || PyList_Append (list, backend) < 0 || PyList_Sort (list) < 0;
  Py_XDECREF (backend);
  if (failed)
    {
      Py_XDECREF (list);
      return NULL;
    }
  return list;
}

static PyMethodDef commpy_methods[] = {
  {"__getattr__", commpy_getattr, METH_O, NULL},
  {"__dir__", commpy_dir, METH_NOARGS, NULL},
  {"barrier", (PyCFunction) (void (*) (void)) commpy_barrier,
   METH_FASTCALL | METH_KEYWORDS,
   "barrier(*, comm=None)\n--\n\n"
   "Wait until every rank (of COMM, where given) has called barrier()."},
  {"bcast", (PyCFunction) (void (*) (void)) commpy_bcast,
   METH_FASTCALL | METH_KEYWORDS,
   "bcast(a, root=0, *, stream=None, comm=None)\n--\n\n"
   "Copy the root's DeviceArray A into every other rank's A, in place.\n"
   "A has the same shape and dtype on every rank.  With STREAM (a\n"
   "gpumem.Stream of A's device) it is queued there where NCCL moves it;\n"
   "without, it is complete on return.  COMM, an mpi4py communicator (a\n"
   "sub-communicator too), runs it among its ranks (ROOT one of them),\n"
   "through MPI; None: among the job's."},
  {"allreduce", (PyCFunction) (void (*) (void)) commpy_allreduce,
   METH_FASTCALL | METH_KEYWORDS,
   "allreduce(a, op='sum', *, stream=None, comm=None)\n--\n\n"
   "Replace every rank's DeviceArray A, in place, with the elementwise\n"
   "OP ('sum', 'max' or 'min') of all ranks' A.  A has the same shape and\n"
   "dtype on every rank.  On bool arrays sum and max are a logical or, min\n"
   "a logical and; complex arrays have sum only; float16 arrays cannot be\n"
   "reduced (TypeError).  STREAM and COMM as for bcast."},
  {"gather", (PyCFunction) (void (*) (void)) commpy_gather,
   METH_FASTCALL | METH_KEYWORDS,
   "gather(a, root=0, *, stream=None, comm=None)\n--\n\n"
   "On the root, a new DeviceArray of shape (size,) + a.shape on A's\n"
   "device whose row r is rank r's A; None on the other ranks.  A has the\n"
   "same shape and dtype on every rank; with COMM, row r is COMM's rank\n"
   "r's.  STREAM and COMM as for bcast."},
  {NULL, NULL, 0, NULL}
};

int
gmpy_comm_init (PyObject *module, gmpy_state *state)
{
  PyObject *comm = PyModule_New ("gpumem.comm");
  PyObject *modules;
  int failed;

  if (comm == NULL)
    return -1;
  failed
    = PyModule_AddStringConstant (
        comm, "__doc__",
        "The processes of an MPI job (mpirun -n N gpumem script.py).\n\n"
        "rank, size: this process's rank and the number of processes;\n"
        "local_rank, local_size: the same among this node's processes;\n"
        "cuda_aware: whether MPI reads device memory itself (else it is\n"
        "staged through pinned host memory).  barrier(), bcast(a, root=0),\n"
        "allreduce(a, op='sum'), gather(a, root=0) work on DeviceArrays of\n"
        "the same shape and dtype on every rank; a rank whose arguments\n"
        "differ makes every rank raise ValueError.  send_shared(a, dest)\n"
        "and recv_shared(source) hand an array to a rank on this node\n"
        "without a copy.  Outside mpirun the job\n"
        "is this process alone: rank 0 of 1.  backend: 'nccl' when\n"
        "collectives on device arrays go through NCCL, else 'mpi'\n"
        "(GPUMEM_COMM chooses).  allreduce_devices and bcast_devices are\n"
        "gpumem's, over the devices of this one process.")
        < 0
      || PyModule_AddFunctions (comm, commpy_methods) < 0
      || gmpy_comm_share_add (comm) < 0
      || PyModule_AddIntConstant (comm, "rank", gm_comm_rank ()) < 0
      || PyModule_AddIntConstant (comm, "size", gm_comm_size ()) < 0
      || PyModule_AddIntConstant (comm, "local_rank", gm_comm_local_rank ())
           < 0
      || PyModule_AddIntConstant (comm, "local_size", gm_comm_local_size ())
           < 0
      || PyModule_AddObjectRef (comm, "cuda_aware",
                                gm_comm_cuda_aware () ? Py_True : Py_False)
           < 0
      || gmpy_comm_devices_alias (module, comm) < 0
      || PyModule_AddObjectRef (module, "comm", comm) < 0;
  /* `import gpumem.comm` finds it here.  */
  if (!failed)
    {
      modules = PyImport_GetModuleDict ();
      failed = PyDict_SetItemString (modules, "gpumem.comm", comm) < 0;
    }
  Py_DECREF (comm);
  return failed ? -1 : 0;
}
