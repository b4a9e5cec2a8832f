/* gpumem/array.hpp -- gpumem::array<T>, device memory taken from a
   Python object through gpumem's C API (gpumem/extension.h), for C++
   bindings.  Plain C++17 over extension.h: gpumem/pybind11.h and
   gpumem/nanobind.h wrap it as a type caster; docs/cpp-bindings.md is
   the guide.

     gpumem::array<const float>                 C-contiguous, read-only use
     gpumem::array<float, 1>                    one dimension, writable
     gpumem::array<float, 2, gpumem::strided>   any 2-d view: walk strides

   T gives the dtype (float -> float32, ...); const T accepts read-only
   arrays, T refuses them.  NDIM (any_ndim: any) and LAYOUT are checked
   when the object is loaded.  The default layout, c_contig, refuses a
   strided or reversed view with an error that names the fix, so that
   data () and size () are always a bare pointer and its length, as a
   kernel written for a pointer reads them; gpumem::strided, spelled
   out, takes any view: walk shape () and stride () from data (), the
   address of element 0.  An array holds a reference to what keeps the
   memory alive (RAII): the memory stays while the array lives, inside
   or beyond the call.  Create, copy and destroy arrays with the GIL
   held.

   Streams: gpumem::launch_stream (a, b, c) (gpumem/pybind11.h,
   gpumem/nanobind.h) is the stream to launch on for several arrays,
   made to wait for every argument's pending work; gpumem::launch_done
   after the launch makes a call outside a `with stream:` block complete
   on return.  */

#ifndef GPUMEM_ARRAY_HPP
#define GPUMEM_ARRAY_HPP

#include <gpumem/extension.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

/* CUDA's stream type, cudaStream_t, is a pointer to this struct: a
   stream_t is a cudaStream_t whether or not CUDA's headers are
   included, before or after this one.  */
struct CUstream_st;

