/* py-mem-history.c -- the memory history in Python: the stack hooks
   the core calls (memory.c names no Python), memory_history,
   memory_snapshot, dump_snapshot (PyTorch's snapshot format) and
   memory_report, and what the program asks for at exit (the HTML
   report, the leak report).  */

#include "gm-python.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* The core's capture hook: the calling thread's Python stack, innermost
   first, as code objects and instruction offsets (lines are looked up
   only when a stack is shown).  Nothing without the GIL.  */
static int
hook_capture (gm_mem_frame *frames)
{
  PyFrameObject *frame;
  int n = 0;

  if (!PyGILState_Check ())
    return 0;
  frame = PyEval_GetFrame ();
  if (frame == NULL)
    return 0;
  Py_INCREF ((PyObject *) frame);
  while (frame != NULL && n < GM_MEM_STACK_DEPTH)
    {
      PyCodeObject *code = PyFrame_GetCode (frame);
      PyFrameObject *back = PyFrame_GetBack (frame);
      /* The frame keeps its code alive until the core, under its lock,
         interns the stack and retain takes a reference of its own.  */
      frames[n].code = code;
      frames[n].offset = PyFrame_GetLasti (frame);
      n++;
      Py_DECREF (code);
      Py_DECREF (frame);
      frame = back;
    }
  Py_XDECREF ((PyObject *) frame);
  return n;
}

static void
hook_retain (const gm_mem_frame *frames, size_t n)
{
  for (size_t i = 0; i < n; i++)
    Py_INCREF ((PyObject *) frames[i].code);
}

static void
hook_release (const gm_mem_frame *frames, size_t n)
{
  for (size_t i = 0; i < n; i++)
    Py_DECREF ((PyObject *) frames[i].code);
}

/* FRAME's file, line and function as new references; 0 or -1.  */
static int
frame_parts (const gm_mem_frame *frame, PyObject **filename, int *line,
             PyObject **name)
{
  PyCodeObject *code = (PyCodeObject *) frame->code;

  *filename = PyObject_GetAttrString ((PyObject *) code, "co_filename");
  *name = PyObject_GetAttrString ((PyObject *) code, "co_qualname");
  *line = PyCode_Addr2Line (code, frame->offset);
  if (*filename == NULL || *name == NULL)
    {
      Py_CLEAR (*filename);
      Py_CLEAR (*name);
      return -1;
    }
  return 0;
}

static bool
hook_describe (const gm_mem_frame *frame, char *buf, size_t size)
{
  PyObject *filename, *name;
  const char *file_text, *name_text;
  int line;

  if (!PyGILState_Check ())
    return false;
  if (frame_parts (frame, &filename, &line, &name) < 0)
    {
      PyErr_Clear ();
      return false;
    }
  file_text = PyUnicode_AsUTF8 (filename);
  name_text = PyUnicode_AsUTF8 (name);
  if (file_text != NULL && name_text != NULL)
    snprintf (buf, size, "%s:%d in %s", file_text, line, name_text);
  else
    PyErr_Clear ();
  Py_DECREF (filename);
  Py_DECREF (name);
  return file_text != NULL && name_text != NULL;
}

static const gm_mem_stack_hooks python_hooks = {
  hook_capture, hook_retain, hook_release, hook_describe
};

static PyObject *
gmpy_memory_history (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"enabled", "stacks", "max_entries", NULL};
  int enabled = 1;
  PyObject *stacks_obj = NULL;
  Py_ssize_t max_entries = GM_MEM_HISTORY_DEFAULT_ENTRIES;
  bool stacks = true;
  gm_status status;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|pOn:memory_history",
                                    keywords, &enabled, &stacks_obj,
                                    &max_entries))
    return NULL;
  if (stacks_obj == NULL)
    stacks = true;
  else if (stacks_obj == Py_None)
    stacks = false;
  else if (PyUnicode_Check (stacks_obj)
           && PyUnicode_CompareWithASCIIString (stacks_obj, "python") == 0)
    stacks = true;
  else if (PyUnicode_Check (stacks_obj)
           && PyUnicode_CompareWithASCIIString (stacks_obj, "none") == 0)
    stacks = false;
  else
    {
      PyErr_Format (PyExc_ValueError, "memory_history: stacks must be "
                    "'python', 'none' or None, not %R", stacks_obj);
      return NULL;
    }
  if (max_entries < 1 || (size_t) max_entries > GM_MEM_HISTORY_MAX_ENTRIES)
    {
      PyErr_Format (PyExc_ValueError, "memory_history: max_entries must be "
                    "from 1 to %zu, not %zd", GM_MEM_HISTORY_MAX_ENTRIES,
                    max_entries);
      return NULL;
    }
  if (!enabled)
    {
      gm_mem_history_stop ();
      Py_RETURN_NONE;
    }
  status = gm_mem_history_start ((size_t) max_entries, stacks);
  if (status != GM_OK)
    return gmpy_raise (status);
  Py_RETURN_NONE;
}

