/* py-config.c -- gpumem.show_config(): what this gpumem was built with
   and what it found at run time, in one report.

   The facts come from the layers that own them: the build from
   config-facts.h, the backend and its devices from the backend table
   (gm_backend_reason, gm_backend_cuda_versions, device_props,
   can_access_peer), NVRTC from src/plugin (jit.h), MPI and NCCL from
   src/comm (gm_comm_facts_get), mpi4py from Python's import system
   (found without importing mpi4py.MPI, which would start MPI).  They
   become one dict here, and the text is made from that dict alone, so
   that show_config(), show_config(as_dict=True) and the program's
   --config and --config=json (which call this) say the same.  Every
   part that is missing says how to get it, in its "fix".  */

#include "gm-python.h"

#include "py-comm.h"
#include "config-facts.h"
#include "jit.h"

/* Sets D[KEY] to VALUE and drops the reference to VALUE (a new
   reference, or NULL with an exception set).  0 or -1.  */
static int
set_item (PyObject *d, const char *key, PyObject *value)
{
  int rc;

  if (value == NULL)
    return -1;
  rc = PyDict_SetItemString (d, key, value);
  Py_DECREF (value);
  return rc;
}

static int
set_text (PyObject *d, const char *key, const char *text)
{
  if (text == NULL || *text == '\0')
    return PyDict_SetItemString (d, key, Py_None);
  return set_item (d, key, PyUnicode_DecodeFSDefault (text));
}

static int
set_bool (PyObject *d, const char *key, bool value)
{
  return PyDict_SetItemString (d, key, value ? Py_True : Py_False);
}

/* CUDA's VERSION (12080) as "12.8"; None for 0.  */
static PyObject *
cuda_version (int version)
{
  if (version <= 0)
    Py_RETURN_NONE;
  return PyUnicode_FromFormat ("%d.%d", version / 1000, version % 1000 / 10);
}

static PyObject *
build_section (void)
{
  gm_build_facts build;
  PyObject *d = PyDict_New ();

  gm_build_facts_get (&build);
  if (d == NULL
      || set_text (d, "version", build.version) < 0
      || set_text (d, "python", GM_PYTHON_VERSION_TEXT) < 0
      || set_text (d, "configure_args", build.configure_args) < 0
      || set_bool (d, "cuda", build.has_cuda) < 0
      || set_text (d, "cuda_found", build.cuda) < 0
      || set_text (d, "nvrtc_found", build.nvrtc) < 0
      || set_bool (d, "mpi", build.has_mpi) < 0
      || set_text (d, "mpi_found", build.mpi) < 0
      || set_bool (d, "nccl", build.has_nccl) < 0
      || set_text (d, "nccl_found", build.nccl) < 0)
    {
      Py_XDECREF (d);
      return NULL;
    }
  return d;
}

static PyObject *
backend_section (void)
{
  const gm_backend *backend = gm_backend_current;
  gm_build_facts build;
  int driver = 0, runtime = 0;
  const char *fix = NULL;
  PyObject *d = PyDict_New ();

  gm_build_facts_get (&build);
  gm_backend_cuda_versions (&driver, &runtime);
  if (!build.has_cuda)
    fix = "this gpumem was built without CUDA: build it with CUDA "
          "(configure --with-cuda=DIR) or install the binary wheel";
  else if (driver == 0)
    fix = "no NVIDIA driver answered: install one that supports this "
          "CUDA runtime (nvidia-smi shows the driver)";
  else if (backend->device_memory != GM_MEMORY_CUDA)
    fix = "the CUDA backend did not start (see 'why'); check "
          "CUDA_VISIBLE_DEVICES and nvidia-smi";
  if (d == NULL
      || set_text (d, "name", backend->name) < 0
      || set_text (d, "why", gm_backend_reason ()) < 0
      || set_item (d, "device_count",
                   PyLong_FromLong (backend->device_count ())) < 0
      || set_item (d, "cuda_driver", cuda_version (driver)) < 0
      || set_item (d, "cuda_runtime", cuda_version (runtime)) < 0
      || set_text (d, "fix", fix) < 0)
    {
      Py_XDECREF (d);
      return NULL;
    }
  return d;
}