namespace gpumem
{

/* A CUDA stream: the same type as cudaStream_t.  nullptr is CUDA's
   legacy default stream.  */
using stream_t = CUstream_st *;

/* The layouts a parameter may ask for.  */
enum layout : unsigned
{
  strided = 0,                  /* any strides: walk shape () and stride () */
  c_contig = 1                  /* C-contiguous: data () .. data () + size () */
};

constexpr int any_ndim = -1;

/* DLPack's device types as gm_buffer.device_type has them.  */
constexpr int device_cuda = 2;
constexpr int device_host = 1;

/* dtype<T>::name: NumPy's name of T's dtype, as gm_buffer.dtype has it;
   dtype<T>::typestr: the array interface's, as gm_buffer.typestr has
   it (little-endian, as every platform CUDA runs on).  */
template <class T> struct dtype;
#define GPUMEM_DTYPE(type, text, type_text)                                \
  template <> struct dtype<type>                                          \
  {                                                                       \
    static constexpr char name[] = text;                                  \
    static constexpr char typestr[4] = type_text;                         \
  };
GPUMEM_DTYPE (bool, "bool", "|b1")
GPUMEM_DTYPE (std::int8_t, "int8", "|i1")
GPUMEM_DTYPE (std::int16_t, "int16", "<i2")
GPUMEM_DTYPE (std::int32_t, "int32", "<i4")
GPUMEM_DTYPE (std::int64_t, "int64", "<i8")
GPUMEM_DTYPE (std::uint8_t, "uint8", "|u1")
GPUMEM_DTYPE (std::uint16_t, "uint16", "<u2")
GPUMEM_DTYPE (std::uint32_t, "uint32", "<u4")
GPUMEM_DTYPE (std::uint64_t, "uint64", "<u8")
GPUMEM_DTYPE (float, "float32", "<f4")
GPUMEM_DTYPE (double, "float64", "<f8")
#undef GPUMEM_DTYPE

namespace detail
{

/* gpumem's table, imported at first use.  The table or NULL with
   ImportError set (not running under gpumem, another ABI).  */
inline const gm_c_api_table *
api ()
{
  if (gm_c_api == nullptr && gm_import_c_api () < 0)
    return nullptr;
  return gm_c_api;
}

/* Copies N entries of a shape or strides: up to four without a call, as
   an argument is moved into the bound function (a loop would become a
   library call there).  */
inline void
copy_dims (std::int64_t *to, const std::int64_t *from, int n) noexcept
{
  switch (n)
    {
    case 4:
      to[3] = from[3];
      [[fallthrough]];
    case 3:
      to[2] = from[2];
      [[fallthrough]];
    case 2:
      to[1] = from[1];
      [[fallthrough]];
    case 1:
      to[0] = from[0];
      [[fallthrough]];
    case 0:
      break;
    default:
      std::memcpy (to, from, sizeof *to * (std::size_t) n);
    }
}

/* The readable name of a parameter type, as help () shows it:
   "gpumem.DeviceArray[const float32, ndim=2]" (C-contiguous, the
   default), "gpumem.DeviceArray[float32, strided]".  */
inline std::string
type_text (const char *dtype, bool writable, int ndim, unsigned layout)
{
  std::string text = "gpumem.DeviceArray[";
  if (!writable)
    text += "const ";
  text += dtype;
  if (ndim >= 0)
    text += ", ndim=" + std::to_string (ndim);
  if (!(layout & c_contig))
    text += ", strided";
  return text + "]";
}

/* Fills *BUF from OBJ (anything get_buffer takes) and checks it against
   the parameter: DTYPE, WRITABLE, NDIM (any_ndim: any), LAYOUT.  *STREAM
   is the stream to launch on: the memory's pending stream, else the
   current one (current_stream).  0 with BUF->owner a new reference, or
   -1 with BUF->owner NULL and a Python exception set: get_buffer's
   (TypeError: no device memory; ValueError: freed, ...), TypeError for
   a dtype that is not DTYPE, ValueError for a read-only array where
   WRITABLE, another ndim, or strides where LAYOUT is c_contig.  */
inline int
load (PyObject *obj, gm_buffer *buf, void **stream, const char *dtype,
      const char *typestr, bool writable, int ndim, unsigned layout)
{
  const gm_c_api_table *table = api ();
  const char *type;

  *stream = nullptr;
  if (table == nullptr)
    return -1;
  if (GM_C_API_HAS (table, load_buffer))
    {
      if (table->load_buffer (obj, buf, stream) < 0)
        return -1;
    }
  else if (table->get_buffer (obj, buf) < 0)
    return -1;
  type = buf->dtype;
  /* Four bytes compared at once: typestr and its NUL.  */
  std::uint32_t got, want;
  std::memcpy (&got, buf->typestr, sizeof got);
  std::memcpy (&want, typestr, sizeof want);
  if (got != want && std::strcmp (type, dtype) != 0)
    PyErr_Format (PyExc_TypeError, "must hold %s elements, not %s", dtype,
                  type);
  else if (writable && buf->readonly)
    PyErr_SetString (PyExc_ValueError, "is written here but the array is "
                     "read-only (declare the parameter const T to take "
                     "read-only arrays)");
  else if (ndim >= 0 && buf->ndim != ndim)
    PyErr_Format (PyExc_ValueError, "must have %d dimension%s, not %d", ndim,
                  ndim == 1 ? "" : "s", buf->ndim);
  else if ((layout & c_contig) && !gm_buffer_is_contiguous (buf))
    PyErr_SetString (PyExc_ValueError, "must be C-contiguous, not a strided "
                     "or reversed view, so that data () and size () are a "
                     "bare pointer and its length (pass a copy: x.copy (); "
                     "or declare the parameter gpumem::array<T, NDIM, "
                     "gpumem::strided> and walk its strides)");
  else if (GM_C_API_HAS (table, load_buffer))
    return 0;
  else if (buf->stream != nullptr)
    {
      *stream = buf->stream;
      return 0;
    }
  else if (!GM_C_API_HAS (table, current_stream)
           || table->current_stream (buf->device, stream) == 0)
    return 0;
  Py_CLEAR (buf->owner);
  return -1;
}

/* Puts WHAT (the parameter: its type) and ": " before the message of
   the Python exception that is set, keeping its type.  */
inline void
name_error (const std::string &what)
{
  PyObject *type, *value, *traceback, *text;

  PyErr_Fetch (&type, &value, &traceback);
  PyErr_NormalizeException (&type, &value, &traceback);
  text = value != nullptr ? PyObject_Str (value) : nullptr;
  if (text != nullptr)
    {
      const char *message = PyUnicode_AsUTF8 (text);
      if (message != nullptr)
        {
          PyErr_Format (type, "%s: %s", what.c_str (), message);
          Py_DECREF (text);
          Py_XDECREF (type);
          Py_XDECREF (value);
          Py_XDECREF (traceback);
          return;
        }
      Py_DECREF (text);
    }
  PyErr_Restore (type, value, traceback);
}

/* The Python exception that is set, as a new reference to the exception
   object (traceback attached); none is set after.  */
inline PyObject *
take_error ()
{
  PyObject *type, *value, *traceback;

  PyErr_Fetch (&type, &value, &traceback);
  PyErr_NormalizeException (&type, &value, &traceback);
  if (traceback != nullptr && value != nullptr)
    PyException_SetTraceback (value, traceback);
  Py_XDECREF (type);
  Py_XDECREF (traceback);
  return value;
}

/* Sets ERROR (from take_error, whose reference it takes) as the Python
   exception.  */
inline void
restore_error (PyObject *error)
{
  PyObject *type = (PyObject *) Py_TYPE (error);

  Py_INCREF (type);
  PyErr_Restore (type, error, PyException_GetTraceback (error));
}

} // namespace detail

/* Device memory of element type T (const T: read-only use), NDIM
   dimensions (any_ndim: any) in LAYOUT, holding a reference to its
   Python owner.  */
template <class T, int NDIM = any_ndim, unsigned LAYOUT = c_contig>
class array
{
public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  static constexpr const char *dtype_name = dtype<value_type>::name;
  static constexpr const char *dtype_typestr = dtype<value_type>::typestr;
  static constexpr bool writable = !std::is_const<T>::value;
  static constexpr int required_ndim = NDIM;
  static constexpr unsigned required_layout = LAYOUT;