/* A numpy.dtype whose fields are NAMES (N) of FORMATS at OFFSETS in a
   C struct of ITEMSIZE bytes.  New reference or NULL.  */
static PyObject *
struct_dtype (const char *const *names, const char *const *formats,
              const size_t *offsets, size_t n, size_t itemsize)
{
  PyObject *spec = NULL, *dtype = NULL;
  PyObject *name_list = PyList_New ((Py_ssize_t) n);
  PyObject *format_list = PyList_New ((Py_ssize_t) n);
  PyObject *offset_list = PyList_New ((Py_ssize_t) n);

  if (name_list == NULL || format_list == NULL || offset_list == NULL)
    goto done;
  for (size_t i = 0; i < n; i++)
    {
      PyObject *name = PyUnicode_FromString (names[i]);
      PyObject *format = PyUnicode_FromString (formats[i]);
      PyObject *offset = PyLong_FromSize_t (offsets[i]);
      if (name == NULL || format == NULL || offset == NULL)
        {
          Py_XDECREF (name);
          Py_XDECREF (format);
          Py_XDECREF (offset);
          goto done;
        }
      PyList_SET_ITEM (name_list, (Py_ssize_t) i, name);
      PyList_SET_ITEM (format_list, (Py_ssize_t) i, format);
      PyList_SET_ITEM (offset_list, (Py_ssize_t) i, offset);
    }
  spec = Py_BuildValue ("{s:O,s:O,s:O,s:n}", "names", name_list, "formats",
                        format_list, "offsets", offset_list, "itemsize",
                        (Py_ssize_t) itemsize);
  if (spec != NULL)
    dtype = PyObject_CallMethod (gmpy_state_get ()->numpy, "dtype", "O",
                                 spec);
done:
  Py_XDECREF (name_list);
  Py_XDECREF (format_list);
  Py_XDECREF (offset_list);
  Py_XDECREF (spec);
  return dtype;
}

#define FIELD(type, field) offsetof (type, field)

/* N records of ITEMSIZE at DATA as a writable NumPy structured array of
   DTYPE.  New reference or NULL.  */
static PyObject *
records_array (const void *data, size_t n, size_t itemsize, PyObject *dtype)
{
  PyObject *bytes, *array;

  if (dtype == NULL)
    return NULL;
  bytes = PyByteArray_FromStringAndSize (data, (Py_ssize_t) (n * itemsize));
  if (bytes == NULL)
    return NULL;
  array = PyObject_CallMethod (gmpy_state_get ()->numpy, "frombuffer", "OO",
                               bytes, dtype);
  Py_DECREF (bytes);
  return array;
}

static PyObject *
blocks_array (const gm_mem_history_copy *copy)
{
  static const char *const names[] = {"address", "size", "device", "stream",
                                      "owner", "stack", "time_ns"};
  static const char *const formats[] = {"u8", "u8", "i4", "u8", "u1", "i4",
                                        "u8"};
  const size_t offsets[] = {
    FIELD (gm_mem_block, address), FIELD (gm_mem_block, size),
    FIELD (gm_mem_block, device), FIELD (gm_mem_block, stream),
    FIELD (gm_mem_block, owner), FIELD (gm_mem_block, stack),
    FIELD (gm_mem_block, time_ns)
  };
  PyObject *dtype = struct_dtype (names, formats, offsets, 7,
                                  sizeof (gm_mem_block));
  PyObject *array = records_array (copy->blocks, copy->nblocks,
                                   sizeof (gm_mem_block), dtype);

  Py_XDECREF (dtype);
  return array;
}

