/* py-comm-net.c -- gpumem.comm over mpi4py, where gpumem was built
   without MPI of its own (the binary wheel): the transport comm-net.h
   describes, each operation a function of gpumem._comm_mpi4py
   (comm_mpi4py.py, compiled from its text here) on an mpi4py
   communicator.

   The job's transport joins when the module is made (gmpy_exec),
   before any array, so that the node-local rank chooses the default
   device (chosen at first use): where an MPI launcher started this
   python (or GPUMEM_MPI=1), or mpi4py has started MPI already.  Without
   mpi4py there, gpumem.comm is absent and says why: a job whose ranks
   each ran alone would hand each rank its own data back.  A comm=
   argument (an mpi4py communicator) is a transport of its own for one
   call.

   The operations run without the GIL (comm-net.c's callers release
   it) and take it for the call into Python; a Python exception becomes
   the operation's error, and comm-net.c ends the job.  */

#include "gm-python.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "py-comm.h"
#include "comm-net.h"

/* The generated header holding comm_mpi4py.py's text.  */
#include "comm-mpi4py-py.h"

enum
{
  OP_ALLGATHER, OP_BCAST, OP_ALLREDUCE, OP_GATHER, OP_BARRIER, OP_SEND,
  OP_TRY_RECV, OP_ABORT, OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
  "allgather", "bcast", "allreduce", "gather", "barrier", "send",
  "try_recv", "abort"
};

/* gpumem._comm_mpi4py and its operations, once imported.  */
static PyObject *adapter;
static PyObject *ops[OP_COUNT];
/* The job's transport over its communicator (gpumem's duplicate of the
   world), kept for the process's life.  */
static gmpy_net job;
/* MPI ran before gpumem joined it (mpi4py imported by the script
   first); else gpumem imported mpi4py, which started it.  */
static bool running_before;
/* Why gpumem.comm is absent (an MPI launcher started this python and
   mpi4py cannot be imported), or "".  */
static char absent_why[512];

/* Imports gpumem._comm_mpi4py from its text: 0, or -1 with the
   exception set (ImportError where mpi4py is missing).  */
static int
adapter_get (void)
{
  PyObject *code, *module;

  if (adapter != NULL)
    return 0;
  code = Py_CompileString (gm_comm_mpi4py_py, "<gpumem>/comm_mpi4py.py",
                           Py_file_input);
  if (code == NULL)
    return -1;
  module = PyImport_ExecCodeModule ("gpumem._comm_mpi4py", code);
  Py_DECREF (code);
  if (module == NULL)
    return -1;
  for (int i = 0; i < OP_COUNT; i++)
    {
      ops[i] = PyObject_GetAttrString (module, op_names[i]);
      if (ops[i] == NULL)
        {
          for (int j = 0; j < i; j++)
            Py_CLEAR (ops[j]);
          Py_DECREF (module);
          return -1;
        }
    }
  adapter = module;
  return 0;
}

/* The error of an operation after the interpreter has ended (a
   collective from a C caller past Python's exit).  */
static gm_status
python_gone (void)
{
  return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the interpreter has "
                       "ended: mpi4py cannot carry gpumem's collectives");
}

/* The Python exception raised, as OP's error (GM_ERR_UNAVAILABLE);
   clears it.  */
static gm_status
op_failed (int op)
{
  PyObject *type, *value, *traceback, *text;
  const char *message = NULL;
  gm_status status;

  PyErr_Fetch (&type, &value, &traceback);
  text = value != NULL ? PyObject_Str (value) : NULL;
  if (text != NULL)
    message = PyUnicode_AsUTF8 (text);
  PyErr_Clear ();
  status = gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL,
                         "mpi4py's %s failed: %s", op_names[op],
                         message != NULL ? message : "(no message)");
  Py_XDECREF (text);
  Py_XDECREF (type);
  Py_XDECREF (value);
  Py_XDECREF (traceback);
  return status;
}

/* A memoryview of the NBYTES at BUF (WRITABLE or read-only), or None
   for BUF NULL: a new reference, or NULL.  */
static PyObject *
view (const void *buf, size_t nbytes, bool writable)
{
  if (buf == NULL)
    return Py_NewRef (Py_None);
  return PyMemoryView_FromMemory ((char *) buf, (Py_ssize_t) nbytes,
                                  writable ? PyBUF_WRITE : PyBUF_READ);
}

