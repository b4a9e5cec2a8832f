/* py-device.c -- gpumem.Device, and which device is current.  */

#include "gm-python.h"

#include "comm.h"

/* The current device of each thread; `with Device(i):` changes it.  -1
   until the thread first asks: then the process's default device, which
   in an MPI job is the node-local rank's (gm_comm_default_device).  */
static _Thread_local int current_device = -1;

int
gmpy_current_device (void)
{
  if (current_device < 0)
    current_device = gm_comm_default_device ();
  return current_device;
}

int
gmpy_device_check (long index)
{
  int count = gm_backend_current->device_count ();

  if (index < 0 || index >= count)
    {
      PyErr_Format (PyExc_ValueError,
                    "device %ld does not exist: the %s backend has %d "
                    "device%s (valid indexes 0 to %d)",
                    index, gm_backend_current->name, count,
                    count == 1 ? "" : "s", count - 1);
      return -1;
    }
  return 0;
}

PyObject *
gmpy_device_get (int index)
{
  gmpy_state *state = gmpy_state_get ();

  if (gmpy_device_check (index) < 0)
    return NULL;
  return Py_NewRef (PyTuple_GET_ITEM (state->devices, index));
}

int
gmpy_device_arg (PyObject *obj, int *index)
{
  gmpy_state *state = gmpy_state_get ();
  long value;

  if (obj == NULL || obj == Py_None)
    {
      *index = gmpy_current_device ();
      return 0;
    }
  if (PyObject_TypeCheck (obj, state->device_type))
    {
      *index = ((devicepy_object *) obj)->index;
      return 0;
    }
  if (!PyLong_Check (obj) || PyBool_Check (obj))
    {
      PyErr_Format (PyExc_TypeError,
                    "device must be None, an int or a gpumem.Device, "
                    "not %.100s", GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  value = PyLong_AsLong (obj);
  if (value == -1 && PyErr_Occurred ())
    {
      PyErr_Clear ();
      value = LONG_MAX;
    }
  if (gmpy_device_check (value) < 0)
    return -1;
  *index = (int) value;
  return 0;
}

static PyObject *
devicepy_new (PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"index", NULL};
  PyObject *index_obj;
  int index;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O:Device", keywords,
                                    &index_obj)
      || gmpy_device_arg (index_obj, &index) < 0)
    return NULL;
  return gmpy_device_get (index);
}

static int
devicepy_clear (PyObject *self)
{
  Py_CLEAR (((devicepy_object *) self)->previous);
  return 0;
}

static void
devicepy_dealloc (PyObject *self)
{
  PyTypeObject *type = Py_TYPE (self);
  PyObject_GC_UnTrack (self);
  devicepy_clear (self);
  GMPY_TYPE_FREE (type, self);
  Py_DECREF (type);
}

static int
devicepy_traverse (PyObject *self, visitproc visit, void *arg)
{
  Py_VISIT (Py_TYPE (self));
  Py_VISIT (((devicepy_object *) self)->previous);
  return 0;
}