static PyObject *
device_entry (int index, int count)
{
  const gm_backend *backend = gm_backend_current;
  gm_device_props props;
  PyObject *d = NULL, *peers = NULL;

  if (backend->device_props (index, &props) != GM_OK)
    return gmpy_raise (GM_ERR_UNAVAILABLE);
  peers = PyList_New (0);
  for (int p = 0; peers != NULL && p < count; p++)
    {
      bool can = false;
      PyObject *number;

      if (p == index)
        continue;
      if (backend->can_access_peer (index, p, &can) != GM_OK)
        {
          Py_CLEAR (peers);
          return gmpy_raise (GM_ERR_UNAVAILABLE);
        }
      if (!can)
        continue;
      number = PyLong_FromLong (p);
      if (number == NULL || PyList_Append (peers, number) < 0)
        Py_CLEAR (peers);
      Py_XDECREF (number);
    }
  if (peers == NULL || (d = PyDict_New ()) == NULL
      || set_item (d, "index", PyLong_FromLong (index)) < 0
      || set_text (d, "name", props.name) < 0
      || set_item (d, "memory_bytes",
                   PyLong_FromSize_t (props.total_memory)) < 0
      || set_item (d, "compute_capability",
                   backend->device_memory == GM_MEMORY_CUDA
                   ? PyUnicode_FromFormat ("%d.%d", props.cc_major,
                                           props.cc_minor)
                   : Py_NewRef (Py_None)) < 0
      || set_bool (d, "pools", props.pools) < 0
      || set_bool (d, "ipc", props.ipc) < 0
      || set_bool (d, "managed", props.managed) < 0
      || set_bool (d, "concurrent_managed", props.concurrent_managed) < 0
      || PyDict_SetItemString (d, "peers", peers) < 0)
    {
      Py_XDECREF (peers);
      Py_XDECREF (d);
      return NULL;
    }
  Py_DECREF (peers);
  return d;
}

static PyObject *
devices_section (void)
{
  int count = gm_backend_current->device_count ();
  PyObject *list = PyList_New (0);

  for (int i = 0; list != NULL && i < count; i++)
    {
      PyObject *entry = device_entry (i, count);

      if (entry == NULL || PyList_Append (list, entry) < 0)
        Py_CLEAR (list);
      Py_XDECREF (entry);
    }
  return list;
}

static PyObject *
nvrtc_section (void)
{
  int major = 0, minor = 0;
  char path[4096];
  bool found = gm_jit_nvrtc (&major, &minor) == GM_OK;
  PyObject *d = PyDict_New ();

  if (found)
    gm_jit_nvrtc_path (path, sizeof path);
  if (d == NULL
      || set_bool (d, "available", found) < 0
      || set_item (d, "version",
                   found ? PyUnicode_FromFormat ("%d.%d", major, minor)
                         : Py_NewRef (Py_None)) < 0
      || set_text (d, "path", found ? path : NULL) < 0
      || set_text (d, "fix", found ? NULL : gm_last_error ()->message) < 0)
    {
      Py_XDECREF (d);
      return NULL;
    }
  return d;
}

static PyObject *
nccl_section (const gm_comm_facts *facts)
{
  bool found = facts->nccl_loaded;
  int v = facts->nccl_version;
  const char *fix = NULL;
  PyObject *d = PyDict_New ();

  if (!facts->nccl_built)
    fix = "this gpumem was built without NCCL: collectives between "
          "devices copy through host memory; build it with CUDA and NCCL "
          "2.14 or later (configure --with-nccl=DIR)";
  else if (!found)
    fix = facts->nccl_error;
  if (d == NULL
      || set_bool (d, "available", found) < 0
      /* NCCL's code is major * 10000 + minor * 100 + patch.  */
      || set_item (d, "version",
                   found && v > 0
                   ? PyUnicode_FromFormat ("%d.%d.%d", v / 10000,
                                           v / 100 % 100, v % 100)
                   : Py_NewRef (Py_None)) < 0
      || set_text (d, "path", found ? facts->nccl_path : NULL) < 0
      || set_text (d, "loaded", found ? facts->nccl_how : NULL) < 0
      || set_text (d, "fix", fix) < 0)
    {
      Py_XDECREF (d);
      return NULL;
    }
  return d;
}

