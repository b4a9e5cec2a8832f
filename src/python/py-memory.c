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
  PyObject *result, *spilled;
  gm_spill_stats spill;
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
  result = Py_BuildValue ("{s:n,s:n,s:n,s:n,s:n,s:N,s:n,s:n,s:n,s:n,s:n,s:N,"
                          "s:n,s:n,s:n,s:n,s:n,s:n,s:n,s:N}",
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
                        "native_held_bytes",
                        (Py_ssize_t) stats.native_held_bytes,
                        "native_held_blocks",
                        (Py_ssize_t) stats.native_held_blocks,
                        "owners", owners,
                        "managed_bytes", (Py_ssize_t) stats.managed_bytes,
                        "peak_managed_bytes",
                        (Py_ssize_t) stats.peak_managed_bytes,
                        "managed_allocations",
                        (Py_ssize_t) stats.managed_allocations,
                        "managed_cached_bytes",
                        (Py_ssize_t) stats.managed_cached_bytes,
                        "pinned_reserved_bytes",
                        (Py_ssize_t) pinned.reserved_bytes,
                        "pinned_allocated_bytes",
                        (Py_ssize_t) pinned.allocated_bytes,
                        "pinned_peak_allocated_bytes",
                        (Py_ssize_t) pinned.peak_allocated_bytes,
                        "pinned_limit", pinned_limit);
  if (result == NULL)
    return NULL;
  if (gm_spill_stats_get (device, &spill) != GM_OK)
    {
      Py_DECREF (result);
      return gmpy_raise (GM_ERR_VALUE);
    }
  spilled = Py_BuildValue (
    "{s:n,s:n,s:n,s:K,s:K,s:K,s:d,s:K,s:K,s:d,s:K}",
    "spilled_bytes", (Py_ssize_t) spill.spilled_bytes,
    "spilled_blocks", (Py_ssize_t) spill.spilled_blocks,
    "spill_clean_bytes", (Py_ssize_t) spill.clean_bytes,
    "spills", (unsigned long long) spill.spills,
    "spills_without_copy", (unsigned long long) spill.clean_spills,
    "spill_bytes", (unsigned long long) spill.spill_bytes,
    "spill_seconds", (double) spill.spill_ns / 1e9,
    "returns", (unsigned long long) spill.returns,
    "return_bytes", (unsigned long long) spill.return_bytes,
    "return_seconds", (double) spill.return_ns / 1e9,
    "spill_exchanges", (unsigned long long) spill.exchanges);
  if (spilled == NULL || PyDict_Update (result, spilled) < 0)
    Py_CLEAR (result);
  Py_XDECREF (spilled);
  return result;
}

/* set_memory_limit's limit in bytes from NBYTES_OBJ (an int, a size
   string as GPUMEM_* settings take, or None) or FRACTION_OBJ (of
   DEVICE's total memory); SIZE_MAX for no limit.  0 or -1 with
   TypeError or ValueError.  */
static int
memory_limit_arg (PyObject *nbytes_obj, PyObject *fraction_obj, int device,
                  size_t *limit)
{
  if (nbytes_obj != Py_None && fraction_obj != Py_None)
    {
      PyErr_SetString (PyExc_TypeError, "set_memory_limit takes nbytes or "
                       "fraction=, not both");
      return -1;
    }
  *limit = SIZE_MAX;
  if (fraction_obj != Py_None)
    {
      gm_device_props props;
      gm_status status;
      double fraction;

      if (!PyFloat_Check (fraction_obj) && !PyLong_Check (fraction_obj))
        {
          PyErr_Format (PyExc_TypeError, "fraction must be a float from 0 "
                        "to 1, not %.200s", GMPY_TYPE_NAME (Py_TYPE (fraction_obj)));
          return -1;
        }
      fraction = PyFloat_AsDouble (fraction_obj);
      if (fraction == -1.0 && PyErr_Occurred ())
        return -1;
      if (!(fraction > 0.0 && fraction <= 1.0))
        {
          PyErr_Format (PyExc_ValueError, "fraction must be more than 0 and "
                        "at most 1, got %R", fraction_obj);
          return -1;
        }
      status = gm_backend_current->device_props (device, &props);
      if (status != GM_OK)
        return gmpy_raise_int (status);
      *limit = (size_t) (fraction * (double) props.total_memory);
      return 0;
    }
  if (nbytes_obj == Py_None)
    return 0;
  if (PyUnicode_Check (nbytes_obj))
    {
      const char *text = PyUnicode_AsUTF8 (nbytes_obj);
      gm_status status;

      if (text == NULL)
        return -1;
      status = gm_size_parse (text, "nbytes", 0, SIZE_MAX, limit);
      return status == GM_OK ? 0 : gmpy_raise_int (status);
    }
  {
    Py_ssize_t n;

    if (gmpy_size_arg (nbytes_obj, "nbytes", &n) < 0)
      return -1;
    *limit = (size_t) n;
  }
  return 0;
}

static PyObject *
gmpy_set_memory_limit (PyObject *module, PyObject *args, PyObject *kwargs)
{
  static char *keywords[] = {"nbytes", "device", "fraction", NULL};
  PyObject *limit_obj = Py_None, *device_obj = Py_None;
  PyObject *fraction_obj = Py_None;
  size_t limit;
  gm_status status;
  int device;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|OO$O:set_memory_limit",
                                    keywords, &limit_obj, &device_obj,
                                    &fraction_obj)
      || gmpy_device_arg (device_obj, &device) < 0
      || memory_limit_arg (limit_obj, fraction_obj, device, &limit) < 0)
    return NULL;
  /* The blocks other libraries' caches keep idle count against the
     limit: they are given back first.  */
  if (gmpy_frameworks_release_caches () < 0)
    return NULL;
  status = gm_mem_set_limit (device, limit);
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
  if (gmpy_frameworks_release_caches () < 0)
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
   "native_held_bytes and native_held_blocks, memory whose array was\n"
   "freed that native code (a C++ gpumem::array, a C API hold, a DLPack\n"
   "consumer) still holds (included in allocated_bytes);\n"
   "owners: {'gpumem', 'torch', 'cupy', 'numba', 'imported'} -> a dict\n"
   "of that owner's allocated_bytes, peak_allocated_bytes, allocations,\n"
   "total_allocations; managed_bytes, peak_managed_bytes and\n"
   "managed_allocations, the managed arrays whose home is the device\n"
   "(included in allocated_bytes and under the limit, wherever their\n"
   "pages lie); managed_cached_bytes, freed managed memory kept for the\n"
   "next array of its size (not in allocated_bytes; empty_cache() gives\n"
   "it back); pinned_reserved_bytes, pinned_allocated_bytes,\n"
   "pinned_peak_allocated_bytes and pinned_limit, the process's pool of\n"
   "page-locked host memory (pinned_empty, the staging)."},
  {"set_memory_limit", (PyCFunction) (void (*) (void)) gmpy_set_memory_limit,
   METH_VARARGS | METH_KEYWORDS,
   "set_memory_limit(nbytes=None, device=None, *, fraction=None)\n--\n\n"
   "Refuse allocations past NBYTES in use on the device: an int of\n"
   "bytes or a size string (\"512MiB\", \"2G\"), or FRACTION of the\n"
   "device's total memory (0 < fraction <= 1), not both; neither (or\n"
   "None): no limit.  Managed arrays whose home is the device count too."},
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