/* Releases a memoryview made by view (), so that nothing keeps the
   address past the call.  */
static void
view_done (PyObject *v)
{
  if (v != NULL && v != Py_None)
    {
      PyObject *r = PyObject_CallMethod (v, "release", NULL);
      Py_XDECREF (r);
      PyErr_Clear ();
    }
  Py_XDECREF (v);
}

/* A buffer an operation hands mpi4py: a memoryview made for the call
   and released after it; BUF NULL is None.  */
typedef struct span
{
  const void *buf;
  size_t nbytes;
  bool writable;
} span;

/* Calls operation OP of N's transport, with the GIL, as
   OP (comm, a view of each of the NSPANS SPANS, then the items of the
   tuple FORMAT builds from the rest: Py_BuildValue's "(...)").  Where
   VALUE is not NULL the result, an int, goes there.  GM_OK, or OP's
   error (also once the interpreter has ended).  */
static gm_status
run_op (gmpy_net *n, int op, long *value, int nspans, const span *spans,
        const char *format, ...)
{
  PyObject *views[2] = {NULL, NULL}, *rest, *args = NULL, *result = NULL;
  PyGILState_STATE gil;
  gm_status status = GM_OK;
  bool made;
  va_list ap;

  if (!Py_IsInitialized ())
    return python_gone ();
  gil = PyGILState_Ensure ();
  va_start (ap, format);
  rest = Py_VaBuildValue (format, ap);
  va_end (ap);
  made = rest != NULL;
  for (int i = 0; i < nspans; i++)
    {
      views[i] = view (spans[i].buf, spans[i].nbytes, spans[i].writable);
      made = made && views[i] != NULL;
    }
  if (made)
    args = PyTuple_New (1 + nspans + PyTuple_Size (rest));
  if (args != NULL)
    {
      PyTuple_SetItem (args, 0, Py_NewRef (n->comm));
      for (int i = 0; i < nspans; i++)
        PyTuple_SetItem (args, 1 + i, Py_NewRef (views[i]));
      for (Py_ssize_t j = 0; j < PyTuple_Size (rest); j++)
        PyTuple_SetItem (args, 1 + nspans + j,
                         Py_NewRef (PyTuple_GetItem (rest, j)));
      result = PyObject_CallObject (ops[op], args);
    }
  if (result == NULL)
    status = op_failed (op);
  else if (value != NULL)
    {
      *value = PyLong_AsLong (result);
      if (*value == -1 && PyErr_Occurred ())
        status = op_failed (op);
    }
  Py_XDECREF (result);
  Py_XDECREF (args);
  Py_XDECREF (rest);
  for (int i = 0; i < nspans; i++)
    view_done (views[i]);
  PyGILState_Release (gil);
  return status;
}

/* The operations of comm-net.h's gm_comm_net; CTX is the gmpy_net.  */
static gm_status
net_allgather (void *ctx, const void *mine, void *all, size_t nbytes)
{
  gmpy_net *n = ctx;
  span spans[2] = {{mine, nbytes, false},
                   {all, nbytes * (size_t) n->net.size, true}};

  return run_op (n, OP_ALLGATHER, NULL, 2, spans, "()");
}

static gm_status
net_bcast (void *ctx, void *buf, size_t nbytes, int root)
{
  span spans[1] = {{buf, nbytes, true}};

  return run_op (ctx, OP_BCAST, NULL, 1, spans, "(i)", root);
}

static gm_status
net_allreduce (void *ctx, void *buf, size_t count, gm_dtype dtype,
               gm_comm_op op)
{
  span spans[1] = {{buf, count * gm_dtypes[dtype].itemsize, true}};

  return run_op (ctx, OP_ALLREDUCE, NULL, 1, spans, "(ss)",
                 gm_dtypes[dtype].name, gm_comm_op_name (op));
}

static gm_status
net_gather (void *ctx, const void *mine, void *all, size_t nbytes, int root)
{
  gmpy_net *n = ctx;
  /* The root's own bytes are in place in ALL: no view of MINE.  */
  span spans[2] = {{all != NULL ? NULL : mine, nbytes, false},
                   {all, nbytes * (size_t) n->net.size, true}};

  return run_op (n, OP_GATHER, NULL, 2, spans, "(i)", root);
}