#ifdef GM_HAVE_MPI
static const bool built_with_mpi = true;
#else
static const bool built_with_mpi = false;
#endif

/* MPI: gpumem's own (a build with MPI), or mpi4py's, which a build
   without MPI runs its jobs over (py-comm-net.c); MPI4PY_FOUND: Python's
   import system finds mpi4py.  FACTS is filled in from mpi4py in that
   case.  */
static PyObject *
mpi_section (gm_comm_facts *facts, bool mpi4py_found)
{
  const char *started_by = NULL, *fix = NULL, *through = NULL;
  bool available = facts->mpi_built || mpi4py_found;
  PyObject *d;

#ifndef GM_HAVE_MPI
  if (gmpy_comm_net_describe (facts) < 0)
    return NULL;
#endif
  if (facts->mpi_built)
    through = "gpumem's own MPI (configure --with-mpi)";
  else if (available)
    through = "mpi4py (this gpumem was built without MPI of its own)";
  if (facts->transport[0] != '\0')
    started_by = facts->mpi_joined
                 ? "mpi4py, imported before gpumem: gpumem joined it"
                 : "mpi4py, which gpumem imported (an MPI launcher "
                   "started this process)";
  else if (facts->mpi_in_use)
    started_by = facts->mpi_joined
                 ? "another library before gpumem (mpi4py, or the "
                   "application): gpumem joined it"
                 : "gpumem (an MPI launcher started this process)";
  if (!available)
    fix = "this gpumem was built without MPI of its own (as the binary "
          "wheel is) and runs jobs of several processes over mpi4py: "
          "pip install 'gpumem[mpi]', or build gpumem against the "
          "machine's MPI (configure --with-mpi; docs/mpi.md)";
  else if (!facts->mpi_in_use)
    fix = "MPI is not running: start the script under mpirun or srun "
          "(or set GPUMEM_MPI=1) for a job of several processes";
  d = PyDict_New ();
  if (d == NULL
      || set_bool (d, "available", available) < 0
      || set_text (d, "through", through) < 0
      || set_bool (d, "running", facts->mpi_in_use) < 0
      || set_text (d, "started_by", started_by) < 0
      || set_text (d, "library", facts->mpi_library) < 0
      || set_item (d, "standard",
                   facts->mpi_in_use || facts->mpi_built
                   ? PyUnicode_FromFormat ("%d.%d", facts->mpi_major,
                                           facts->mpi_minor)
                   : Py_NewRef (Py_None)) < 0
      || set_text (d, "path", facts->mpi_path) < 0
      || set_text (d, "thread_level", facts->thread_level) < 0
      || set_item (d, "rank", PyLong_FromLong (gm_comm_rank ())) < 0
      || set_item (d, "size", PyLong_FromLong (gm_comm_size ())) < 0
      || set_bool (d, "cuda_aware", facts->mpi_in_use
                                    && gm_comm_cuda_aware ()) < 0
      || set_text (d, "fix", fix) < 0)
    {
      Py_XDECREF (d);
      return NULL;
    }
  return d;
}

/* mpi4py as Python's import system finds it, without importing
   mpi4py.MPI (which starts MPI).  */
