/* py-kernels.c -- gpumem.kernels: one checked Python function per entry
   of the kernel registry (kernels/kernels.def).

   Each call is checked whole against the kernel's declared signature
   before anything is launched: every pointer argument is device memory
   of the declared dtype, all on one device, outputs writable, and at
   least as long as the declared minimum-length expression says; every
   scalar fits its type.  A mismatch raises TypeError or ValueError
   naming the parameter.  */

#include "gm-python.h"
#include "plugin.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>



/* Per kernel: its Python method definition, argument names (the
   parameters, then grid, block, stream) and docstring, made once and
   kept until the process ends: the interpreter may keep the functions
   made from them until it ends, and an embedding program may start
   more than one interpreter.  */
typedef struct kernel_entry
{
  PyMethodDef def;
  const gm_kernel *kernel;
  const char *names[GM_MAX_KERNEL_PARAMS + 4];
  char *doc;
  char *signature;
  struct kernel_entry *next;
} kernel_entry;

static kernel_entry *entries;

/* A namespace of kernels (gpumem.kernels, or what load_kernels returns)
   is a module whose state lists its entries, for list ().  */
typedef struct namespace_state
{
  kernel_entry **entries;
  int count;
} namespace_state;

static void
namespace_free (void *module)
{
  namespace_state *state = PyModule_GetState ((PyObject *) module);

  if (state != NULL)
    {
      PyMem_Free (state->entries);
      state->entries = NULL;
      state->count = 0;
    }
}

/* Converts scalar OBJ to PARAM's type into *ARG.  */
static int
scalar_arg (const gm_kernel *kernel, const gm_kernel_param *param,
            PyObject *obj, gm_arg *arg)
{
  gm_dtype dtype = param->dtype;

  if (gm_dtypes[dtype].kind == 'f')
    {
      double value;
      if (!PyFloat_Check (obj) && !PyLong_Check (obj) && !PyIndex_Check (obj)
          && !PyObject_HasAttrString (obj, "__float__"))
        goto wrong_type;
      value = PyFloat_AsDouble (obj);
      if (value == -1.0 && PyErr_Occurred ())
        return -1;
      if (dtype == GM_FLOAT32)
        arg->f32 = (float) value;
      else
        arg->f64 = value;
      return 0;
    }
  if (!PyIndex_Check (obj))
    goto wrong_type;
  {
    PyObject *index = PyNumber_Index (obj);
    int overflow = 0;
    long long value;
    unsigned long long uvalue = 0;
    bool in_range;

    if (index == NULL)
      return -1;
    value = PyLong_AsLongLongAndOverflow (index, &overflow);
    if (overflow > 0 && dtype == GM_UINT64)
      {
        uvalue = PyLong_AsUnsignedLongLong (index);
        if (PyErr_Occurred ())
          {
            PyErr_Clear ();
            overflow = 1;
            uvalue = 0;
          }
        else
          overflow = 0;
      }
    Py_DECREF (index);
    if (value == -1 && PyErr_Occurred ())
      return -1;
    switch (dtype)
      {
      case GM_INT8: in_range = value >= INT8_MIN && value <= INT8_MAX;
        arg->i8 = (int8_t) value; break;
      case GM_INT16: in_range = value >= INT16_MIN && value <= INT16_MAX;
        arg->i16 = (int16_t) value; break;
      case GM_INT32: in_range = value >= INT32_MIN && value <= INT32_MAX;
        arg->i32 = (int32_t) value; break;
      case GM_INT64: in_range = true; arg->i64 = value; break;
      case GM_UINT8: in_range = value >= 0 && value <= UINT8_MAX;
        arg->u8 = (uint8_t) value; break;
      case GM_UINT16: in_range = value >= 0 && value <= UINT16_MAX;
        arg->u16 = (uint16_t) value; break;
      case GM_UINT32: in_range = value >= 0 && value <= (long long) UINT32_MAX;
        arg->u32 = (uint32_t) value; break;
      case GM_UINT64:
        in_range = uvalue != 0 || value >= 0;
        arg->u64 = uvalue != 0 ? uvalue : (unsigned long long) value;
        break;
      default: in_range = false; break;
      }
    if (overflow || !in_range)
      {
        PyErr_Format (PyExc_ValueError, "%s: parameter '%s' is out of range "
                      "for %s", kernel->name, param->name,
                      gm_dtypes[dtype].name);
        return -1;
      }
    return 0;
  }
wrong_type:
  PyErr_Format (PyExc_TypeError, "%s: parameter '%s' must be %s %s, not "
                "%.100s", kernel->name, param->name,
                gm_dtypes[dtype].kind == 'f' ? "a number for" : "an integer for",
                gm_dtypes[dtype].name, GMPY_TYPE_NAME (Py_TYPE (obj)));
  return -1;
}

