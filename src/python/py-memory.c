/* py-memory.c -- the module functions of the memory books (memory.c):
   memory_stats, set_memory_limit, empty_cache.  */

#include "gm-python.h"

#include <stdint.h>

static PyObject *
gmpy_memory_stats (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"device", NULL};
  PyObject *device_obj = Py_None, *limit, *owners;
  gm_mem_stats stats;
  gm_status status;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:memory_stats", keywords,
                                    &device_obj)
      || gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  status = gm_mem_stats_get (device, &stats);
  if (status != GM_OK)
    return gmpy_raise (status);
  limit = stats.limit == SIZE_MAX ? Py_NewRef (Py_None)
                                  : PyLong_FromSize_t (stats.limit);
  if (limit == NULL)
    return NULL;
  owners = PyDict_New ();
  if (owners == NULL)
    {
      Py_DECREF (limit);
      return NULL;
    }
  for (int o = 0; o < GM_MEM_NOWNERS; o++)
    {
      const gm_mem_owner_stats *mine = &stats.owners[o];
      PyObject *entry = Py_BuildValue (
        "{s:n,s:n,s:n,s:n}",
        "allocated_bytes", (Py_ssize_t) mine->allocated_bytes,
        "peak_allocated_bytes", (Py_ssize_t) mine->peak_allocated_bytes,
        "allocations", (Py_ssize_t) mine->allocations,
        "total_allocations", (Py_ssize_t) mine->total_allocations);
      if (entry == NULL
          || PyDict_SetItemString (owners, gm_mem_owner_names[o], entry) < 0)
        {
          Py_XDECREF (entry);
          Py_DECREF (owners);
          Py_DECREF (limit);
          return NULL;
        }
      Py_DECREF (entry);
    }
  return Py_BuildValue ("{s:n,s:n,s:n,s:n,s:n,s:N,s:n,s:n,s:n,s:N,s:n,s:n,s:n}",
                        "allocated_bytes", (Py_ssize_t) stats.allocated_bytes,
                        "peak_allocated_bytes",
                        (Py_ssize_t) stats.peak_allocated_bytes,
                        "reserved_bytes", (Py_ssize_t) stats.reserved_bytes,
                        "allocations", (Py_ssize_t) stats.allocations,
                        "total_allocations",
                        (Py_ssize_t) stats.total_allocations,
                        "limit", limit,
                        "shared_bytes", (Py_ssize_t) stats.shared_bytes,
                        "shared_blocks", (Py_ssize_t) stats.shared_blocks,
                        "imported_bytes", (Py_ssize_t)
                          stats.owners[GM_MEM_OWNER_IMPORTED].allocated_bytes,
                        "owners", owners,
                        "managed_bytes", (Py_ssize_t) stats.managed_bytes,
                        "peak_managed_bytes",
                        (Py_ssize_t) stats.peak_managed_bytes,
                        "managed_allocations",
                        (Py_ssize_t) stats.managed_allocations);
}

static PyObject *
gmpy_set_memory_limit (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"nbytes", "device", NULL};
  PyObject *limit_obj, *device_obj = Py_None;
  Py_ssize_t limit;
  gm_status status;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "O|O:set_memory_limit",
                                    keywords, &limit_obj, &device_obj)
      || gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  if (limit_obj == Py_None)
    limit = -1;
  else if (gmpy_size_arg (limit_obj, "nbytes", &limit) < 0)
    return NULL;
  status = gm_mem_set_limit (device, limit < 0 ? SIZE_MAX : (size_t) limit);
  if (status != GM_OK)
    return gmpy_raise (status);
  Py_RETURN_NONE;
}

static PyObject *
gmpy_empty_cache (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"device", NULL};
  PyObject *device_obj = Py_None;
  gm_status status;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|O:empty_cache", keywords,
                                    &device_obj)
      || gmpy_device_arg (device_obj, &device) < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  status = gm_mem_empty_cache (device);
  Py_END_ALLOW_THREADS
  if (status != GM_OK)
    return gmpy_raise (status);
  Py_RETURN_NONE;
}

PyMethodDef gmpy_memory_methods[] = {
  {"memory_stats", (PyCFunction) (void (*) (void)) gmpy_memory_stats,
   METH_VARARGS | METH_KEYWORDS,
   "memory_stats(device=None)\n--\n\n"
   "A dict of the device's memory statistics: allocated_bytes,\n"
   "peak_allocated_bytes, reserved_bytes, allocations (live),\n"
   "total_allocations, limit (None when unset), all sums over the\n"
   "owners; shared_bytes and shared_blocks, this process's memory that\n"
   "other processes may open (included in allocated_bytes);\n"
   "imported_bytes, what it opened from others (owners['imported']);\n"
   "owners: {'gpumem', 'torch', 'cupy', 'numba', 'imported'} -> a dict\n"
   "of that owner's allocated_bytes, peak_allocated_bytes, allocations,\n"
   "total_allocations; managed_bytes, peak_managed_bytes and\n"
   "managed_allocations, the managed arrays whose home is the device\n"
   "(included in allocated_bytes and under the limit, wherever their\n"
   "pages lie)."},
  {"set_memory_limit", (PyCFunction) (void (*) (void)) gmpy_set_memory_limit,
   METH_VARARGS | METH_KEYWORDS,
   "set_memory_limit(nbytes, device=None)\n--\n\n"
   "Refuse allocations past NBYTES in use on the device (None: no limit);\n"
   "managed arrays whose home is the device count too."},
  {"empty_cache", (PyCFunction) (void (*) (void)) gmpy_empty_cache,
   METH_VARARGS | METH_KEYWORDS,
   "empty_cache(device=None)\n--\n\n"
   "Return the pool's cached, unused memory to the driver."},
  {NULL, NULL, 0, NULL}
};
