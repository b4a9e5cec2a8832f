/* py-stream-context.c -- the thread's stream context: which stream a
   call that names none uses.

   A `with stream:` block makes its stream the current one of its
   device in this thread until the block ends; blocks nest, innermost
   last.  The dispatch of a call (py-dispatch.c) asks
   gmpy_stream_current when the call names no stream; gpumem.concurrent()
   and gpumem.graph() ask whether any block is open
   (gmpy_stream_context_open).  The Stream
   type (py-stream.c) opens and closes the blocks.  */

#include "gm-python.h"

/* Key, in each thread's state dict, of that thread's stream contexts:
   a dict {device index: list of the Streams of its open `with` blocks,
   innermost last}.  */
#define CONTEXTS_KEY "gpumem.stream_contexts"

/* `with stream:` blocks open in all threads (changed under the GIL): while
   there are none, calls without stream= skip the lookup.  A thread that
   ends inside a block leaves it counted, which only costs the lookups.  */
static Py_ssize_t open_blocks;

/* The blocks that pick the stream of calls without stream=, open in all
   threads: open_blocks and gpumem.concurrent () blocks
   (gmpy_launch_blocks_note).  The C API lends its address, so that a
   caster knows without a call that the launch stream is the default
   one (gm_c_api_table.launch_blocks).  */
static uint32_t launch_blocks;

/* The list of DEVICE's open `with stream:` blocks in this thread, a new
   reference; created when CREATE, else None when there is none.  NULL
   with an exception on failure.  */
static PyObject *
context_stack (int device, bool create)
{
  PyObject *thread_dict = PyThreadState_GetDict (), *contexts, *key, *stack;

  if (thread_dict == NULL)
    {
      if (!create)
        return Py_NewRef (Py_None);
      PyErr_SetString (PyExc_RuntimeError, "no thread state for a stream "
                                           "context");
      return NULL;
    }
  contexts = PyDict_GetItemString (thread_dict, CONTEXTS_KEY);
  if (contexts == NULL)
    {
      if (!create)
        return Py_NewRef (Py_None);
      contexts = PyDict_New ();
      if (contexts == NULL
          || PyDict_SetItemString (thread_dict, CONTEXTS_KEY, contexts) < 0)
        {
          Py_XDECREF (contexts);
          return NULL;
        }
      Py_DECREF (contexts);
    }
  key = PyLong_FromLong (device);
  if (key == NULL)
    return NULL;
  stack = PyDict_GetItemWithError (contexts, key);
  if (stack != NULL || PyErr_Occurred ())
    {
      Py_DECREF (key);
      return Py_XNewRef (stack);
    }
  if (!create)
    {
      Py_DECREF (key);
      return Py_NewRef (Py_None);
    }
  stack = PyList_New (0);
  if (stack == NULL || PyDict_SetItem (contexts, key, stack) < 0)
    Py_CLEAR (stack);
  Py_DECREF (key);
  return stack;
}

PyObject *
gmpy_stream_current (int device)
{
  PyObject *stack, *current;

  if (open_blocks == 0)
    return Py_NewRef (Py_None);
  stack = context_stack (device, false);
  if (stack == NULL)
    return NULL;
  if (stack == Py_None || PyList_GET_SIZE (stack) == 0)
    current = Py_NewRef (Py_None);
  else
    current = Py_NewRef (PyList_GET_ITEM (stack, PyList_GET_SIZE (stack) - 1));
  Py_DECREF (stack);
  return current;
}

bool
gmpy_stream_context_open (void)
{
  PyObject *thread_dict, *contexts, *stack;
  Py_ssize_t pos = 0;

  if (open_blocks == 0)
    return false;
  thread_dict = PyThreadState_GetDict ();
  contexts = thread_dict ? PyDict_GetItemString (thread_dict, CONTEXTS_KEY)
                         : NULL;
  if (contexts == NULL)
    return false;
  while (PyDict_Next (contexts, &pos, NULL, &stack))
    if (PyList_Check (stack) && PyList_GET_SIZE (stack) > 0)
      return true;
  return false;
}

int
gmpy_stream_context_push (PyObject *stream)
{
  PyObject *stack = context_stack (((streampy_object *) stream)->device,
                                   true);
  int rc;

  if (stack == NULL)
    return -1;
  rc = PyList_Append (stack, stream);
  Py_DECREF (stack);
  if (rc < 0)
    return -1;
  open_blocks++;
  launch_blocks++;
  return 0;
}

int
gmpy_stream_context_pop (PyObject *stream)
{
  PyObject *stack = context_stack (((streampy_object *) stream)->device,
                                   false);
  Py_ssize_t n;

  if (stack == NULL)
    return -1;
  n = stack == Py_None ? 0 : PyList_GET_SIZE (stack);
  if (n == 0 || PyList_GET_ITEM (stack, n - 1) != stream)
    {
      Py_DECREF (stack);
      PyErr_SetString (PyExc_RuntimeError, "this stream's with block is not "
                       "the innermost one of its device in this thread");
      return -1;
    }
  if (PyList_SetSlice (stack, n - 1, n, NULL) < 0)
    {
      Py_DECREF (stack);
      return -1;
    }
  Py_DECREF (stack);
  open_blocks--;
  launch_blocks--;
  return 0;
}

/* The non-blocking Streams alive (made or wrapped), under the GIL.  */
static Py_ssize_t non_blocking_streams;

void
gmpy_non_blocking_note (bool made)
{
  non_blocking_streams += made ? 1 : -1;
  gmpy_launch_blocks_note (made);
}

bool
gmpy_non_blocking_streams (void)
{
  return non_blocking_streams > 0;
}

void
gmpy_launch_blocks_note (bool opened)
{
  if (opened)
    launch_blocks++;
  else
    launch_blocks--;
}

const uint32_t *
gmpy_launch_blocks (void)
{
  return &launch_blocks;
}