static PyObject *
events_array (const gm_mem_history_copy *copy)
{
  static const char *const names[] = {"time_ns", "action", "address", "size",
                                      "stream", "device", "owner", "stack",
                                      "allocated_bytes", "reserved_bytes"};
  static const char *const formats[] = {"u8", "u1", "u8", "u8", "u8", "i4",
                                        "u1", "i4", "u8", "u8"};
  const size_t offsets[] = {
    FIELD (gm_mem_event, time_ns), FIELD (gm_mem_event, action),
    FIELD (gm_mem_event, address), FIELD (gm_mem_event, size),
    FIELD (gm_mem_event, stream), FIELD (gm_mem_event, device),
    FIELD (gm_mem_event, owner), FIELD (gm_mem_event, stack),
    FIELD (gm_mem_event, allocated_bytes),
    FIELD (gm_mem_event, reserved_bytes)
  };
  PyObject *dtype = struct_dtype (names, formats, offsets, 10,
                                  sizeof (gm_mem_event));
  PyObject *array = records_array (copy->events, copy->nevents,
                                   sizeof (gm_mem_event), dtype);

  Py_XDECREF (dtype);
  return array;
}

/* Stack STACK of COPY as a list of (filename, line, name), innermost
   first.  New reference or NULL.  */
static PyObject *
stack_list (const gm_mem_history_copy *copy, size_t stack)
{
  size_t start = copy->stack_start[stack], end = copy->stack_start[stack + 1];
  PyObject *list = PyList_New ((Py_ssize_t) (end - start));

  for (size_t f = start; list != NULL && f < end; f++)
    {
      PyObject *filename, *name, *entry;
      int line;
      if (frame_parts (&copy->frames[f], &filename, &line, &name) < 0)
        {
          Py_CLEAR (list);
          break;
        }
      entry = Py_BuildValue ("(NiN)", filename, line, name);
      if (entry == NULL)
        Py_CLEAR (list);
      else
        PyList_SET_ITEM (list, (Py_ssize_t) (f - start), entry);
    }
  return list;
}

static PyObject *
stacks_list (const gm_mem_history_copy *copy)
{
  PyObject *list = PyList_New ((Py_ssize_t) copy->nstacks);

  for (size_t s = 0; list != NULL && s < copy->nstacks; s++)
    {
      PyObject *stack = stack_list (copy, s);
      if (stack == NULL)
        Py_CLEAR (list);
      else
        PyList_SET_ITEM (list, (Py_ssize_t) s, stack);
    }
  return list;
}

/* The names of gm_mem_owner (or of the actions) as a tuple.  */
static PyObject *
names_tuple (const char *const *names, int n)
{
  PyObject *tuple = PyTuple_New (n);

  for (int i = 0; tuple != NULL && i < n; i++)
    {
      PyObject *name = PyUnicode_FromString (names[i]);
      if (name == NULL)
        Py_CLEAR (tuple);
      else
        PyTuple_SET_ITEM (tuple, i, name);
    }
  return tuple;
}

static PyObject *
gmpy_memory_snapshot (PyObject *module, PyObject *unused)
{
  gm_mem_history_copy copy;
  gm_status status = gm_mem_history_get (&copy);
  PyObject *result;

  if (status != GM_OK)
    return gmpy_raise (status);
  result = Py_BuildValue ("{s:O,s:n,s:n,s:O,s:N,s:N,s:N,s:N,s:N}",
                          "enabled", gm_mem_history_on () ? Py_True
                                                          : Py_False,
                          "max_entries", (Py_ssize_t) copy.max_entries,
                          "dropped", (Py_ssize_t) copy.dropped,
                          "stacks_on", copy.stacks_on ? Py_True : Py_False,
                          "owners", names_tuple (gm_mem_owner_names,
                                                 GM_MEM_NOWNERS),
                          "actions", names_tuple (gm_mem_action_names,
                                                  GM_MEM_NACTIONS),
                          "blocks", blocks_array (&copy),
                          "events", events_array (&copy),
                          "stacks", stacks_list (&copy));
  gm_mem_history_copy_free (&copy);
  return result;
}

/* Stack STACK of COPY as PyTorch's frames: a list of {"filename",
   "line", "name"}, innermost first; [] for -1.  New reference or
   NULL.  */
