/* py-comm-share.c -- gpumem.comm.send_shared and recv_shared: one rank
   hands another rank on its node an array (or an interprocess Event)
   without copying it.  The sender shares it (py-share.c) and sends the
   handle's bytes (comm.c); the receiver opens them onto the same memory.

   A message is one status byte and its body: MESSAGE_HANDLE and the
   handle, or MESSAGE_REFUSED and the sender's error in words.  A sender
   that cannot share its object still sends, so that its receiver raises
   too instead of waiting for ever.  Both sides refuse a peer on another
   node before anything is sent, alike, from the job's node table.  */

#include "gm-python.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "py-comm.h"

enum
{
  MESSAGE_HANDLE = 0,
  MESSAGE_REFUSED = 1
};

/* How long one wait without the GIL lasts before Ctrl-C and the timeout
   are looked at, in seconds.  */
#define WAIT_SLICE_S 0.05

/* Reads a peer rank argument WHAT ("dest") of gpumem.comm.FNAME: a rank
   on this node.  0 or -1 (TypeError, ValueError).  */
static int
peer_arg (PyObject *obj, const char *fname, const char *what, int *rank)
{
  char name[64];

  snprintf (name, sizeof name, "gpumem.comm.%s", fname);
  if (gmpy_comm_rank_arg (obj, name, what, rank) < 0)
    return -1;
  if (!gm_comm_same_node (*rank))
    {
      PyErr_Format (PyExc_ValueError, "%s: rank %d runs on another node; "
                    "arrays are handed over without a copy only between "
                    "ranks of one node (bcast and gather copy between "
                    "nodes)", name, *rank);
      return -1;
    }
  return 0;
}