static PyObject *
mpi4py_section (void)
{
  PyObject *d = PyDict_New (), *util = NULL, *spec = NULL, *path = NULL;
  PyObject *metadata = NULL, *version = NULL, *modules;
  bool imported;

  if (d == NULL)
    return NULL;
  util = PyImport_ImportModule ("importlib.util");
  if (util == NULL)
    goto fail;
  spec = PyObject_CallMethod (util, "find_spec", "s", "mpi4py");
  if (spec == NULL)
    goto fail;
  if (spec != Py_None)
    {
      PyObject *origin = PyObject_GetAttrString (spec, "origin");
      if (origin == NULL)
        goto fail;
      path = origin;
      metadata = PyImport_ImportModule ("importlib.metadata");
      if (metadata == NULL)
        goto fail;
      version = PyObject_CallMethod (metadata, "version", "s", "mpi4py");
      if (version == NULL)
        {
          /* Importable without its distribution's metadata.  */
          PyErr_Clear ();
          version = Py_NewRef (Py_None);
        }
    }
  modules = PySys_GetObject ("modules");
  imported = modules != NULL && PyDict_Check (modules)
             && PyDict_GetItemString (modules, "mpi4py.MPI") != NULL;
  if (set_bool (d, "available", spec != Py_None) < 0
      || set_bool (d, "imported", imported) < 0
      || PyDict_SetItemString (d, "version",
                               version != NULL ? version : Py_None) < 0
      || PyDict_SetItemString (d, "path", path != NULL ? path : Py_None) < 0
      || set_text (d, "fix", spec != Py_None ? NULL
                   : built_with_mpi
                   ? "pip install mpi4py (optional: gpumem.comm needs no "
                     "mpi4py; with it a script's own MPI calls share "
                     "gpumem's MPI)"
                   : "pip install 'gpumem[mpi]' (mpi4py): this gpumem "
                     "runs jobs of several processes over it") < 0)
    goto fail;
  Py_DECREF (util);
  Py_DECREF (spec);
  Py_XDECREF (path);
  Py_XDECREF (metadata);
  Py_XDECREF (version);
  return d;
fail:
  Py_XDECREF (util);
  Py_XDECREF (spec);
  Py_XDECREF (path);
  Py_XDECREF (metadata);
  Py_XDECREF (version);
  Py_DECREF (d);
  return NULL;
}

/* The whole report as a dict; a new reference, or NULL.  */
static PyObject *
config_dict (void)
{
  gm_comm_facts facts;
  PyObject *d = PyDict_New (), *mpi4py = mpi4py_section ();
  int failed;

  gm_comm_facts_get (&facts);
  failed = d == NULL || mpi4py == NULL
           || set_item (d, "gpumem", build_section ()) < 0
           || set_item (d, "backend", backend_section ()) < 0
           || set_item (d, "devices", devices_section ()) < 0
           || set_item (d, "nvrtc", nvrtc_section ()) < 0
           || set_item (d, "nccl", nccl_section (&facts)) < 0
           || set_item (d, "mpi", mpi_section (
                &facts, PyDict_GetItemString (mpi4py, "available")
                        == Py_True)) < 0
           || PyDict_SetItemString (d, "mpi4py", mpi4py) < 0;
  Py_XDECREF (mpi4py);
  if (failed)
    {
      Py_XDECREF (d);
      return NULL;
    }
  return d;
}

/* Appends VALUE to the text OUT, as the text of a value: yes or no,
   none, a list's items joined by ", ", or str ().  0 or -1.  */
static int
append_scalar (PyObject *out, PyObject *value)
{
  PyObject *text;
  int rc;

  if (value == Py_True || value == Py_False)
    text = PyUnicode_FromString (value == Py_True ? "yes" : "no");
  else if (value == Py_None)
    text = PyUnicode_FromString ("none");
  else if (PyList_Check (value))
    {
      PyObject *sep = PyUnicode_FromString (", "), *items;

      if (sep == NULL)
        return -1;
      items = PyList_New (0);
      for (Py_ssize_t i = 0; items != NULL && i < PyList_GET_SIZE (value);
           i++)
        {
          PyObject *item = PyObject_Str (PyList_GET_ITEM (value, i));
          if (item == NULL || PyList_Append (items, item) < 0)
            Py_CLEAR (items);
          Py_XDECREF (item);
        }
      text = items != NULL && PyList_GET_SIZE (items) == 0
             ? PyUnicode_FromString ("none")
             : items != NULL ? PyUnicode_Join (sep, items) : NULL;
      Py_DECREF (sep);
      Py_XDECREF (items);
    }
  else
    text = PyObject_Str (value);
  if (text == NULL)
    return -1;
  rc = PyList_Append (out, text);
  Py_DECREF (text);
  return rc;
}

/* Appends the lines of section NAME (a dict, or the list of devices) to
   OUT, a list of strings.  0 or -1.  */