  array () noexcept { clear (); }
  array (const array &other) noexcept
  {
    take (other);
    Py_XINCREF (buf_.owner);
  }
  array (array &&other) noexcept
  {
    take (other);
    other.clear ();
  }
  array &operator= (const array &other) noexcept
  {
    if (this != &other)
      {
        PyObject *old = buf_.owner;
        take (other);
        Py_XINCREF (buf_.owner);
        Py_XDECREF (old);
      }
    return *this;
  }
  array &operator= (array &&other) noexcept
  {
    if (this != &other)
      {
        PyObject *old = buf_.owner;
        take (other);
        other.clear ();
        Py_XDECREF (old);
      }
    return *this;
  }
  ~array () { Py_XDECREF (buf_.owner); }

  /* Takes OBJ's memory after the parameter's checks (detail::load).  0,
     or -1 with a Python exception set and *this empty.  Loads in place:
     a caster calls it once an argument, and a gm_buffer is large.  */
  int load (PyObject *obj)
  {
    Py_CLEAR (buf_.owner);
    if (detail::load (obj, &buf_, &stream_, dtype_name, dtype_typestr,
                      writable, NDIM, LAYOUT) < 0)
      {
        clear ();
        return -1;
      }
    return 0;
  }

  /* Makes *this a new uninitialized C-contiguous gpumem.DeviceArray of
     SHAPE (NDIM of its dimensions) on DEVICE (-1: the current one).  0,
     or -1 with a Python exception (ValueError, OutOfMemoryError,
     RuntimeError from a gpumem without new_array).  */
  int allocate (int ndim, const std::int64_t *shape, int device = -1)
  {
    const gm_c_api_table *table = detail::api ();
    array made;
    if (table == nullptr)
      return -1;
    if (!GM_C_API_HAS (table, new_array))
      {
        PyErr_Format (PyExc_RuntimeError, "gpumem %s has no new_array in "
                      "its C API", table->version);
        return -1;
      }
    if (NDIM >= 0 && ndim != NDIM)
      {
        PyErr_Format (PyExc_ValueError, "gpumem::array of %d dimensions "
                      "allocated with %d", NDIM, ndim);
        return -1;
      }
    if (table->new_array (ndim, shape, dtype_name, device, &made.buf_) < 0)
      return -1;
    if (GM_C_API_HAS (table, current_stream)
        && table->current_stream (made.buf_.device, &made.stream_) < 0)
      return -1;
    *this = std::move (made);
    return 0;
  }