static gm_status
net_barrier (void *ctx)
{
  return run_op (ctx, OP_BARRIER, NULL, 0, NULL, "()");
}

static gm_status
net_send (void *ctx, int dest, int tag, const void *bytes, size_t nbytes)
{
  span spans[1] = {{bytes, nbytes, false}};

  return run_op (ctx, OP_SEND, NULL, 1, spans, "(ii)", dest, tag);
}

static gm_status
net_try_recv (void *ctx, int source, int tag, void *buf, size_t cap,
              size_t *nbytes)
{
  span spans[1] = {{buf, cap, true}};
  long got = 0;
  gm_status status = run_op (ctx, OP_TRY_RECV, &got, 1, spans, "(ii)",
                             source, tag);

  if (status != GM_OK)
    return status;
  if (got == -1)
    return GM_ERR_NOT_READY;
  if (got < 0)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "rank %d sent a message "
                         "longer than %zu bytes", source, cap);
  *nbytes = (size_t) got;
  return GM_OK;
}

static void
net_abort (void *ctx)
{
  PyGILState_STATE gil;
  PyObject *r;

  (void) ctx;
  if (Py_IsInitialized ())
    {
      gil = PyGILState_Ensure ();
      r = PyObject_CallNoArgs (ops[OP_ABORT]);
      Py_XDECREF (r);
      PyGILState_Release (gil);
    }
  _exit (1);
}

/* Fills N, a transport over COMM (borrowed: alive while N is used) of
   SIZE processes, this one RANK.  */
static void
net_fill (gmpy_net *n, PyObject *comm, int rank, int size)
{
  n->comm = comm;
  n->net = (gm_comm_net) {
    .ctx = n, .name = "mpi4py", .rank = rank, .size = size,
    .allgather = net_allgather, .bcast = net_bcast,
    .allreduce = net_allreduce, .gather = net_gather,
    .barrier = net_barrier, .send = net_send, .try_recv = net_try_recv,
    .abort = net_abort
  };
}

