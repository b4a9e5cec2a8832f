/* py-copy.c -- the module's copy functions: copy, copy_to_gpu and
   copy_from_gpu.  They read their arguments (DeviceArrays, CUDA Array
   Interface objects, host arrays), ask where the call goes
   (gmpy_dispatch_get) and hand the bytes to the copy engine
   (py-copy-engine.c), which checks the copy itself.  */

#include "gm-python.h"

PyObject *
gmpy_copy_to_gpu (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                  PyObject *kwnames)
{
  static const char *const names[] = {"src", "dest", "size", NULL};
  PyObject *arg[3];
  gmpy_devbuf dest;
  gmpy_dispatch d;
  Py_ssize_t size;
  int found;

  if (gmpy_parse_args (args, nargs, kwnames, "copy_to_gpu", names, 3, -1, arg)
      < 0
      || gmpy_array_prepare (arg, 2) < 0)
    return NULL;
  found = gmpy_devbuf_get (arg[1], &dest, "dest");
  if (found < 0)
    return NULL;
  if (found == 0)
    {
      PyErr_Format (PyExc_TypeError, "copy_to_gpu: dest must be a "
                    "DeviceArray, not %.100s",
                    GMPY_TYPE_NAME (Py_TYPE (arg[1])));
      return NULL;
    }
  if (gmpy_array_check (arg[0]))
    {
      PyErr_SetString (PyExc_TypeError, "copy_to_gpu: src is a DeviceArray; "
                       "copy_to_gpu copies from host memory: use "
                       "gpumem.copy(dest, src, size) between device arrays");
      return NULL;
    }
  /* No stream=, and no `with stream:` block's stream (device -1).  */
  if (gmpy_size_arg (arg[2], "size", &size) < 0
      || gmpy_dispatch_get (NULL, -1, &d) < 0
      || gmpy_copy_host_to_device (&dest, arg[0], size, &d, "copy_to_gpu")
           < 0)
    return NULL;
  Py_RETURN_NONE;
}

PyObject *
gmpy_copy_from_gpu (PyObject *module, PyObject *const *args,
                    Py_ssize_t nargs, PyObject *kwnames)
{
  static const char *const names[] = {"src", "dest", "size", NULL};
  PyObject *arg[3];
  gmpy_devbuf src;
  gmpy_dispatch d;
  Py_ssize_t size;
  int found;

  if (gmpy_parse_args (args, nargs, kwnames, "copy_from_gpu", names, 3, -1,
                       arg) < 0
      || gmpy_array_prepare (arg, 2) < 0)
    return NULL;
  found = gmpy_devbuf_get_read (arg[0], &src, "src");
  if (found < 0)
    return NULL;
  if (found == 0)
    {
      PyErr_Format (PyExc_TypeError, "copy_from_gpu: src must be a "
                    "DeviceArray, not %.100s",
                    GMPY_TYPE_NAME (Py_TYPE (arg[0])));
      return NULL;
    }
  if (gmpy_array_check (arg[1]))
    {
      PyErr_SetString (PyExc_TypeError, "copy_from_gpu: dest is a "
                       "DeviceArray; copy_from_gpu copies into host memory: "
                       "use gpumem.copy(dest, src, size) between device "
                       "arrays");
      return NULL;
    }
  if (gmpy_size_arg (arg[2], "size", &size) < 0
      || gmpy_dispatch_get (NULL, -1, &d) < 0
      || gmpy_copy_device_to_host (arg[1], &src, size, &d,
                                   "copy_from_gpu: dest")
           < 0)
    return NULL;
  Py_RETURN_NONE;
}

PyObject *
gmpy_copy (PyObject *module, PyObject *const *args, Py_ssize_t nargs,
           PyObject *kwnames)
{
  static const char *const names[] = {"dst", "src", "count", "stream", NULL};
  PyObject *arg[4];
  gmpy_devbuf dst, src;
  gmpy_dispatch d;
  streampy_object *stream;
  Py_ssize_t count = -1;
  int dst_dev, src_dev;

  if (gmpy_parse_args (args, nargs, kwnames, "copy", names, 2, -1, arg) < 0
      || gmpy_array_prepare (arg, 2) < 0)
    return NULL;
  /* Strided views take the paths of py-array-copy.c.  */
  switch (gmpy_copy_strided (arg[0], arg[1], arg[2], arg[3]))
    {
    case -1: return NULL;
    case 1: Py_RETURN_NONE;
    }
  dst_dev = gmpy_devbuf_get (arg[0], &dst, "dst");
  if (dst_dev < 0)
    return NULL;
  src_dev = gmpy_devbuf_get_read (arg[1], &src, "src");
  if (src_dev < 0)
    return NULL;
  if (arg[2] != NULL && arg[2] != Py_None
      && gmpy_size_arg (arg[2], "count", &count) < 0)
    return NULL;
  /* Without stream=: the current stream of the destination's device
     (else the source's), when a with block set one.  */
  if (gmpy_dispatch_any_device (arg[3], dst_dev ? dst.device
                                        : src_dev ? src.device : -1, &d) < 0)
    return NULL;
  stream = (streampy_object *) d.stream_obj;

  if (dst_dev && src_dev)
    {
      if (gmpy_copy_device_to_device (&dst, &src, count, &d) < 0)
        return NULL;
      gmpy_array_note_stream (arg[0], &d);
      Py_RETURN_NONE;
    }
  if (dst_dev)
    {
      if (stream != NULL && stream->device != dst.device)
        {
          PyErr_SetString (PyExc_ValueError, "copy: the stream is not on the "
                                             "destination's device");
          return NULL;
        }
      /* COUNT < 0: all of the source, counted where it is read (one
         look at the source, not two).  */
      if (gmpy_copy_host_to_device (&dst, arg[1], count, &d, "copy") < 0)
        return NULL;
      gmpy_array_note_stream (arg[0], &d);
      Py_RETURN_NONE;
    }
  if (src_dev)
    {
      if (stream != NULL && stream->device != src.device)
        {
          PyErr_SetString (PyExc_ValueError, "copy: the stream is not on the "
                                             "source's device");
          return NULL;
        }
      if (gmpy_copy_device_to_host (arg[0], &src, count, &d, "copy") < 0)
        return NULL;
      Py_RETURN_NONE;
    }
  PyErr_Format (PyExc_TypeError, "copy: neither dst (%.100s) nor src "
                "(%.100s) is device memory; use numpy.copyto for host copies",
                GMPY_TYPE_NAME (Py_TYPE (arg[0])),
                GMPY_TYPE_NAME (Py_TYPE (arg[1])));
  return NULL;
}