static int
tag_arg (PyObject *obj, const char *fname, int *tag)
{
  long value;

  if (obj == NULL)
    {
      *tag = 0;
      return 0;
    }
  if (!PyLong_Check (obj) || PyBool_Check (obj))
    {
      PyErr_Format (PyExc_TypeError, "gpumem.comm.%s: tag must be an int, "
                    "not %.100s", fname, GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  value = PyLong_AsLong (obj);
  if (value == -1 && PyErr_Occurred ())
    PyErr_Clear ();
  if (value < 0 || value > GM_COMM_TAG_MAX)
    {
      PyErr_Format (PyExc_ValueError, "gpumem.comm.%s: tag %S is out of "
                    "range: 0 to %d", fname, obj, GM_COMM_TAG_MAX);
      return -1;
    }
  *tag = (int) value;
  return 0;
}

/* Sends SIZE bytes of BODY after the status byte KIND to DEST.  0 or -1.  */
static int
send_message (int dest, int tag, uint8_t kind, const char *body, size_t size)
{
  uint8_t message[GM_COMM_MESSAGE_MAX];
  gm_status status;

  if (size > sizeof message - 1)
    size = sizeof message - 1;
  message[0] = kind;
  memcpy (message + 1, body, size);
  Py_BEGIN_ALLOW_THREADS
  status = gm_comm_send (dest, tag, message, size + 1);
  Py_END_ALLOW_THREADS
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

/* Tells DEST that this rank could not share its object, with the error
   raised here (which stays raised).  */
static void
send_refusal (int dest, int tag)
{
  PyObject *type, *value, *traceback, *text;
  const char *words = NULL;
  Py_ssize_t size = 0;

  PyErr_Fetch (&type, &value, &traceback);
  PyErr_NormalizeException (&type, &value, &traceback);
  text = value != NULL
           ? PyUnicode_FromFormat ("%s: %S",
                                   GMPY_TYPE_NAME ((PyTypeObject *) type),
                                   value)
           : NULL;
  if (text != NULL)
    words = PyUnicode_AsUTF8AndSize (text, &size);
  if (words == NULL)
    {
      PyErr_Clear ();
      words = "an error";
      size = (Py_ssize_t) strlen (words);
    }
  if (send_message (dest, tag, MESSAGE_REFUSED, words, (size_t) size) < 0)
    PyErr_Clear ();              /* the first error is the one to raise */
  Py_XDECREF (text);
  PyErr_Restore (type, value, traceback);
}

/* gpumem.comm.send_shared(obj, dest, *, tag=0).  */
static PyObject *
commpy_send_shared (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
  static const char *const names[] = {"obj", "dest", "tag", NULL};
  PyObject *values[3] = {NULL, NULL, NULL}, *handle;
  int dest, tag;
  int failed;
  (void) module;

  if (gmpy_parse_args (args, nargs, kwnames, "send_shared", names, 2, 2,
                       values) < 0
      || peer_arg (values[1], "send_shared", "dest", &dest) < 0
      || tag_arg (values[2], "send_shared", &tag) < 0)
    return NULL;
  if (!gmpy_array_check (values[0])
      && !PyObject_TypeCheck (values[0], gmpy_state_get ()->event_type))
    PyErr_Format (PyExc_TypeError, "gpumem.comm.send_shared: obj must be a "
                  "gpumem.DeviceArray or a gpumem.Event, not %.100s",
                  GMPY_TYPE_NAME (Py_TYPE (values[0])));
  handle = PyErr_Occurred () ? NULL : gmpy_ipc_share (values[0], true, NULL, 0);
  if (handle == NULL)
    {
      send_refusal (dest, tag);
      return NULL;
    }
  failed = send_message (dest, tag, MESSAGE_HANDLE,
                         PyBytes_AS_STRING (handle),
                         (size_t) PyBytes_GET_SIZE (handle));
  Py_DECREF (handle);
  if (failed)
    return NULL;
  Py_RETURN_NONE;
}

static double
seconds_now (void)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (double) now.tv_sec + 1e-9 * (double) now.tv_nsec;
}

/* Waits, without the GIL, up to WAIT_SLICE_S (or until DEADLINE, when
   sooner) for a message from SOURCE with TAG.  GM_ERR_NOT_READY when
   none came.  */
static gm_status
wait_slice (int source, int tag, double deadline, uint8_t *buf,
            size_t *nbytes)
{
  double end = seconds_now () + WAIT_SLICE_S;
  struct timespec pause = {0, 20000};   /* 20 us between polls */
  gm_status status;
  unsigned polls = 0;

  if (deadline < end)
    end = deadline;
  for (;;)
    {
      status = gm_comm_try_recv (source, tag, buf, nbytes);
      if (status != GM_ERR_NOT_READY || seconds_now () >= end)
        return status;
      /* Spin briefly first: a hand-over is often already on its way.  */
      if (++polls > 200)
        nanosleep (&pause, NULL);
    }
}

/* gpumem.comm.recv_shared(source, *, tag=0, timeout=None).  */
static PyObject *
commpy_recv_shared (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames)
{
  static const char *const names[] = {"source", "tag", "timeout", NULL};
  PyObject *values[3] = {NULL, NULL, NULL}, *handle, *result;
  uint8_t message[GM_COMM_MESSAGE_MAX];
  char text[GM_COMM_MESSAGE_MAX + 128];
  double timeout = -1, deadline;
  gm_status status;
  size_t nbytes = 0;
  int source, tag;
  (void) module;

  if (gmpy_parse_args (args, nargs, kwnames, "recv_shared", names, 1, 1,
                       values) < 0
      || peer_arg (values[0], "recv_shared", "source", &source) < 0
      || tag_arg (values[1], "recv_shared", &tag) < 0)
    return NULL;
  if (values[2] != NULL && values[2] != Py_None)
    {
      timeout = PyFloat_AsDouble (values[2]);
      if (timeout == -1 && PyErr_Occurred ())
        return NULL;
      if (!(timeout >= 0))
        return PyErr_Format (PyExc_ValueError, "gpumem.comm.recv_shared: "
                             "timeout must be None or a number of seconds "
                             ">= 0, not %S", values[2]);
    }
  deadline = timeout < 0 ? HUGE_VAL : seconds_now () + timeout;
  do
    {
      Py_BEGIN_ALLOW_THREADS
      status = wait_slice (source, tag, deadline, message, &nbytes);
      Py_END_ALLOW_THREADS
      if (status == GM_ERR_NOT_READY && PyErr_CheckSignals () < 0)
        return NULL;
    }
  while (status == GM_ERR_NOT_READY && seconds_now () < deadline);
  if (status == GM_ERR_NOT_READY)
    {
      snprintf (text, sizeof text, "gpumem.comm.recv_shared: nothing came "
                "from rank %d (tag %d) within %g s", source, tag, timeout);
      PyErr_SetString (PyExc_TimeoutError, text);
      return NULL;
    }
  if (status != GM_OK)
    return gmpy_raise (status);
  if (nbytes == 0 || message[0] > MESSAGE_REFUSED)
    return PyErr_Format (gmpy_state_get ()->error, "gpumem.comm.recv_shared: "
                         "rank %d sent a message that is not a hand-over",
                         source);
  if (message[0] == MESSAGE_REFUSED)
    {
      snprintf (text, sizeof text, "gpumem.comm.recv_shared: rank %d could "
                "not share its object: %.*s", source, (int) (nbytes - 1),
                (const char *) message + 1);
      PyErr_SetString (gmpy_state_get ()->error, text);
      return NULL;
    }
  handle = PyBytes_FromStringAndSize ((const char *) message + 1,
                                      (Py_ssize_t) (nbytes - 1));
  if (handle == NULL)
    return NULL;
  result = gmpy_ipc_open (handle);
  Py_DECREF (handle);
  return result;
}

static PyMethodDef commpy_share_methods[] = {
  {"send_shared", (PyCFunction) (void (*) (void)) commpy_send_shared,
   METH_FASTCALL | METH_KEYWORDS,
   "send_shared(obj, dest, *, tag=0)\n--\n\n"
   "Hand OBJ, a DeviceArray or an Event made with interprocess=True, to\n"
   "rank DEST on this node without a copy: DEST's recv_shared(source,\n"
   "tag=TAG) returns an array on the same memory (or the same event).\n"
   "The array's memory stays until this rank and DEST have both let go.\n"
   "An array outside shareable memory (gpumem.shared_empty) is copied\n"
   "once into it: DEST then gets a snapshot.  DEST's first use waits for\n"
   "the work queued on the array before this call.  Returns without\n"
   "waiting for DEST.  When OBJ cannot be shared this raises, and DEST's\n"
   "recv_shared raises gpumem.Error saying why.  ValueError for a DEST on\n"
   "another node (so does that rank's recv_shared)."},
  {"recv_shared", (PyCFunction) (void (*) (void)) commpy_recv_shared,
   METH_FASTCALL | METH_KEYWORDS,
   "recv_shared(source, *, tag=0, timeout=None)\n--\n\n"
   "Wait for the object rank SOURCE on this node hands over with\n"
   "send_shared(obj, dest, tag=TAG) and return it: a DeviceArray on the\n"
   "same memory (shape, dtype, strides, read-only flag kept), or an\n"
   "Event.  Objects from one rank with one tag arrive in the order they\n"
   "were sent.  TIMEOUT: seconds to wait before TimeoutError (None: for\n"
   "ever; Ctrl-C interrupts)."},
  {NULL, NULL, 0, NULL}
};

int
gmpy_comm_share_add (PyObject *comm)
{
  return PyModule_AddFunctions (comm, commpy_share_methods);
}