static int
get_props (devicepy_object *self, gm_device_props *props)
{
  gm_status status = gm_backend_current->device_props (self->index, props);
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

static PyObject *
devicepy_get_index (PyObject *self, void *closure)
{
  return PyLong_FromLong (((devicepy_object *) self)->index);
}

static PyObject *
devicepy_get_name (PyObject *self, void *closure)
{
  gm_device_props props;
  if (get_props ((devicepy_object *) self, &props) < 0)
    return NULL;
  return PyUnicode_FromString (props.name);
}

static PyObject *
devicepy_get_total_memory (PyObject *self, void *closure)
{
  gm_device_props props;
  if (get_props ((devicepy_object *) self, &props) < 0)
    return NULL;
  return PyLong_FromSize_t (props.total_memory);
}

static PyObject *
devicepy_get_compute_capability (PyObject *self, void *closure)
{
  gm_device_props props;
  if (get_props ((devicepy_object *) self, &props) < 0)
    return NULL;
  return Py_BuildValue ("(ii)", props.cc_major, props.cc_minor);
}

static PyObject *
devicepy_get_multiprocessor_count (PyObject *self, void *closure)
{
  gm_device_props props;
  if (get_props ((devicepy_object *) self, &props) < 0)
    return NULL;
  return PyLong_FromLong (props.sm_count);
}

static PyObject *
devicepy_mem_info (PyObject *self, PyObject *unused)
{
  size_t free_bytes, total;
  gm_status status;

  status = gm_backend_current->mem_info (((devicepy_object *) self)->index,
                                         &free_bytes, &total);
  if (status != GM_OK)
    return gmpy_raise (status);
  return Py_BuildValue ("(nn)", (Py_ssize_t) free_bytes, (Py_ssize_t) total);
}

static PyObject *
devicepy_synchronize (PyObject *self, PyObject *unused)
{
  if (gmpy_synchronize_device (((devicepy_object *) self)->index) < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* `with Device(i):` makes device i current and restores the previous
   one after; the previous ones are kept on a per-object stack so that
   one Device object may be entered more than once.  */
static PyObject *
devicepy_enter (PyObject *self, PyObject *unused)
{
  PyObject *stack = ((devicepy_object *) self)->previous;
  PyObject *previous = PyLong_FromLong (gmpy_current_device ());
  int failed = previous == NULL || PyList_Append (stack, previous) < 0;

  Py_XDECREF (previous);
  if (failed)
    return NULL;
  current_device = ((devicepy_object *) self)->index;
  return Py_NewRef (self);
}

static PyObject *
devicepy_exit (PyObject *self, PyObject *args)
{
  PyObject *stack = ((devicepy_object *) self)->previous;
  Py_ssize_t n = PyList_GET_SIZE (stack);

  if (n > 0)
    {
      current_device = (int) PyLong_AsLong (PyList_GET_ITEM (stack, n - 1));
      if (PyList_SetSlice (stack, n - 1, n, NULL) < 0)
        return NULL;
    }
  Py_RETURN_FALSE;
}

static PyObject *
devicepy_repr (PyObject *self)
{
  gm_device_props props;
  if (get_props ((devicepy_object *) self, &props) < 0)
    return NULL;
  return PyUnicode_FromFormat ("<gpumem.Device %d: %s>",
                               ((devicepy_object *) self)->index, props.name);
}

static PyObject *
devicepy_index (PyObject *self)
{
  return PyLong_FromLong (((devicepy_object *) self)->index);
}

static PyGetSetDef devicepy_getset[] = {
  {"index", devicepy_get_index, NULL, "The device's index.", NULL},
  {"name", devicepy_get_name, NULL, "The device's name.", NULL},
  {"total_memory", devicepy_get_total_memory, NULL,
   "The device's memory in bytes.", NULL},
  {"compute_capability", devicepy_get_compute_capability, NULL,
   "(major, minor); (0, 0) on the host backend.", NULL},
  {"multiprocessor_count", devicepy_get_multiprocessor_count, NULL,
   "The number of streaming multiprocessors.", NULL},
  {NULL, NULL, NULL, NULL, NULL}
};

static PyObject *
devicepy_can_access_peer (PyObject *self, PyObject *peer_obj)
{
  int peer;
  bool can;
  gm_status status;

  if (gmpy_device_arg (peer_obj, &peer) < 0)
    return NULL;
  status = gm_backend_current->can_access_peer (
    ((devicepy_object *) self)->index, peer, &can);
  if (status != GM_OK)
    return gmpy_raise (status);
  return PyBool_FromLong (can);
}

static PyMethodDef devicepy_methods[] = {
  {"can_access_peer", devicepy_can_access_peer, METH_O,
   "can_access_peer($self, peer, /)\n--\n\n"
   "True when kernels on this device may use arrays of device PEER (an\n"
   "int or a Device) and copies between the two go directly (over\n"
   "NVLink or PCIe, not through host memory); True for the device itself.\n"
   "gpumem maps every such pair both ways once, at the first need.  On\n"
   "the host backend the simulated devices can all access each other\n"
   "(GPUMEM_HOST_PEER_ACCESS=0: none can)."},
  {"mem_info", devicepy_mem_info, METH_NOARGS,
   "mem_info($self)\n--\n\n(free, total) bytes of the device's memory."},
  {"synchronize", devicepy_synchronize, METH_NOARGS,
   "synchronize($self)\n--\n\nWait for all work on the device."},
  {"__enter__", devicepy_enter, METH_NOARGS,
   "__enter__($self)\n--\n\nStart a with block: this device is the current "
   "one of this thread\n(new arrays, streams and events go to it)."},
  {"__exit__", devicepy_exit, METH_VARARGS,
   "__exit__($self, *exc_info)\n--\n\nEnd the with block: the device current "
   "before it is again."},
  {NULL, NULL, 0, NULL}
};

static PyType_Slot devicepy_slots[] = {
  {Py_tp_new, devicepy_new},
  {Py_tp_dealloc, devicepy_dealloc},
  {Py_tp_traverse, devicepy_traverse},
  {Py_tp_clear, devicepy_clear},
  {Py_tp_repr, devicepy_repr},
  {Py_tp_getset, devicepy_getset},
  {Py_tp_methods, devicepy_methods},
  {Py_nb_index, devicepy_index},
  {Py_tp_doc, "Device(index)\n--\n\nA device of the backend in use; a "
              "context manager that makes it the current device."},
  {0, NULL}
};

static PyType_Spec devicepy_spec = {
  .name = "gpumem.Device",
  .basicsize = sizeof (devicepy_object),
  .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
  .slots = devicepy_slots,
};

int
gmpy_device_init (PyObject *module, gmpy_state *state)
{
  int count = gm_backend_current->device_count ();

  state->device_type = (PyTypeObject *) PyType_FromModuleAndSpec (
    module, &devicepy_spec, NULL);
  if (state->device_type == NULL
      || PyModule_AddType (module, state->device_type) < 0)
    return -1;
  state->devices = PyTuple_New (count);
  if (state->devices == NULL)
    return -1;
  for (int i = 0; i < count; i++)
    {
      devicepy_object *device
        = PyObject_GC_New (devicepy_object, state->device_type);
      if (device == NULL)
        return -1;
      device->index = i;
      device->previous = PyList_New (0);
      if (device->previous == NULL)
        {
          Py_DECREF (device);
          return -1;
        }
      PyObject_GC_Track (device);
      PyTuple_SET_ITEM (state->devices, i, (PyObject *) device);
    }
  return 0;
}
