/* py-comm-devices.c -- gpumem.allreduce_devices and gpumem.bcast_devices:
   collectives over DeviceArrays on several devices of this one process
   (comm-devices.c moves the bytes: NCCL, or plain loops).

   They live in gpumem itself, not in gpumem.comm, because one process
   needs no MPI: gpumem.comm exists only in builds with MPI (and its
   presence tells a script so), while a script that reduces over its own
   GPUs must run in any build, under mpirun or not.  gpumem.comm offers
   the same two functions under the same names, for scripts that keep
   every collective there.  */

#include "gm-python.h"

#include <string.h>

#include "py-comm.h"
#include "comm-devices.h"
#include "comm-nccl-load.h"

#include <stdio.h>
#include <unistd.h>

int
gmpy_comm_op_arg (PyObject *obj, const char *fname, gm_comm_op *op)
{
  static const gm_comm_op ops[] = {GM_COMM_SUM, GM_COMM_MAX, GM_COMM_MIN};

  if (obj == NULL)
    {
      *op = GM_COMM_SUM;
      return 0;
    }
  if (!PyUnicode_Check (obj))
    {
      PyErr_Format (PyExc_TypeError,
                    "%s: op must be 'sum', 'max' or 'min', not %.100s", fname,
                    GMPY_TYPE_NAME (Py_TYPE (obj)));
      return -1;
    }
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (PyUnicode_CompareWithASCIIString (obj, gm_comm_op_name (ops[i])) == 0)
      {
        *op = ops[i];
        return 0;
      }
  PyErr_Format (PyExc_ValueError,
                "%s: op must be 'sum', 'max' or 'min', not %R", fname, obj);
  return -1;
}

/* Reads ARRAYS (a list or tuple of DeviceArrays of one shape and dtype on
   distinct devices, every one writable but the one at index KEEP) into
   CALL, with DATA and DEVICES of room for them (allocated here; the
   caller frees them).  Returns a new reference to the sequence (keeping
   the arrays alive) or NULL with TypeError or ValueError.  */
static PyObject *
arrays_arg (PyObject *arrays, const char *fname, int keep,
            gm_comm_devices_call *call, void ***data, int **devices)
{
  PyObject *seq;
  arraypy_object *first = NULL;
  Py_ssize_t n;

  *data = NULL;
  *devices = NULL;
  if (!PyList_Check (arrays) && !PyTuple_Check (arrays))
    {
      PyErr_Format (PyExc_TypeError,
                    "%s: arrays must be a list or tuple of "
                    "gpumem.DeviceArray, not %.100s", fname,
                    GMPY_TYPE_NAME (Py_TYPE (arrays)));
      return NULL;
    }
  seq = PySequence_Fast (arrays, fname);
  if (seq == NULL)
    return NULL;
  n = PySequence_Fast_GET_SIZE (seq);
  if (n == 0)
    {
      PyErr_Format (PyExc_ValueError, "%s: arrays is empty", fname);
      goto fail;
    }
  *data = PyMem_Calloc ((size_t) n, sizeof **data);
  *devices = PyMem_Calloc ((size_t) n, sizeof **devices);
  if (*data == NULL || *devices == NULL)
    {
      PyErr_NoMemory ();
      goto fail;
    }
  for (Py_ssize_t i = 0; i < n; i++)
    {
      PyObject *item = PySequence_Fast_GET_ITEM (seq, i);
      arraypy_object *array = (arraypy_object *) item;

      if (!gmpy_array_check (item))
        {
          PyErr_Format (PyExc_TypeError,
                        "%s: arrays[%zd] must be a gpumem.DeviceArray, not "
                        "%.100s", fname, i, GMPY_TYPE_NAME (Py_TYPE (item)));
          goto fail;
        }
      if (gmpy_array_usable (array) < 0)
        goto fail;
      if (i != keep && array->readonly)
        {
          PyErr_Format (PyExc_ValueError, "%s: arrays[%zd] is read-only",
                        fname, i);
          goto fail;
        }
      if (first == NULL)
        first = array;
      else if (array->dtype != first->dtype || array->ndim != first->ndim
               || memcmp (array->shape, first->shape,
                          (size_t) first->ndim * sizeof first->shape[0]) != 0)
        {
          PyErr_Format (PyExc_ValueError,
                        "%s: the arrays differ: arrays[0] is %s of %zd "
                        "elements in %d dimension(s), arrays[%zd] %s of %zd "
                        "in %d", fname, gm_dtypes[first->dtype].name,
                        first->size, first->ndim, i,
                        gm_dtypes[array->dtype].name, array->size,
                        array->ndim);
          goto fail;
        }
      for (Py_ssize_t j = 0; j < i; j++)
        if ((*devices)[j] == array->device)
          {
            PyErr_Format (PyExc_ValueError,
                          "%s: arrays[%zd] and arrays[%zd] are both on "
                          "device %d; give one array a device", fname, j, i,
                          array->device);
            goto fail;
          }
      (*data)[i] = array->data;
      (*devices)[i] = array->device;
    }
  call->dtype = first->dtype;
  call->count = (size_t) first->size;
  call->n = (int) n;
  call->data = *data;
  call->devices = *devices;
  return seq;
fail:
  PyMem_Free (*data);
  PyMem_Free (*devices);
  *data = NULL;
  *devices = NULL;
  Py_DECREF (seq);
  return NULL;
}