  explicit operator bool () const noexcept { return buf_.owner != nullptr; }
  /* The address of element 0: with the default layout (c_contig) the
     elements are data () [0] to data () [size () - 1]; with
     gpumem::strided, walk stride (i) from it.  */
  T *data () const noexcept { return static_cast<T *> (buf_.ptr); }
  int ndim () const noexcept { return buf_.ndim; }
  std::int64_t shape (int i) const noexcept { return buf_.shape[i]; }
  /* Strides in elements (stride_bytes: in bytes), negative for a
     reversed view.  */
  std::int64_t stride (int i) const noexcept
  {
    return buf_.strides[i] / buf_.itemsize;
  }
  std::int64_t stride_bytes (int i) const noexcept { return buf_.strides[i]; }
  std::int64_t size () const noexcept { return buf_.size; }
  bool contiguous () const noexcept { return gm_buffer_is_contiguous (&buf_); }
  int device () const noexcept { return buf_.device; }
  /* Whether the memory is host memory (the host backend's): a CPU path
     must run then, as no kernel can.  */
  bool on_host () const noexcept { return buf_.device_type == device_host; }
  /* The cudaStream_t to launch on for this array alone: the stream of
     gpumem's pending work on the memory, else the caller's current one
     (a `with stream:` block's, gpumem.concurrent ()'s), else NULL, the
     default stream.  With several arrays use gpumem::launch_stream,
     which orders the launch after every argument's pending work.  */
  stream_t stream () const noexcept
  {
    return static_cast<stream_t> (stream_);
  }
  /* The stream whose work writing the memory is still pending (gpumem's
     stream, or for another library's tensor its current work stream),
     or NULL when none is.  */
  stream_t pending () const noexcept
  {
    return static_cast<stream_t> (buf_.stream);
  }
  /* A pointer to element I along the first dimension, through its stride
     (a 1-d array's I-th element), for any layout.  */
  T *at (std::int64_t i) const noexcept
  {
    return reinterpret_cast<T *> (static_cast<char *> (buf_.ptr)
                                  + i * buf_.strides[0]);
  }
  const gm_buffer &buffer () const noexcept { return buf_; }
  /* The Python object that keeps the memory alive (borrowed); for an
     array from allocate, the new DeviceArray.  */
  PyObject *object () const noexcept { return buf_.owner; }
  /* That object as a new reference; *this is empty after.  */
  PyObject *release () noexcept
  {
    PyObject *owner = buf_.owner;
    buf_.owner = nullptr;
    return owner;
  }

  /* The type as help () shows it.  */
  static std::string type_text ()
  {
    return detail::type_text (dtype_name, writable, NDIM, LAYOUT);
  }

private:
  /* Empty: no memory, no owner.  */
  void clear () noexcept
  {
    buf_.ptr = nullptr;
    buf_.ndim = 0;
    buf_.dtype = dtype_name;
    buf_.itemsize = sizeof (value_type);
    buf_.size = 0;
    buf_.device_type = 0;
    buf_.device = -1;
    buf_.readonly = 0;
    buf_.stream = nullptr;
    buf_.owner = nullptr;
    buf_.typestr[0] = '\0';
    stream_ = nullptr;
  }
  /* OTHER's description, without its reference: the fields and the
     NDIM used entries of shape and strides, not the whole
     GM_BUFFER_MAX_NDIM of them.  */
  void take (const array &other) noexcept
  {
    const gm_buffer &from = other.buf_;
    buf_.ptr = from.ptr;
    buf_.ndim = from.ndim;
    detail::copy_dims (buf_.shape, from.shape, from.ndim);
    detail::copy_dims (buf_.strides, from.strides, from.ndim);
    buf_.dtype = from.dtype;
    std::memcpy (buf_.typestr, from.typestr, sizeof buf_.typestr);
    buf_.itemsize = from.itemsize;
    buf_.size = from.size;
    buf_.device_type = from.device_type;
    buf_.device = from.device;
    buf_.readonly = from.readonly;
    buf_.stream = from.stream;
    buf_.owner = from.owner;
    stream_ = other.stream_;
  }

