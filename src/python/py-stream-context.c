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
   a dict {device index: list of its open `with stream:` blocks,
   innermost last}.  A block is a tuple (Stream, the address of the
   Python frame whose `with` statement opened it), so that its exit
   finds it whatever the order: a generator's block closed while a
   later block is innermost, or closed by another thread (the garbage
   collector), leaves the stack as if it had never opened, and every
   block restores what the blocks still open below it choose.  */
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

/* Every stack context_stack made, in any thread: where an exit looks
   for a block its own thread does not hold.  A list; a stack no thread
   holds any more (its thread ended) and that is empty is dropped
   (drop_idle_stacks) before a new stack is added.  */
static PyObject *all_stacks;

/* Drops from all_stacks the stacks of ended threads that hold no open
   block.  */
static void
drop_idle_stacks (void)
{
  for (Py_ssize_t k = PyList_GET_SIZE (all_stacks) - 1; k >= 0; k--)
    {
      PyObject *stack = PyList_GET_ITEM (all_stacks, k);
      if (Py_REFCNT (stack) == 1 && PyList_GET_SIZE (stack) == 0
          && PyList_SetSlice (all_stacks, k, k + 1, NULL) < 0)
        PyErr_Clear ();
    }
}

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
  if (all_stacks == NULL && (all_stacks = PyList_New (0)) == NULL)
    {
      Py_DECREF (key);
      return NULL;
    }
  drop_idle_stacks ();
  stack = PyList_New (0);
  if (stack != NULL && PyList_Append (all_stacks, stack) < 0)
    Py_CLEAR (stack);
  if (stack != NULL && PyDict_SetItem (contexts, key, stack) < 0)
    Py_CLEAR (stack);       /* left in all_stacks, empty: dropped later */
  Py_DECREF (key);
  return stack;
}

/* The Stream of BLOCK, an entry of a stack.  */
#define BLOCK_STREAM(block) PyTuple_GET_ITEM ((block), 0)

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
    current = Py_NewRef (BLOCK_STREAM (
        PyList_GET_ITEM (stack, PyList_GET_SIZE (stack) - 1)));
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

/* The address of the Python frame that calls __enter__ or __exit__ (a
   `with` statement's), as an int; 0 where none runs.  */
static PyObject *
calling_frame (void)
{
  return PyLong_FromVoidPtr ((void *) PyEval_GetFrame ());
}

int
gmpy_stream_context_push (PyObject *stream)
{
  PyObject *stack = context_stack (((streampy_object *) stream)->device,
                                   true);
  PyObject *frame, *block;
  int rc;

  if (stack == NULL)
    return -1;
  frame = calling_frame ();
  block = frame != NULL ? PyTuple_Pack (2, stream, frame) : NULL;
  Py_XDECREF (frame);
  rc = block != NULL ? PyList_Append (stack, block) : -1;
  Py_XDECREF (block);
  Py_DECREF (stack);
  if (rc < 0)
    return -1;
  open_blocks++;
  launch_blocks++;
  return 0;
}

/* The index in STACK (a list of blocks) of the innermost block of
   STREAM, opened in the frame FRAME when FRAME is not NULL; -1 when
   there is none.  */
static Py_ssize_t
find_block (PyObject *stack, PyObject *stream, PyObject *frame)
{
  for (Py_ssize_t i = PyList_GET_SIZE (stack) - 1; i >= 0; i--)
    {
      PyObject *block = PyList_GET_ITEM (stack, i);
      if (BLOCK_STREAM (block) != stream)
        continue;
      if (frame == NULL)
        return i;
      switch (PyObject_RichCompareBool (PyTuple_GET_ITEM (block, 1), frame,
                                        Py_EQ))
        {
        case 1:
          return i;
        case 0:
          break;
        default:
          PyErr_Clear ();
        }
    }
  return -1;
}

/* Finds STREAM's block and removes it: in this thread's STACK (may be
   None) first, then in every other thread's; the block opened in FRAME
   before any other of STREAM's.  Whether one was found.  */
static bool
remove_block (PyObject *stack, PyObject *stream, PyObject *frame)
{
  for (int pass = 0; pass < 2; pass++)
    {
      PyObject *exact = pass == 0 ? frame : NULL;
      Py_ssize_t i;

      if (stack != Py_None && (i = find_block (stack, stream, exact)) >= 0)
        return PyList_SetSlice (stack, i, i + 1, NULL) == 0;
      for (Py_ssize_t k = 0; all_stacks != NULL
                             && k < PyList_GET_SIZE (all_stacks); k++)
        {
          PyObject *other = PyList_GET_ITEM (all_stacks, k);
          if (other == stack)
            continue;
          if ((i = find_block (other, stream, exact)) >= 0)
            return PyList_SetSlice (other, i, i + 1, NULL) == 0;
        }
    }
  return false;
}

int
gmpy_stream_context_pop (PyObject *stream)
{
  PyObject *stack = context_stack (((streampy_object *) stream)->device,
                                   false);
  PyObject *frame;
  bool found;

  if (stack == NULL)
    return -1;
  frame = calling_frame ();
  if (frame == NULL)
    {
      Py_DECREF (stack);
      return -1;
    }
  found = remove_block (stack, stream, frame);
  Py_DECREF (frame);
  Py_DECREF (stack);
  if (PyErr_Occurred ())
    return -1;
  if (!found)
    {
      PyErr_SetString (PyExc_RuntimeError, "this stream has no open with "
                       "block to end");
      return -1;
    }
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