/* Reads a grid= or block= argument (an int or 1 to 3 ints, each >= 1
   and at most LIMIT[i]) into DIMS.  */
static int
dims_arg (const char *kernel, const char *what, PyObject *obj,
          const int limit[3], unsigned int dims[3])
{
  PyObject *seq;
  Py_ssize_t n;

  dims[0] = dims[1] = dims[2] = 1;
  seq = PyLong_Check (obj) ? PyTuple_Pack (1, obj)
                           : PySequence_Fast (obj, "");
  if (seq == NULL || (n = PySequence_Fast_GET_SIZE (seq)) < 1 || n > 3)
    {
      Py_XDECREF (seq);
      PyErr_Clear ();
      PyErr_Format (PyExc_TypeError, "%s: %s must be an int or a tuple of 1 "
                    "to 3 ints", kernel, what);
      return -1;
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      PyObject *item = PySequence_Fast_GET_ITEM (seq, i);
      long value;
      if (!PyLong_Check (item))
        {
          Py_DECREF (seq);
          PyErr_Format (PyExc_TypeError, "%s: %s entries must be ints, not "
                        "%.100s", kernel, what,
                        GMPY_TYPE_NAME (Py_TYPE (item)));
          return -1;
        }
      value = PyLong_AsLong (item);
      if (value == -1 && PyErr_Occurred ())
        PyErr_Clear ();
      if (value < 1 || value > limit[i])
        {
          Py_DECREF (seq);
          PyErr_Format (PyExc_ValueError, "%s: %s[%zd] must be from 1 to %d",
                        kernel, what, i, limit[i]);
          return -1;
        }
      dims[i] = (unsigned int) value;
    }
  Py_DECREF (seq);
  return 0;
}

/* Each kernel function is bound to a small module object whose state is
   the kernel's index in the registry: a module, so that pydoc shows the
   function as a plain function of gpumem.kernels (not as a method of
   some object), and module state, so the call finds its kernel without
   a lookup.  */
static PyModuleDef kernel_binding_def = {
  PyModuleDef_HEAD_INIT,
  .m_name = "gpumem.kernels",
  .m_size = sizeof (kernel_entry *),
};