static PyObject *
torch_frames (const gm_mem_history_copy *copy, int32_t stack)
{
  PyObject *frames, *list;

  if (stack < 0 || (size_t) stack >= copy->nstacks)
    return PyList_New (0);
  frames = stack_list (copy, (size_t) stack);
  if (frames == NULL)
    return NULL;
  list = PyList_New (PyList_GET_SIZE (frames));
  for (Py_ssize_t i = 0; list != NULL && i < PyList_GET_SIZE (frames); i++)
    {
      PyObject *f = PyList_GET_ITEM (frames, i);
      PyObject *entry = Py_BuildValue ("{s:O,s:O,s:O}", "filename",
                                       PyTuple_GET_ITEM (f, 0), "line",
                                       PyTuple_GET_ITEM (f, 1), "name",
                                       PyTuple_GET_ITEM (f, 2));
      if (entry == NULL)
        Py_CLEAR (list);
      else
        PyList_SET_ITEM (list, i, entry);
    }
  Py_DECREF (frames);
  return list;
}

/* One segment of PyTorch's snapshot for live BLOCK: gpumem's pool does
   not show its segments, so each live block is a segment of its own.  */
static PyObject *
torch_segment (const gm_mem_history_copy *copy, const gm_mem_block *block)
{
  PyObject *frames = torch_frames (copy, block->stack);
  PyObject *inner;

  if (frames == NULL)
    return NULL;
  inner = Py_BuildValue ("[{s:K,s:K,s:s,s:K,s:N}]", "size",
                         (unsigned long long) block->size, "requested_size",
                         (unsigned long long) block->size, "state",
                         "active_allocated", "address",
                         (unsigned long long) block->address, "frames",
                         frames);
  if (inner == NULL)
    return NULL;
  return Py_BuildValue ("{s:i,s:K,s:K,s:K,s:K,s:K,s:K,s:s,s:(ii),s:O,"
                        "s:[],s:N}",
                        "device", block->device,
                        "address", (unsigned long long) block->address,
                        "total_size", (unsigned long long) block->size,
                        "allocated_size", (unsigned long long) block->size,
                        "active_size", (unsigned long long) block->size,
                        "requested_size", (unsigned long long) block->size,
                        "stream", (unsigned long long) block->stream,
                        "segment_type",
                        block->size >= ((size_t) 1 << 20) ? "large"
                                                          : "small",
                        "segment_pool_id", 0, 0,
                        "is_expandable", Py_False,
                        "frames", "blocks", inner);
}

/* Appends to TRACE PyTorch's trace entry ACTION for EVENT.  0 or -1.  */
static int
torch_trace_entry (PyObject *trace, const char *action,
                   const gm_mem_event *event, PyObject *frames)
{
  PyObject *entry = Py_BuildValue (
    "{s:s,s:K,s:K,s:K,s:K,s:O,s:s}", "action", action,
    "addr", (unsigned long long) event->address,
    "size", (unsigned long long) event->size,
    "stream", (unsigned long long) event->stream,
    "time_us", (unsigned long long) (event->time_ns / 1000),
    "frames", frames, "owner", gm_mem_owner_names[event->owner]);
  int rc;

  if (entry == NULL)
    return -1;
  rc = PyList_Append (trace, entry);
  Py_DECREF (entry);
  return rc;
}

/* COPY in PyTorch's snapshot format: {"segments": [...],
   "device_traces": [[...] per device]}.  A free whose allocation the
   ring no longer holds is left out, as PyTorch's viewer expects each
   free to follow its allocation.  New reference or NULL.  */