/* Runs CALL without the GIL.  0 or -1.  */
static int
run_devices (const gm_comm_devices_call *call)
{
  gm_status status;

  Py_BEGIN_ALLOW_THREADS
  status = gm_comm_devices_run (call);
  Py_END_ALLOW_THREADS
  return status == GM_OK ? 0 : gmpy_raise_int (status);
}

static PyObject *
devicespy_allreduce (PyObject *module, PyObject *const *args,
                     Py_ssize_t nargs, PyObject *kwnames)
{
  static const char *const names[] = {"arrays", "op", NULL};
  const char *fname = "gpumem.allreduce_devices";
  gm_comm_devices_call call = {.kind = GM_COMM_ALLREDUCE};
  PyObject *arg[2], *seq;
  void **data;
  int *devices, failed;
  gm_status status;

  if (gmpy_parse_args (args, nargs, kwnames, "allreduce_devices", names, 1,
                       -1, arg) < 0
      || gmpy_comm_op_arg (arg[1], fname, &call.op) < 0)
    return NULL;
  seq = arrays_arg (arg[0], fname, -1, &call, &data, &devices);
  if (seq == NULL)
    return NULL;
  status = gm_comm_op_check (call.dtype, call.op);
  failed = status != GM_OK ? gmpy_raise_int (status) : run_devices (&call);
  PyMem_Free (data);
  PyMem_Free (devices);
  Py_DECREF (seq);
  if (failed)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *
devicespy_bcast (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                 PyObject *kwnames)
{
  static const char *const names[] = {"arrays", "root", NULL};
  const char *fname = "gpumem.bcast_devices";
  gm_comm_devices_call call = {.kind = GM_COMM_BCAST};
  PyObject *arg[2], *seq, *index = NULL;
  Py_ssize_t root = 0, count;
  void **data;
  int *devices, failed;

  if (gmpy_parse_args (args, nargs, kwnames, "bcast_devices", names, 1, -1,
                       arg) < 0
      || (arg[1] != NULL
          && gmpy_rank_arg (arg[1], fname, "root", &index, &root) < 0))
    return NULL;
  count = PyList_Check (arg[0]) ? PyList_GET_SIZE (arg[0])
          : PyTuple_Check (arg[0]) ? PyTuple_GET_SIZE (arg[0]) : 0;
  if ((PyList_Check (arg[0]) || PyTuple_Check (arg[0]))
      && (root < 0 || root >= count) && count > 0)
    {
      PyErr_Format (PyExc_ValueError,
                    "%s: root %S is not an index of arrays (0 to %zd)",
                    fname, index, count - 1);
      Py_XDECREF (index);
      return NULL;
    }
  Py_XDECREF (index);
  seq = arrays_arg (arg[0], fname, (int) root, &call, &data, &devices);
  if (seq == NULL)
    return NULL;
  call.root = (int) root;
  failed = run_devices (&call);
  PyMem_Free (data);
  PyMem_Free (devices);
  Py_DECREF (seq);
  if (failed)
    return NULL;
  Py_RETURN_NONE;
}

static PyMethodDef devicespy_methods[] = {
  {"allreduce_devices", (PyCFunction) (void (*) (void)) devicespy_allreduce,
   METH_FASTCALL | METH_KEYWORDS,
   "allreduce_devices(arrays, op='sum')\n--\n\n"
   "Replace every DeviceArray in ARRAYS (a list or tuple, one array a\n"
   "device, all of one shape and dtype), in place, with the elementwise\n"
   "OP ('sum', 'max' or 'min') of all of them: NCCL over NVLink or PCIe\n"
   "where it is built in and the arrays are in CUDA device memory, else\n"
   "copies through host memory.  Sees all work queued before on their\n"
   "devices, and is complete on return.  Ops and dtypes as\n"
   "gpumem.comm.allreduce's (bool sum is an or; complex sum only;\n"
   "float16 TypeError).  Needs no MPI."},
  {"bcast_devices", (PyCFunction) (void (*) (void)) devicespy_bcast,
   METH_FASTCALL | METH_KEYWORDS,
   "bcast_devices(arrays, root=0)\n--\n\n"
   "Copy ARRAYS[root] into every other DeviceArray of ARRAYS (one array a\n"
   "device, all of one shape and dtype), in place; as allreduce_devices\n"
   "moves data."},
  {NULL, NULL, 0, NULL}
};

/* Tells the NCCL loader (comm-nccl-load.h) where NVIDIA's
   nvidia-nccl-cu13 wheel put libnccl.so.2: the first folder of
   sys.path that holds nvidia/nccl/lib/libnccl.so.2 (the wheel may live
   in another folder than gpumem: a user site, a virtual environment's
   parent).  Nothing is imported: importlib's find_spec of nvidia.nccl
   would import the package nvidia, which another wheel may give code
   that loads libraries.  Finding nothing is no error.  */
static void
find_nccl_wheel (void)
{
  PyObject *folders = PySys_GetObject ("path");   /* borrowed */
  Py_ssize_t n;
  char path[4096];

  if (folders == NULL || !PyList_Check (folders))
    return;
  n = PyList_GET_SIZE (folders);
  for (Py_ssize_t i = 0; i < n; i++)
    {
      PyObject *item = PyList_GET_ITEM (folders, i);
      const char *folder = PyUnicode_Check (item)
                           ? PyUnicode_AsUTF8 (item) : NULL;
      if (folder == NULL)
        {
          PyErr_Clear ();
          continue;
        }
      if (snprintf (path, sizeof path, "%s/nvidia/nccl/lib/libnccl.so.2",
                    folder) < (int) sizeof path
          && access (path, F_OK) == 0)
        {
          gm_nccl_set_wheel_library (path);
          return;
        }
    }
}

int
gmpy_comm_devices_init (PyObject *module, gmpy_state *state)
{
  (void) state;
  find_nccl_wheel ();
  return PyModule_AddFunctions (module, devicespy_methods);
}

int
gmpy_comm_devices_alias (PyObject *module, PyObject *target)
{
  for (PyMethodDef *def = devicespy_methods; def->ml_name != NULL; def++)
    {
      PyObject *function = PyObject_GetAttrString (module, def->ml_name);
      int failed;
      if (function == NULL)
        return -1;
      failed = PyModule_AddObjectRef (target, def->ml_name, function) < 0;
      Py_DECREF (function);
      if (failed)
        return -1;
    }
  return 0;
}