static PyObject *
kernelpy_call (PyObject *self, PyObject *const *args, Py_ssize_t nargs,
               PyObject *kwnames)
{
  const kernel_entry *entry = *(kernel_entry **) PyModule_GetState (self);
  const gm_kernel *kernel = entry->kernel;
  PyObject *arg[GM_MAX_KERNEL_PARAMS + 3];
  gm_arg cargs[GM_MAX_KERNEL_PARAMS];
  Py_ssize_t sizes[GM_MAX_KERNEL_PARAMS];
  PyObject *held[GM_MAX_KERNEL_PARAMS];
  gm_launch_cfg cfg = {{0, 0, 0}, {0, 0, 0}, 0, 0};
  const char *first_pointer = NULL;
  PyObject *grid, *block, *stream_obj;
  gmpy_dispatch d;
  gm_stream *stream;
  gm_status status;
  int device = -1, n = kernel->nparams, waited = 0;
  /* Devices other than the launch's whose arrays the kernel uses.  */
  int peers[GM_MAX_KERNEL_PARAMS];
  int npeers = 0;
  bool queued_in_block = false;

  if (gmpy_parse_args (args, nargs, kwnames, kernel->name, entry->names, n,
                       n, arg) < 0
      || gmpy_array_prepare (arg, n) < 0)
    return NULL;
  grid = arg[n];
  block = arg[n + 1];
  stream_obj = arg[n + 2];

  for (int i = 0; i < n; i++)
    {
      const gm_kernel_param *param = &kernel->params[i];
      gmpy_devbuf buf;
      int found;

      if (param->kind == GM_PARAM_SCALAR)
        {
          if (scalar_arg (kernel, param, arg[i], &cargs[i]) < 0)
            return NULL;
          continue;
        }
      found = param->kind == GM_PARAM_IN
              ? gmpy_devbuf_get_read (arg[i], &buf, param->name)
              : gmpy_devbuf_get (arg[i], &buf, param->name);
      if (found < 0)
        return NULL;
      if (found == 0)
        {
          PyErr_Format (PyExc_TypeError, "%s: parameter '%s' must be device "
                        "memory (a DeviceArray or an object with "
                        "__cuda_array_interface__), not %.100s", kernel->name,
                        param->name, GMPY_TYPE_NAME (Py_TYPE (arg[i])));
          return NULL;
        }
      if (buf.dtype != param->dtype)
        {
          PyErr_Format (PyExc_TypeError, "%s: parameter '%s' must hold %s "
                        "elements, not %s", kernel->name, param->name,
                        gm_dtypes[param->dtype].name,
                        gm_dtypes[buf.dtype].name);
          return NULL;
        }
      if (param->kind != GM_PARAM_IN && buf.readonly)
        {
          PyErr_Format (PyExc_ValueError, "%s: parameter '%s' is written by "
                        "the kernel but the array is read-only", kernel->name,
                        param->name);
          return NULL;
        }
      if (device < 0)
        {
          device = buf.device;
          first_pointer = param->name;
        }
      else if (buf.device != device)
        {
          /* The launch runs on the first array's device, which must be
             able to reach this one's memory.  */
          bool can = false;
          status = gm_backend_current->can_access_peer (device, buf.device,
                                                        &can);
          if (status != GM_OK)
            return gmpy_raise (status);
          if (!can)
            {
              PyErr_Format (PyExc_ValueError, "%s: parameter '%s' is on "
                            "device %d, but the kernel runs on device %d "
                            "(where '%s' is), which cannot access device "
                            "%d's memory (Device(%d).can_access_peer(%d) is "
                            "False); copy the array to device %d first",
                            kernel->name, param->name, buf.device, device,
                            first_pointer, buf.device, device, buf.device,
                            device);
              return NULL;
            }
          peers[npeers++] = buf.device;
        }
      cargs[i].ptr = buf.data;
      sizes[i] = buf.size;
    }

  /* Lengths, once every scalar is known.  */
  for (int i = 0; i < n; i++)
    {
      const gm_kernel_param *param = &kernel->params[i];
      int64_t need;

      if (param->kind == GM_PARAM_SCALAR)
        continue;
      status = gm_kernel_eval_length (kernel, param->length, cargs, &need);
      if (status != GM_OK)
        return gmpy_raise (status);
      if (need < 0)
        {
          PyErr_Format (PyExc_ValueError, "%s: parameter '%s' would need %lld "
                        "elements (%s): the scalar arguments are out of range",
                        kernel->name, param->name, (long long) need,
                        param->length);
          return NULL;
        }
      if ((int64_t) sizes[i] < need)
        {
          PyErr_Format (PyExc_ValueError, "%s: parameter '%s' needs at least "
                        "%lld elements (%s) but has %zd", kernel->name,
                        param->name, (long long) need, param->length,
                        sizes[i]);
          return NULL;
        }
    }
  if (device < 0)
    device = gmpy_current_device ();

  if ((grid != NULL && grid != Py_None) != (block != NULL && block != Py_None))
    {
      PyErr_Format (PyExc_TypeError, "%s: give grid and block together, or "
                    "neither (then the launcher chooses)", kernel->name);
      return NULL;
    }
  if (grid != NULL && grid != Py_None)
    {
      gm_device_props props;
      status = gm_backend_current->device_props (device, &props);
      if (status != GM_OK)
        return gmpy_raise (status);
      if (dims_arg (kernel->name, "grid", grid, props.max_grid, cfg.grid) < 0
          || dims_arg (kernel->name, "block", block, props.max_block,
                       cfg.block) < 0)
        return NULL;
      if ((long) cfg.block[0] * cfg.block[1] * cfg.block[2]
          > props.max_threads_per_block)
        {
          PyErr_Format (PyExc_ValueError, "%s: a block of %u x %u x %u "
                        "threads is more than the device's %d",
                        kernel->name, cfg.block[0], cfg.block[1], cfg.block[2],
                        props.max_threads_per_block);
          return NULL;
        }
    }
  if (gmpy_dispatch_get (stream_obj, device, &d) < 0)
    return NULL;
  stream = d.stream;
  /* A recorded launch goes on the recording's stream of its device,
     which holds its arrays.  A launch queued in a gpumem.concurrent()
     block goes on the block's stream of its device, after the block's
     work on the devices of its other arrays (or, where streams cannot
     be ordered so, it waits for that work and is complete on
     return).  */
  if (d.mode == GMPY_GRAPH)
    {
      PyObject *arrays[GM_MAX_KERNEL_PARAMS];
      gm_graph_access access[GM_MAX_KERNEL_PARAMS];
      size_t naccess = 0;

      if (gmpy_dispatch_record (&d, "a launch") < 0)
        return NULL;
      /* The kernel touches the arrays given, at most: their extents,
         written unless the registry says the kernel only reads.  */
      for (int i = 0; i < n; i++)
        {
          const gm_kernel_param *param = &kernel->params[i];

          arrays[i] = param->kind != GM_PARAM_SCALAR ? arg[i] : NULL;
          if (param->kind == GM_PARAM_SCALAR)
            continue;
          access[naccess].ptr = cargs[i].ptr;
          access[naccess].nbytes = (size_t) sizes[i]
                                   * gm_dtypes[param->dtype].itemsize;
          access[naccess].write = param->kind != GM_PARAM_IN;
          naccess++;
        }
      if (gmpy_graph_stream (device, arrays, n, access, naccess, &stream)
          < 0)
        return NULL;
    }
  else if (d.mode == GMPY_CONCURRENT)
    {
      if (gmpy_concurrent_launch_stream (device, peers, npeers, &stream) < 0)
        return NULL;
      queued_in_block = stream != NULL;
    }
  /* Reading the scalars and grid ran Python code (__index__, __float__,
     an iterator) that may have freed an array checked above.  */
  for (int i = 0; i < n; i++)
    if (kernel->params[i].kind != GM_PARAM_SCALAR && gmpy_array_check (arg[i])
        && gmpy_array_usable_for ((arraypy_object *) arg[i],
                                  kernel->params[i].kind != GM_PARAM_IN) < 0)
      return NULL;

  /* A launch only enqueues, in microseconds: the GIL is kept, as
     releasing and taking it back would cost a tenth of the launch.  The
     wait for it releases the GIL: the arrays are held until it ends, so
     that free () from another thread leaves their memory to the kernel
     (gmpy_array_hold).  */
  for (int i = 0; i < n; i++)
    held[i] = kernel->params[i].kind != GM_PARAM_SCALAR
                ? gmpy_array_hold (arg[i]) : NULL;
  status = gm_backend_current->launch (kernel, cargs, &cfg, device, stream);
  if (status != GM_OK)
    gmpy_raise (status);
  else if (stream == NULL)
    waited = gmpy_wait (device, NULL);
  for (int i = 0; i < n; i++)
    gmpy_array_unhold (held[i]);
  if (status != GM_OK || waited < 0)
    return NULL;
  if (queued_in_block && npeers > 0
      && gmpy_concurrent_after_launch (device, peers, npeers) < 0)
    return NULL;
  /* Outputs written on a stream: the CUDA Array Interface names it.  */
  for (int i = 0; stream != NULL && i < n; i++)
    if (kernel->params[i].kind == GM_PARAM_OUT
        || kernel->params[i].kind == GM_PARAM_INOUT)
      gmpy_array_note_stream (arg[i], &d);
  Py_RETURN_NONE;
}