static PyObject *
torch_snapshot (const gm_mem_history_copy *copy)
{
  int ndevices = gm_backend_current->device_count ();
  PyObject *segments = PyList_New (0), *traces = PyList_New (0);
  PyObject *seen = PySet_New (NULL), *result = NULL;

  if (segments == NULL || traces == NULL || seen == NULL)
    goto done;
  for (size_t i = 0; i < copy->nblocks; i++)
    {
      PyObject *segment = torch_segment (copy, &copy->blocks[i]);
      if (segment == NULL || PyList_Append (segments, segment) < 0)
        {
          Py_XDECREF (segment);
          goto done;
        }
      Py_DECREF (segment);
    }
  for (int d = 0; d < ndevices; d++)
    {
      PyObject *trace = PyList_New (0);
      if (trace == NULL || PyList_Append (traces, trace) < 0)
        {
          Py_XDECREF (trace);
          goto done;
        }
      Py_DECREF (trace);
    }
  for (size_t i = 0; i < copy->nevents; i++)
    {
      const gm_mem_event *event = &copy->events[i];
      PyObject *trace, *frames, *key;
      int known = 0, rc = 0;
      bool made;
      if (event->device < 0 || event->device >= ndevices)
        continue;
      trace = PyList_GET_ITEM (traces, event->device);
      key = PyLong_FromUnsignedLongLong (event->address);
      if (key == NULL)
        goto done;
      /* A return comes to PyTorch's tools as an allocation, a spill as
         a free: their format has no word for either.  */
      made = event->action == GM_MEM_ACTION_ALLOC
             || event->action == GM_MEM_ACTION_RETURN;
      if (made)
        rc = PySet_Add (seen, key);
      else
        {
          known = PySet_Contains (seen, key);
          if (known == 1)
            rc = PySet_Discard (seen, key) < 0 ? -1 : 0;
        }
      Py_DECREF (key);
      if (rc < 0 || known < 0)
        goto done;
      if (!made && !known)
        continue;
      frames = torch_frames (copy, event->stack);
      if (frames == NULL)
        goto done;
      if (made)
        rc = torch_trace_entry (trace, "alloc", event, frames);
      else
        rc = torch_trace_entry (trace, "free_requested", event, frames) < 0
             || torch_trace_entry (trace, "free_completed", event,
                                   frames) < 0 ? -1 : 0;
      Py_DECREF (frames);
      if (rc < 0)
        goto done;
    }
  result = Py_BuildValue ("{s:O,s:O,s:{s:s}}", "segments", segments,
                          "device_traces", traces, "allocator_settings",
                          "allocator", "gpumem");
done:
  Py_XDECREF (segments);
  Py_XDECREF (traces);
  Py_XDECREF (seen);
  return result;
}

/* Raises OSError (ERRNUM, "FUNCTION: WHY", PATH).  NULL.  */
static PyObject *
raise_output_error (const char *function, int errnum, const char *why,
                    PyObject *path)
{
  PyObject *args = Py_BuildValue ("(iNO)", errnum,
                                  PyUnicode_FromFormat ("%s: %s", function,
                                                        why), path);

  if (args != NULL)
    PyErr_SetObject (PyExc_OSError, args);
  Py_XDECREF (args);
  return NULL;
}

/* The file FS_PATH (PATH's file-system spelling) created or emptied by
   gm_output_create and opened as a stream, or NULL with OSError set,
   naming FUNCTION and PATH.  */
static FILE *
output_open (const char *function, PyObject *path, const char *fs_path)
{
  const char *why;
  FILE *out;
  int fd = gm_output_create (fs_path, &why);

  if (fd < 0)
    {
      raise_output_error (function, errno, why, path);
      return NULL;
    }
  out = fdopen (fd, "w");
  if (out == NULL)
    {
      int saved = errno;
      close (fd);
      raise_output_error (function, saved, strerror (saved), path);
    }
  return out;
}

/* Closes OUT, which FUNCTION wrote to PATH: 0, or -1 with OSError set
   where a write or the close failed.  */
static int
output_close (const char *function, FILE *out, PyObject *path)
{
  bool failed = ferror (out) != 0;
  int saved;

  errno = 0;
  if (fclose (out) != 0)
    failed = true;
  if (!failed)
    return 0;
  saved = errno ? errno : EIO;
  raise_output_error (function, saved, strerror (saved), path);
  return -1;
}

