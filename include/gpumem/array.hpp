/* gpumem/array.hpp -- gpumem::array<T>, device memory taken from a
   Python object through gpumem's C API (gpumem/extension.h), for C++
   bindings.  Plain C++17 over extension.h: gpumem/pybind11.h and
   gpumem/nanobind.h wrap it as a type caster; docs/cpp-bindings.md is
   the guide.

     gpumem::array<const float>                 any layout, read-only use
     gpumem::array<float, 1>                    one dimension, writable
     gpumem::array<float, 2, gpumem::c_contig>  C-contiguous 2-d

   T gives the dtype (float -> float32, ...); const T accepts read-only
   arrays, T refuses them.  NDIM (any_ndim: any) and LAYOUT (strided:
   walk shape() and stride(); c_contig: a bare pointer and size() will
   do) are checked when the object is loaded.  An array holds a
   reference to what keeps the memory alive (RAII): the memory stays
   while the array lives, inside or beyond the call.  Create, copy and
   destroy arrays with the GIL held.  */

#ifndef GPUMEM_ARRAY_HPP
#define GPUMEM_ARRAY_HPP

#include <gpumem/extension.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace gpumem
{

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

/* dtype<T>::name: NumPy's name of T's dtype, as gm_buffer.dtype has it.  */
template <class T> struct dtype;
#define GPUMEM_DTYPE(type, text)                                           \
  template <> struct dtype<type>                                          \
  {                                                                       \
    static constexpr char name[] = text;                                  \
  };
GPUMEM_DTYPE (bool, "bool")
GPUMEM_DTYPE (std::int8_t, "int8")
GPUMEM_DTYPE (std::int16_t, "int16")
GPUMEM_DTYPE (std::int32_t, "int32")
GPUMEM_DTYPE (std::int64_t, "int64")
GPUMEM_DTYPE (std::uint8_t, "uint8")
GPUMEM_DTYPE (std::uint16_t, "uint16")
GPUMEM_DTYPE (std::uint32_t, "uint32")
GPUMEM_DTYPE (std::uint64_t, "uint64")
GPUMEM_DTYPE (float, "float32")
GPUMEM_DTYPE (double, "float64")
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

/* The readable name of a parameter type, as help () shows it:
   "gpumem.DeviceArray[const float32, ndim=2, c_contig]".  */
inline std::string
type_text (const char *dtype, bool writable, int ndim, unsigned layout)
{
  std::string text = "gpumem.DeviceArray[";
  if (!writable)
    text += "const ";
  text += dtype;
  if (ndim >= 0)
    text += ", ndim=" + std::to_string (ndim);
  if (layout & c_contig)
    text += ", c_contig";
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
      bool writable, int ndim, unsigned layout)
{
  const gm_c_api_table *table = api ();
  const char *type;

  *stream = nullptr;
  if (table == nullptr || table->get_buffer (obj, buf) < 0)
    return -1;
  type = buf->dtype;
  if (std::strcmp (type, dtype) != 0)
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
                     "view (copy it first, or declare the parameter "
                     "gpumem::strided and walk its strides)");
  else if (buf->stream != nullptr)
    *stream = buf->stream;
  else if (GM_C_API_HAS (table, current_stream)
           && table->current_stream (buf->device, stream) < 0)
    ;
  else
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
template <class T, int NDIM = any_ndim, unsigned LAYOUT = strided>
class array
{
public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  static constexpr const char *dtype_name = dtype<value_type>::name;
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
    if (detail::load (obj, &buf_, &stream_, dtype_name, writable, NDIM,
                      LAYOUT) < 0)
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
  /* The cudaStream_t to launch on, so that the launch follows gpumem's
     pending work on the memory: that work's stream, else the caller's
     current one (a `with stream:` block's).  NULL is the default stream:
     synchronize before returning to Python then, as gpumem calls without
     stream= are complete on return.  */
  void *stream () const noexcept { return stream_; }
  /* Element I along the first dimension, through its stride: the
     address of a 1-d array's I-th element.  */
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
    std::memcpy (buf_.shape, from.shape, (size_t) from.ndim * sizeof *from.shape);
    std::memcpy (buf_.strides, from.strides,
                 (size_t) from.ndim * sizeof *from.strides);
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

} // namespace gpumem

#endif /* GPUMEM_ARRAY_HPP */