static PyObject *
kernels_list (PyObject *module, PyObject *unused)
{
  namespace_state *state = PyModule_GetState (module);
  PyObject *list = PyList_New (state->count);

  if (list == NULL)
    return NULL;
  for (int k = 0; k < state->count; k++)
    {
      PyObject *item = Py_BuildValue ("(ss)", state->entries[k]->kernel->name,
                                      state->entries[k]->signature);
      if (item == NULL)
        {
          Py_DECREF (list);
          return NULL;
        }
      PyList_SET_ITEM (list, k, item);
    }
  return list;
}

/* info (name): what the namespace's kernel NAME takes and has.  */
static PyObject *
kernels_info (PyObject *module, PyObject *name)
{
  namespace_state *state = PyModule_GetState (module);
  const char *text = PyUnicode_Check (name) ? PyUnicode_AsUTF8 (name) : NULL;
  static const char *const direction[] = {
    [GM_PARAM_IN] = "in", [GM_PARAM_OUT] = "out",
    [GM_PARAM_INOUT] = "inout", [GM_PARAM_SCALAR] = "scalar"
  };

  if (text == NULL)
    {
      if (!PyErr_Occurred ())
        PyErr_Format (PyExc_TypeError, "info: name must be str, not %.100s",
                      GMPY_TYPE_NAME (Py_TYPE (name)));
      return NULL;
    }
  for (int k = 0; k < state->count; k++)
    {
      const gm_kernel *kernel = state->entries[k]->kernel;
      PyObject *params, *result;

      if (strcmp (kernel->name, text) != 0)
        continue;
      params = PyList_New (kernel->nparams);
      if (params == NULL)
        return NULL;
      for (int i = 0; i < kernel->nparams; i++)
        {
          const gm_kernel_param *param = &kernel->params[i];
          PyObject *item = Py_BuildValue ("(sssz)", param->name,
                                          direction[param->kind],
                                          gm_dtypes[param->dtype].name,
                                          param->length);
          if (item == NULL)
            {
              Py_DECREF (params);
              return NULL;
            }
          PyList_SET_ITEM (params, i, item);
        }
      result = Py_BuildValue ("{s:s,s:s,s:N,s:O,s:O,s:O,s:z}",
                              "name", kernel->name, "doc", kernel->doc,
                              "params", params,
                              "cuda", kernel->launch_cuda || kernel->jit
                                      ? Py_True : Py_False,
                              "reference", kernel->run_host ? Py_True
                                                            : Py_False,
                              "jit", kernel->jit ? Py_True : Py_False,
                              "origin", kernel->origin);
      return result;
    }
  PyErr_Format (PyExc_ValueError, "info: no kernel '%s' here", text);
  return NULL;
}