static int
append_section (PyObject *out, const char *name, PyObject *section)
{
  PyObject *key, *value, *line;
  Py_ssize_t pos = 0;

  line = PyUnicode_FromFormat ("%s:\n", name);
  if (line == NULL || PyList_Append (out, line) < 0)
    {
      Py_XDECREF (line);
      return -1;
    }
  Py_DECREF (line);
  if (PyList_Check (section))
    {
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE (section); i++)
        {
          PyObject *entry = PyList_GET_ITEM (section, i);
          PyObject *title = PyUnicode_FromFormat (
            "  device %S", PyDict_GetItemString (entry, "index"));
          int rc;

          if (title == NULL)
            return -1;
          rc = append_section (out, PyUnicode_AsUTF8 (title), entry);
          Py_DECREF (title);
          if (rc < 0)
            return -1;
        }
      return 0;
    }
  while (PyDict_Next (section, &pos, &key, &value))
    {
      const char *indent = name[0] == ' ' ? "    " : "  ";

      /* Nothing missing: no fix to print.  */
      if (value == Py_None
          && PyUnicode_CompareWithASCIIString (key, "fix") == 0)
        continue;
      line = PyUnicode_FromFormat ("%s%U: ", indent, key);
      if (line == NULL || PyList_Append (out, line) < 0
          || append_scalar (out, value) < 0)
        {
          Py_XDECREF (line);
          return -1;
        }
      Py_DECREF (line);
      line = PyUnicode_FromString ("\n");
      if (line == NULL || PyList_Append (out, line) < 0)
        {
          Py_XDECREF (line);
          return -1;
        }
      Py_DECREF (line);
    }
  return 0;
}

/* The report's text, made from CONFIG; a new reference, or NULL.  */
static PyObject *
config_text (PyObject *config)
{
  PyObject *out = PyList_New (0), *key, *value, *empty, *text;
  Py_ssize_t pos = 0;

  if (out == NULL)
    return NULL;
  while (PyDict_Next (config, &pos, &key, &value))
    if (append_section (out, PyUnicode_AsUTF8 (key), value) < 0)
      {
        Py_DECREF (out);
        return NULL;
      }
  empty = PyUnicode_FromString ("");
  text = empty != NULL ? PyUnicode_Join (empty, out) : NULL;
  Py_XDECREF (empty);
  Py_DECREF (out);
  return text;
}

/* gpumem.show_config (as_dict=False): prints the report to sys.stdout
   and returns None, or returns it as a dict.  New reference, or NULL
   (TypeError for an AS_DICT that is not a bool; a backend's error).  */
static PyObject *
gmpy_show_config (PyObject *self, PyObject *args, PyObject *kwargs)
{
  static char *names[] = {"as_dict", NULL};
  int as_dict = 0;
  PyObject *config, *text, *out, *written;

  if (!PyArg_ParseTupleAndKeywords (args, kwargs, "|$p:show_config", names,
                                    &as_dict))
    return NULL;
  config = config_dict ();
  if (config == NULL || as_dict)
    return config;
  text = config_text (config);
  Py_DECREF (config);
  if (text == NULL)
    return NULL;
  out = PySys_GetObject ("stdout");
  if (out == NULL || out == Py_None)
    {
      Py_DECREF (text);
      PyErr_SetString (PyExc_RuntimeError, "show_config: sys.stdout is "
                       "not set");
      return NULL;
    }
  written = PyObject_CallMethod (out, "write", "O", text);
  Py_DECREF (text);
  if (written == NULL)
    return NULL;
  Py_DECREF (written);
  Py_RETURN_NONE;
}

PyMethodDef gmpy_config_methods[] = {
  {"show_config", (PyCFunction) (void (*) (void)) gmpy_show_config,
   METH_VARARGS | METH_KEYWORDS,
   "show_config(*, as_dict=False)\n--\n\n"
   "What this gpumem was built with and found here: its version and\n"
   "configure's findings, the backend and why it was chosen, the CUDA\n"
   "driver and runtime, each device's pools, sharing (ipc), managed\n"
   "memory and peers, NVRTC, NCCL, MPI and mpi4py with the file each was\n"
   "loaded from, and for each thing missing how to get it ('fix').\n"
   "Prints it as text; as_dict=True returns it as a dict of plain values\n"
   "instead (json.dumps writes it; gpumem --config=json does)."},
  {NULL, NULL, 0, NULL}
};