static PyObject *
gmpy_dump_snapshot (PyObject *module, PyObject *path)
{
  gm_mem_history_copy copy;
  gm_status status;
  PyObject *path_bytes, *snapshot, *pickle, *data = NULL;
  FILE *out = NULL;

  /* A str, bytes or os.PathLike alone: an int or a bool is no file name
     (open would take it for a descriptor and close it).  */
  if (!PyUnicode_FSConverter (path, &path_bytes))
    return NULL;
  status = gm_mem_history_get (&copy);
  if (status != GM_OK)
    {
      Py_DECREF (path_bytes);
      return gmpy_raise (status);
    }
  snapshot = torch_snapshot (&copy);
  gm_mem_history_copy_free (&copy);
  if (snapshot != NULL)
    {
      pickle = PyImport_ImportModule ("pickle");
      if (pickle != NULL)
        data = PyObject_CallMethod (pickle, "dumps", "O", snapshot);
      Py_XDECREF (pickle);
      Py_DECREF (snapshot);
    }
  if (data != NULL)
    out = output_open ("dump_snapshot", path, PyBytes_AS_STRING (path_bytes));
  Py_DECREF (path_bytes);
  if (out == NULL)
    {
      Py_XDECREF (data);
      return NULL;
    }
  fwrite (PyBytes_AS_STRING (data), 1, (size_t) PyBytes_GET_SIZE (data),
          out);
  Py_DECREF (data);
  if (output_close ("dump_snapshot", out, path) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *
gmpy_memory_report (PyObject *module, PyObject *path)
{
  PyObject *path_bytes;
  gm_status status;
  FILE *out;

  if (!PyUnicode_FSConverter (path, &path_bytes))
    return NULL;
  out = output_open ("memory_report", path, PyBytes_AS_STRING (path_bytes));
  Py_DECREF (path_bytes);
  if (out == NULL)
    return NULL;
  status = gm_mem_report_to (out);
  if (status != GM_OK)
    {
      fclose (out);
      return gmpy_raise (status);
    }
  if (output_close ("memory_report", out, path) < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* Run by atexit as the interpreter ends, while the script's arrays
   still live: the program's --memory-report page and leak report.  */
static PyObject *
gmpy_memory_at_exit (PyObject *module, PyObject *unused)
{
  const char *path = gm_mem_exit_report_path ();

  if (gm_mem_exit_leaks ())
    gm_mem_print_leaks (stderr);
  if (path != NULL && gm_mem_report_write (path) != GM_OK)
    fprintf (stderr, "gpumem: --memory-report: %s\n",
             gm_last_error ()->message);
  Py_RETURN_NONE;
}

static PyMethodDef at_exit_def = {
  "_memory_at_exit", gmpy_memory_at_exit, METH_NOARGS, NULL
};

static PyMethodDef gmpy_mem_history_methods[] = {
  {"memory_history", (PyCFunction) (void (*) (void)) gmpy_memory_history,
   METH_VARARGS | METH_KEYWORDS,
   "memory_history(enabled=True, stacks='python', max_entries=100000)\n--\n\n"
   "Start (afresh) or stop (and forget) the memory history: every\n"
   "allocation and free with time, device, stream, size, address, owner\n"
   "and, with stacks='python', the Python stack of the call; the last\n"
   "MAX_ENTRIES (1 to 2**30) events are kept.  docs/memory-tools.md."},
  {"memory_snapshot", gmpy_memory_snapshot, METH_NOARGS,
   "memory_snapshot()\n--\n\n"
   "The history's live blocks and events: a dict of 'blocks' and\n"
   "'events' (NumPy structured arrays), 'stacks' (lists of (filename,\n"
   "line, function)), 'owners', 'actions', 'enabled', 'stacks_on',\n"
   "'max_entries', 'dropped'.  docs/memory-tools.md gives the fields."},
  {"dump_snapshot", gmpy_dump_snapshot, METH_O,
   "dump_snapshot(path, /)\n--\n\n"
   "Write the history as a pickle in PyTorch's memory snapshot format,\n"
   "for torch.cuda._memory_viz and pytorch.org/memory_viz.  PATH (str,\n"
   "bytes, os.PathLike) is opened as memory_report opens it."},
  {"memory_report", gmpy_memory_report, METH_O,
   "memory_report(path, /)\n--\n\n"
   "Write a self-contained HTML page: each device's allocated and\n"
   "reserved bytes over time, the peak, the largest live blocks and\n"
   "the lines that made them.  OSError when PATH is a symbolic link,\n"
   "not a regular file (a FIFO, a device), another user's file or one\n"
   "with other hard links (none is written through), or cannot be\n"
   "written.  docs/security.md."},
  {NULL, NULL, 0, NULL}
};

int
gmpy_mem_history_init (PyObject *module)
{
  gm_mem_set_stack_hooks (&python_hooks);
  if (PyModule_AddFunctions (module, gmpy_mem_history_methods) < 0)
    return -1;
  if (gm_mem_history_from_env () != GM_OK)
    {
      gmpy_raise (GM_ERR_VALUE);
      return -1;
    }
  if (gm_mem_exit_report_path () != NULL || gm_mem_exit_leaks ())
    {
      PyObject *atexit = PyImport_ImportModule ("atexit");
      PyObject *handler = PyCFunction_New (&at_exit_def, NULL), *rc = NULL;
      if (atexit != NULL && handler != NULL)
        rc = PyObject_CallMethod (atexit, "register", "O", handler);
      Py_XDECREF (atexit);
      Py_XDECREF (handler);
      if (rc == NULL)
        return -1;
      Py_DECREF (rc);
    }
  return 0;
}