  gm_buffer buf_;
  void *stream_ = nullptr;
};

namespace detail
{

/* The gpumem table with MEMBER, or NULL with an exception set
   (ImportError, or RuntimeError naming WHAT for an older gpumem).  */
#define GPUMEM_API_WITH(member, what)                                     \
  ([] () -> const gm_c_api_table * {                                      \
    const gm_c_api_table *table_ = api ();                                \
    if (table_ != nullptr && !GM_C_API_HAS (table_, member))              \
      {                                                                   \
        PyErr_Format (PyExc_RuntimeError, "gpumem %s has no %s in its "   \
                      "C API", table_->version, what);                    \
        table_ = nullptr;                                                 \
      }                                                                   \
    return table_;                                                        \
  }) ()

/* launch_stream's work over the N buffers BUFS: *OUT is the current
   stream of their device (NULL: the default stream), made to wait for
   each one's pending stream.  0, or -1 with a Python exception
   (ValueError: an empty array, arrays on two devices).  */
inline int
launch_stream (const gm_buffer *const *bufs, int n, stream_t *out)
{
  const gm_c_api_table *table = GPUMEM_API_WITH (stream_wait,
                                                 "launch_stream");
  void *target = nullptr;
  int device = -1;

  *out = nullptr;
  if (table == nullptr)
    return -1;
  for (int i = 0; i < n; i++)
    {
      if (bufs[i]->owner == nullptr)
        {
          PyErr_SetString (PyExc_ValueError, "gpumem::launch_stream: "
                           "argument is an empty gpumem::array");
          return -1;
        }
      if (device >= 0 && bufs[i]->device != device)
        {
          PyErr_Format (PyExc_ValueError, "gpumem::launch_stream: the "
                        "arrays are on devices %d and %d; one launch uses "
                        "one device", device, bufs[i]->device);
          return -1;
        }
      device = bufs[i]->device;
    }
  if (n == 0 || bufs[0]->device_type == device_host)
    return 0;
  if (table->current_stream (device, &target) < 0)
    return -1;
  for (int i = 0; i < n; i++)
    if (table->stream_wait (device, target, bufs[i]->stream) < 0)
      return -1;
  *out = static_cast<stream_t> (target);
  return 0;
}

/* launch_done's work: ends a launch on STREAM that wrote the N objects
   WRITTEN on DEVICE (-1: the current one).  0, or -1 with a Python
   exception.  */
inline int
launch_done (stream_t stream, int device, PyObject *const *written, int n)
{
  const gm_c_api_table *table = GPUMEM_API_WITH (launch_done,
                                                 "launch_done");
  if (table == nullptr)
    return -1;
  return table->launch_done (device, static_cast<void *> (stream), written,
                             n);
}

#undef GPUMEM_API_WITH

/* gpumem::launch_stream and launch_done over gpumem::array arguments,
   throwing ERROR (the binding library's exception for a pending Python
   error) where the C API call fails: gpumem/pybind11.h and
   gpumem/nanobind.h name theirs.  */
template <class Error, class... Arrays>
stream_t
launch_stream_or_throw (const Arrays &...arrays)
{
  static_assert (sizeof... (Arrays) > 0, "launch_stream takes the arrays");
  const gm_buffer *bufs[] = {&arrays.buffer ()...};
  stream_t stream;
  if (launch_stream (bufs, (int) sizeof... (Arrays), &stream) < 0)
    throw Error ();
  return stream;
}

template <class Error, class... Arrays>
void
launch_done_or_throw (stream_t stream, const Arrays &...written)
{
  PyObject *objects[] = {written.object ()..., nullptr};
  const gm_buffer *buffers[] = {&written.buffer ()..., nullptr};
  int device = buffers[0] != nullptr ? buffers[0]->device : -1;
  if (launch_done (stream, device, objects, (int) sizeof... (Arrays)) < 0)
    throw Error ();
}

} // namespace detail

} // namespace gpumem

#endif /* GPUMEM_ARRAY_HPP */