static PyMethodDef namespace_methods[] = {
  {"list", kernels_list, METH_NOARGS,
   "list()\n--\n\nThe kernels as (name, signature) pairs."},
  {"info", kernels_info, METH_O,
   "info(name, /)\n--\n\n"
   "A dict describing kernel NAME: name, doc, params (a list of (name,\n"
   "direction, dtype, minimum length) with direction 'in', 'out', 'inout'\n"
   "or 'scalar' and length None for scalars), cuda (it has a CUDA\n"
   "launcher), reference (it has a C reference, which the host backend\n"
   "runs), jit, origin (None for built-in kernels, else the plugin's\n"
   "file)."},
  {NULL, NULL, 0, NULL}
};

static PyModuleDef namespace_def = {
  PyModuleDef_HEAD_INIT,
  .m_name = "gpumem.kernels",
  .m_size = sizeof (namespace_state),
  .m_methods = namespace_methods,
  .m_free = namespace_free,
};

/* Appends printf-style text to the growing string *BUF.  */
static int
append (char **buf, size_t *len, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

static int
append (char **buf, size_t *len, const char *fmt, ...)
{
  va_list ap;
  int n;
  char *grown;

  va_start (ap, fmt);
  n = vsnprintf (NULL, 0, fmt, ap);
  va_end (ap);
  grown = realloc (*buf, *len + (size_t) n + 1);
  if (grown == NULL)
    return -1;
  va_start (ap, fmt);
  vsnprintf (grown + *len, (size_t) n + 1, fmt, ap);
  va_end (ap);
  *buf = grown;
  *len += (size_t) n;
  return 0;
}

/* Fills ENTRY for KERNEL: names, signature text and docstring.  */
static int
make_entry (const gm_kernel *kernel, kernel_entry *entry)
{
  size_t doc_len = 0, sig_len = 0;
  char param[256];
  int64_t unused;
  int n = kernel->nparams, failed = 0;

  for (int i = 0; i < n; i++)
    {
      entry->names[i] = kernel->params[i].name;
      if (kernel->params[i].kind != GM_PARAM_SCALAR
          && gm_kernel_eval_length (kernel, kernel->params[i].length, NULL,
                                    &unused) != GM_OK)
        {
          PyErr_Format (PyExc_SystemError, "kernel registry: %s",
                        gm_last_error ()->message);
          return -1;
        }
    }
  entry->names[n] = "grid";
  entry->names[n + 1] = "block";
  entry->names[n + 2] = "stream";
  entry->names[n + 3] = NULL;

  failed |= append (&entry->signature, &sig_len, "%s(", kernel->name);
  for (int i = 0; i < n; i++)
    {
      gm_kernel_param_format (&kernel->params[i], param, sizeof param);
      failed |= append (&entry->signature, &sig_len, "%s%s", i ? ", " : "",
                        param);
    }
  failed |= append (&entry->signature, &sig_len, ")");

  /* The first line is the text signature inspect.signature reads; the
     typed signature follows, then the kernel's own doc line.  */
  failed |= append (&entry->doc, &doc_len, "%s(", kernel->name);
  for (int i = 0; i < n; i++)
    failed |= append (&entry->doc, &doc_len, "%s, ", kernel->params[i].name);
  failed |= append (&entry->doc, &doc_len,
                    "*, grid=None, block=None, stream=None)\n--\n\n%s\n\n"
                    "%s\n\nParameters (name: dtype[minimum length] "
                    "direction):\n", entry->signature ? entry->signature : "",
                    kernel->doc);
  for (int i = 0; i < n; i++)
    {
      gm_kernel_param_format (&kernel->params[i], param, sizeof param);
      failed |= append (&entry->doc, &doc_len, "    %s\n", param);
    }
  failed |= append (&entry->doc, &doc_len,
                    "\ngrid, block: launch shape (ints or tuples of up to 3); "
                    "by default the\nlauncher chooses from the device.  "
                    "stream: a gpumem.Stream to run in\nasynchronously; by "
                    "default the current stream (with stream:), else\n"
                    "the call returns when the kernel is done.");
  if (kernel->origin != NULL && kernel->jit == NULL)
    failed |= append (&entry->doc, &doc_len, "\n\nFrom %s.", kernel->origin);
  if (failed)
    {
      PyErr_NoMemory ();
      return -1;
    }
  entry->kernel = kernel;
  entry->def.ml_name = kernel->name;
  entry->def.ml_meth = (PyCFunction) (void (*) (void)) kernelpy_call;
  entry->def.ml_flags = METH_FASTCALL | METH_KEYWORDS;
  entry->def.ml_doc = entry->doc;
  return 0;
}

/* The entry of KERNEL, made on first use.  Borrowed, or NULL with an
   exception.  */
static kernel_entry *
entry_of (const gm_kernel *kernel)
{
  kernel_entry *entry;

  for (entry = entries; entry != NULL; entry = entry->next)
    if (entry->kernel == kernel)
      return entry;
  entry = calloc (1, sizeof *entry);
  if (entry == NULL)
    {
      PyErr_NoMemory ();
      return NULL;
    }
  if (make_entry (kernel, entry) < 0)
    {
      free (entry->doc);
      free (entry->signature);
      free (entry);
      return NULL;
    }
  entry->next = entries;
  entries = entry;
  return entry;
}

PyObject *
gmpy_kernel_function (const gm_kernel *kernel)
{
  kernel_entry *entry = entry_of (kernel);
  PyObject *binding, *fn;

  if (entry == NULL)
    return NULL;
  binding = PyModule_Create (&kernel_binding_def);
  if (binding == NULL)
    return NULL;
  *(kernel_entry **) PyModule_GetState (binding) = entry;
  fn = PyCFunction_NewEx (&entry->def, binding, NULL);
  Py_DECREF (binding);
  return fn;
}

PyObject *
gmpy_kernels_namespace (const char *name, const char *doc,
                        const gm_kernel *const *kernels, int count)
{
  PyObject *ns = PyModule_Create (&namespace_def);
  namespace_state *state;

  if (ns == NULL)
    return NULL;
  state = PyModule_GetState (ns);
  state->entries = PyMem_Calloc ((size_t) count + 1, sizeof *state->entries);
  if (state->entries == NULL)
    {
      Py_DECREF (ns);
      return PyErr_NoMemory ();
    }
  {
    PyObject *name_obj = PyUnicode_FromString (name);
    if (name_obj == NULL
        || PyObject_SetAttrString (ns, "__name__", name_obj) < 0
        || PyModule_AddStringConstant (ns, "__doc__", doc) < 0)
      {
        Py_XDECREF (name_obj);
        Py_DECREF (ns);
        return NULL;
      }
    Py_DECREF (name_obj);
  }
  for (int k = 0; k < count; k++)
    {
      PyObject *fn;
      state->entries[k] = entry_of (kernels[k]);
      if (state->entries[k] == NULL)
        {
          Py_DECREF (ns);
          return NULL;
        }
      state->count = k + 1;
      fn = gmpy_kernel_function (kernels[k]);
      if (fn == NULL || PyModule_AddObject (ns, kernels[k]->name, fn) < 0)
        {
          Py_XDECREF (fn);
          Py_DECREF (ns);
          return NULL;
        }
    }
  return ns;
}

int
gmpy_kernels_init (PyObject *module, gmpy_state *state)
{
  int count = gm_kernels_count ();
  const gm_kernel **all = PyMem_Calloc ((size_t) count + 1, sizeof *all);
  PyObject *kernels, *modules;

  if (all == NULL)
    {
      PyErr_NoMemory ();
      return -1;
    }
  for (int k = 0; k < count; k++)
    all[k] = gm_kernels_get (k);
  kernels = gmpy_kernels_namespace ("gpumem.kernels",
                                    "The native kernels built into gpumem, "
                                    "one function each (kernels/kernels.def), "
                                    "and those of the plugins preloaded by "
                                    "--kernels or GPUMEM_KERNELS.",
                                    (const gm_kernel *const *) all, count);
  PyMem_Free (all);
  if (kernels == NULL)
    return -1;
  state->kernels = kernels;
  if (PyModule_AddObjectRef (module, "kernels", kernels) < 0)
    return -1;
  /* `import gpumem.kernels` finds it here.  */
  modules = PyImport_GetModuleDict ();
  return PyDict_SetItemString (modules, "gpumem.kernels", kernels);
}
