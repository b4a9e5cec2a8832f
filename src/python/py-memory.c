/* py-memory.c -- the module functions of the memory books (memory.c)
   and of the pinned pool (pinned-pool.c): memory_stats,
   set_memory_limit, set_pinned_memory_limit, empty_cache.  */

#include "gm-python.h"
#include "pinned-pool.h"

#include <stdint.h>

static PyObject *
gmpy_memory_stats (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"device", NULL};
  PyObject *device_obj = Py_None, *limit, *owners, *pinned_limit;
  gm_pinned_stats pinned;
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
  gm_pinned_stats_get (&pinned);
  if (pinned.limit == SIZE_MAX)
    pinned_limit = Py_NewRef (Py_None);
  else
    pinned_limit = PyLong_FromSize_t (pinned.limit);
  if (pinned_limit == NULL)
    {
      Py_DECREF (owners);
      Py_DECREF (limit);
      return NULL;
    }
  return Py_BuildValue ("{s:n,s:n,s:n,s:n,s:n,s:N,s:n,s:n,s:n,s:N,s:n,s:n,s:n,"
                        "s:n,s:n,s:n,s:N}",
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
                        (Py_ssize_t) stats.managed_allocations,
                        "pinned_reserved_bytes",
                        (Py_ssize_t) pinned.reserved_bytes,
                        "pinned_allocated_bytes",
                        (Py_ssize_t) pinned.allocated_bytes,
                        "pinned_peak_allocated_bytes",
                        (Py_ssize_t) pinned.peak_allocated_bytes,
                        "pinned_limit", pinned_limit);
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
gmpy_set_pinned_memory_limit (PyObject *module, PyObject *args,
                              PyObject *kwargs)
{
  static char *keywords[] = {"nbytes", NULL};
  PyObject *limit_obj;
  Py_ssize_t limit = -1;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs,
                                    "O:set_pinned_memory_limit", keywords,
                                    &limit_obj))
    return NULL;
  if (limit_obj != Py_None
      && gmpy_size_arg (limit_obj, "nbytes", &limit) < 0)
    return NULL;
  Py_BEGIN_ALLOW_THREADS
  gm_pinned_set_limit (limit < 0 ? SIZE_MAX : (size_t) limit);
  Py_END_ALLOW_THREADS
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
  gm_pinned_release_cached ();
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
   "pages lie); pinned_reserved_bytes, pinned_allocated_bytes,\n"
   "pinned_peak_allocated_bytes and pinned_limit, the process's pool of\n"
   "page-locked host memory (pinned_empty, the staging)."},
  {"set_memory_limit", (PyCFunction) (void (*) (void)) gmpy_set_memory_limit,
   METH_VARARGS | METH_KEYWORDS,
   "set_memory_limit(nbytes, device=None)\n--\n\n"
   "Refuse allocations past NBYTES in use on the device (None: no limit);\n"
   "managed arrays whose home is the device count too."},
  {"set_pinned_memory_limit",
   (PyCFunction) (void (*) (void)) gmpy_set_pinned_memory_limit,
   METH_VARARGS | METH_KEYWORDS,
   "set_pinned_memory_limit(nbytes)\n--\n\n"
   "Refuse page-locked memory past NBYTES held by the pinned pool (None:\n"
   "no limit); its cache is given back down to the limit."},
  {"empty_cache", (PyCFunction) (void (*) (void)) gmpy_empty_cache,
   METH_VARARGS | METH_KEYWORDS,
   "empty_cache(device=None)\n--\n\n"
   "Return the pool's cached, unused memory to the driver, and the\n"
   "pinned pool's cached page-locked memory to the host."},
  {NULL, NULL, 0, NULL}
};