/* Called by gpumem._comm_mpi4py when MPI begins to finalize.  */
static PyObject *
net_leave (PyObject *self, PyObject *unused)
{
  (void) self;
  (void) unused;
  Py_BEGIN_ALLOW_THREADS
  gm_comm_net_leave ();
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyMethodDef leave_def = {"leave", net_leave, METH_NOARGS, NULL};

/* Joins the job mpi4py gives: 0, or -1 with the exception set.  */
static int
join (void)
{
  PyObject *leave, *fn, *got, *comm, *node_of;
  int rank, size, node_rank, node_size, *nodes;
  gm_status status;

  leave = PyCFunction_New (&leave_def, NULL);
  if (leave == NULL)
    return -1;
  fn = PyObject_GetAttrString (adapter, "join");
  got = fn != NULL ? PyObject_CallFunctionObjArgs (fn, leave, NULL) : NULL;
  Py_XDECREF (fn);
  Py_DECREF (leave);
  if (got == NULL)
    return -1;
  if (!PyArg_ParseTuple (got, "OiiiiO", &comm, &rank, &size, &node_rank,
                         &node_size, &node_of))
    {
      Py_DECREF (got);
      return -1;
    }
  nodes = PyMem_Malloc (sizeof *nodes * (size_t) size);
  if (nodes == NULL)
    {
      Py_DECREF (got);
      PyErr_NoMemory ();
      return -1;
    }
  for (int r = 0; r < size; r++)
    {
      PyObject *item = PySequence_GetItem (node_of, r);
      nodes[r] = item != NULL ? (int) PyLong_AsLong (item) : -1;
      Py_XDECREF (item);
    }
  if (PyErr_Occurred ())
    {
      PyMem_Free (nodes);
      Py_DECREF (got);
      return -1;
    }
  net_fill (&job, Py_NewRef (comm), rank, size);
  Py_DECREF (got);
  status = gm_comm_net_join (&job.net, node_rank, node_size, nodes);
  PyMem_Free (nodes);
  if (status != GM_OK)
    {
      PyErr_Format (PyExc_ImportError, "gpumem: joining the job mpi4py "
                    "gives: %s", gm_last_error ()->message);
      return -1;
    }
  return 0;
}

/* Whether mpi4py has started MPI already (mpi4py.MPI imported, and MPI
   initialized and not finalized).  */
static bool
mpi4py_running (void)
{
  PyObject *modules = PyImport_GetModuleDict ();
  PyObject *mpi = PyDict_GetItemString (modules, "mpi4py.MPI"), *r;
  bool yes;

  if (mpi == NULL)
    return false;
  r = PyObject_CallMethod (mpi, "Is_initialized", NULL);
  yes = r == Py_True;
  Py_XDECREF (r);
  r = yes ? PyObject_CallMethod (mpi, "Is_finalized", NULL) : NULL;
  yes = yes && r == Py_False;
  Py_XDECREF (r);
  PyErr_Clear ();
  return yes;
}

int
gmpy_comm_net_start (void)
{
  bool start, forbidden;

  if (gm_comm_net_current () != NULL)
    return 0;
  if (gm_comm_launched (&start, &forbidden) != GM_OK)
    {
      PyErr_Format (PyExc_ImportError, "gpumem: %s",
                    gm_last_error ()->message);
      return -1;
    }
  running_before = mpi4py_running ();
  if (forbidden || (!start && !running_before))
    return 0;
  if (adapter_get () < 0)
    {
      PyObject *type, *value, *traceback, *text;
      const char *why;

      if (!PyErr_ExceptionMatches (PyExc_ImportError))
        return -1;
      PyErr_Fetch (&type, &value, &traceback);
      text = value != NULL ? PyObject_Str (value) : NULL;
      why = text != NULL ? PyUnicode_AsUTF8 (text) : NULL;
      PyErr_Clear ();
      snprintf (absent_why, sizeof absent_why,
                "an MPI launcher started this python, but mpi4py cannot be "
                "imported (%s): this gpumem was built without MPI of its "
                "own (as the binary wheel is) and runs jobs of several "
                "processes over mpi4py: pip install 'gpumem[mpi]' "
                "(docs/mpi.md)", why != NULL ? why : "ImportError");
      Py_XDECREF (text);
      Py_XDECREF (type);
      Py_XDECREF (value);
      Py_XDECREF (traceback);
      return PyErr_WarnFormat (PyExc_RuntimeWarning, 1, "gpumem: %s; "
                               "gpumem.comm is absent", absent_why);
    }
  return join ();
}

const char *
gmpy_comm_net_absent (void)
{
  return absent_why[0] != '\0' ? absent_why : NULL;
}

int
gmpy_comm_net_group (PyObject *obj, const char *fname, gm_comm_group *group,
                     gmpy_net *net)
{
  PyObject *got, *fn;
  char what[64];
  int rank, size;

  if (adapter_get () < 0)
    return -1;
  snprintf (what, sizeof what, "gpumem.comm.%s", fname);
  fn = PyObject_GetAttrString (adapter, "group");
  got = fn != NULL ? PyObject_CallFunction (fn, "Os", obj, what) : NULL;
  Py_XDECREF (fn);
  if (got == NULL)
    return -1;
  if (!PyArg_ParseTuple (got, "ii", &rank, &size))
    {
      Py_DECREF (got);
      return -1;
    }
  Py_DECREF (got);
  net_fill (net, obj, rank, size);
  *group = (gm_comm_group) {.rank = rank, .size = size, .net = &net->net};
  return 0;
}

int
gmpy_comm_net_describe (gm_comm_facts *facts)
{
  static char level[32];
  PyObject *fn, *got;
  const char *standard, *library, *version, *path, *thread;

  if (gm_comm_net_current () == NULL)
    return 0;
  fn = PyObject_GetAttrString (adapter, "facts");
  got = fn != NULL ? PyObject_CallNoArgs (fn) : NULL;
  Py_XDECREF (fn);
  if (got == NULL
      || !PyArg_ParseTuple (got, "sssss", &standard, &library, &version,
                            &path, &thread))
    {
      Py_XDECREF (got);
      return -1;
    }
  facts->mpi_in_use = true;
  facts->mpi_joined = running_before;
  sscanf (standard, "%d.%d", &facts->mpi_major, &facts->mpi_minor);
  snprintf (facts->mpi_library, sizeof facts->mpi_library, "%s", library);
  snprintf (facts->mpi_path, sizeof facts->mpi_path, "%s", path);
  snprintf (level, sizeof level, "%s", thread);
  facts->thread_level = level;
  (void) version;
  Py_DECREF (got);
  return 0;
}
