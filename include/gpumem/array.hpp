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

   An array is a gm_view (gpumem/extension.h), loaded with the C API's
   load_view in one call.  Against an older gpumem of the same ABI,
   whose table has no load_view, it is loaded through load_buffer (or
   get_buffer) instead, and then holds up to GM_VIEW_NDIM dimensions
   itself: an argument of more raises RuntimeError naming gpumem's
   version; it needs gpumem 0.4 or later.

   Streams: gpumem::launch_stream (a, b, c) (gpumem/pybind11.h,
   gpumem/nanobind.h) is the stream to launch on for several arrays,
   made to wait for every argument's pending work; gpumem::launch_done
   after the launch makes a call outside a `with stream:` block complete
   on return.  */

#ifndef GPUMEM_ARRAY_HPP
#define GPUMEM_ARRAY_HPP

#include <gpumem/extension.h>

#include <cstddef>
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

/* Inlined even where a binding is built for size (nanobind builds with
   -Os): an argument's load and its move into the call are each fewer
   instructions than a call.  */
#if defined(__GNUC__)
#define GPUMEM_INLINE inline __attribute__ ((always_inline))
#else
#define GPUMEM_INLINE inline
#endif

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
GPUMEM_INLINE const gm_c_api_table *
api ()
{
  if (gm_c_api == nullptr && gm_import_c_api () < 0)
    return nullptr;
  return gm_c_api;
}

/* Copies the N bytes at FROM to TO in pieces of 32 at most, which every
   compiler makes plain moves of; building for size, GCC makes a longer
   copy a string instruction, a step a word.  */
template <std::size_t N>
GPUMEM_INLINE void
copy_bytes (void *to, const void *from) noexcept
{
  if constexpr (N > 32)
    {
      std::memcpy (to, from, 32);
      copy_bytes<N - 32> (static_cast<char *> (to) + 32,
                          static_cast<const char *> (from) + 32);
    }
  else
    std::memcpy (to, from, N);
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

/* The load_view flags of a parameter WRITABLE in LAYOUT.  */
constexpr unsigned
view_flags (bool writable, unsigned layout)
{
  return (writable ? GM_VIEW_WRITABLE : 0u)
         | ((layout & c_contig) ? GM_VIEW_C_CONTIG : 0u);
}

/* load_view's checks of BUF, for a gpumem whose TABLE has no
   load_view: DTYPE (NumPy's name), NDIM (any_ndim: any) and FLAGS
   (view_flags), with load_view's messages, and no more than
   GM_VIEW_NDIM dimensions.  0, or -1 with a Python exception
   (RuntimeError for more dimensions).  */
inline int
check_buffer (const gm_c_api_table *table, const gm_buffer &buf,
              const char *dtype, int ndim, unsigned flags)
{
  if (std::strcmp (buf.dtype, dtype) != 0)
    PyErr_Format (PyExc_TypeError, GM_VIEW_ERROR_DTYPE, dtype, buf.dtype);
  else if ((flags & GM_VIEW_WRITABLE) && buf.readonly)
    PyErr_SetString (PyExc_ValueError, GM_VIEW_ERROR_READONLY);
  else if (ndim >= 0 && buf.ndim != ndim)
    PyErr_Format (PyExc_ValueError, GM_VIEW_ERROR_NDIM, ndim,
                  ndim == 1 ? "" : "s", buf.ndim);
  else if ((flags & GM_VIEW_C_CONTIG) && !gm_buffer_is_contiguous (&buf))
    PyErr_SetString (PyExc_ValueError, GM_VIEW_ERROR_LAYOUT);
  else if (buf.ndim > GM_VIEW_NDIM)
    PyErr_Format (PyExc_RuntimeError, "gpumem %s has no load_view in its "
                  "C API, without which a gpumem::array holds up to %d "
                  "dimensions, not %d: upgrade gpumem (0.4 or later)",
                  table->version, GM_VIEW_NDIM, buf.ndim);
  else
    return 0;
  return -1;
}

/* load_view's work for a gpumem whose TABLE has none: OBJ through
   load_buffer (or get_buffer, the launch stream then BUF's pending one,
   else current_stream's) into a gm_buffer, check_buffer, then into
   *VIEW's own dims.  0, or -1 with VIEW->owner NULL and a Python
   exception.  */
inline int
load_through_buffer (const gm_c_api_table *table, PyObject *obj,
                     gm_view *view, const char *dtype, int ndim,
                     unsigned flags)
{
  gm_buffer buf;
  void *launch = nullptr;

  view->owner = nullptr;
  if (GM_C_API_HAS (table, load_buffer))
    {
      if (table->load_buffer (obj, &buf, &launch) < 0)
        return -1;
    }
  else if (table->get_buffer (obj, &buf) < 0)
    return -1;
  else
    launch = buf.stream;
  if (check_buffer (table, buf, dtype, ndim, flags) < 0
      || (launch == nullptr && !GM_C_API_HAS (table, load_buffer)
          && GM_C_API_HAS (table, current_stream)
          && table->current_stream (buf.device, &launch) < 0))
    {
      Py_CLEAR (buf.owner);
      return -1;
    }
  view->ptr = buf.ptr;
  view->owner = buf.owner;
  for (int i = 0; i < buf.ndim; i++)
    {
      view->dims[i] = buf.shape[i];
      view->dims[GM_VIEW_NDIM + i] = buf.strides[i];
    }
  view->shape = view->dims;
  view->strides = view->dims + GM_VIEW_NDIM;
  view->stream = buf.stream;
  view->launch = launch;
  view->size = buf.size;
  view->itemsize = buf.itemsize;
  view->ndim = buf.ndim;
  view->device = buf.device;
  view->device_type = buf.device_type;
  view->readonly = buf.readonly;
  view->dtype = buf.dtype;
  return 0;
}

/* Whether the DeviceArray OBJ's lent view (gm_lent, at TABLE's
   lent_offset) describes it now and passes the parameter's checks:
   TYPESTR (four bytes), NDIM (any_ndim: any) and FLAGS (view_flags).  */
GPUMEM_INLINE const gm_lent *
lent_view (const gm_c_api_table *table, PyObject *obj, const char *typestr,
           int ndim, unsigned flags) noexcept
{
  const gm_lent *lent = reinterpret_cast<const gm_lent *> (
      reinterpret_cast<const char *> (obj) + table->lent_offset);
  std::uint32_t got, want;
  std::memcpy (&got, lent->typestr, sizeof got);
  std::memcpy (&want, typestr, sizeof want);
  if (lent->usable && *table->launch_blocks == 0 && got == want
      && !((flags & GM_VIEW_WRITABLE) && lent->view.readonly)
      && (ndim < 0 || lent->view.ndim == ndim)
      && !((flags & GM_VIEW_C_CONTIG) && !lent->contiguous))
    return lent;
  return nullptr;
}

/* Fills *VIEW from OBJ (anything get_buffer takes), checked against the
   parameter: DTYPE (NumPy's name) and TYPESTR (the array interface's),
   NDIM (any_ndim: any), FLAGS (view_flags).  VIEW->launch is the stream
   to launch on: the memory's pending stream, else the current one.  0
   with VIEW->owner a new reference and *HOLD a hold on gpumem's memory
   (NULL: other memory, or a gpumem without holds), or -1 with
   VIEW->owner NULL and a Python exception: the C API's load_view's
   (gpumem/extension.h), or load_through_buffer's against an older
   gpumem.  */
GPUMEM_INLINE int
load (PyObject *obj, gm_view *view, gm_hold **hold, const char *dtype,
      const char *typestr, int ndim, unsigned flags)
{
  const gm_c_api_table *table = api ();
  const gm_lent *lent;

  if (table == nullptr)
    {
      view->owner = nullptr;
      return -1;
    }
  /* A DeviceArray that lends its view, the common case: read in place,
     no call.  */
  if (GM_C_API_HAS (table, launch_blocks) && obj != nullptr
      && Py_TYPE (obj) == table->array_type
      && (lent = lent_view (table, obj, typestr, ndim, flags)) != nullptr)
    {
      copy_bytes<offsetof (gm_view, dims)> (view, &lent->view);
      Py_INCREF (obj);
      view->owner = obj;
      if (GM_C_API_HAS (table, hold_gone))
        {
          gm_hold_take (lent->hold);
          *hold = lent->hold;
        }
      return 0;
    }
  if (GM_C_API_HAS (table, load_view))
    {
      if (table->load_view (obj, view, typestr, ndim, flags) < 0)
        return -1;
      if (GM_C_API_HAS (table, hold_gone))
        *hold = table->hold (view->owner);
      return 0;
    }
  return load_through_buffer (table, obj, view, dtype, ndim, flags);
}

/* The name help () shows for a caster of gpumem::array<T, NDIM, LAYOUT>
   ("gpumem.DeviceArray[const float32, ndim=1]"), built at compile time
   with the binding library's own const_name, which the including
   header's namespace supplies (pybind11::detail, nanobind::detail).  */
#define GPUMEM_CASTER_NAME(T, NDIM, LAYOUT)                               \
  (const_name ("gpumem.DeviceArray[")                                     \
   + const_name<std::is_const<T>::value> (const_name ("const "),          \
                                          const_name (""))                \
   + const_name (gpumem::dtype<std::remove_cv_t<T>>::name)                \
   + const_name<((NDIM) >= 0)> (                                          \
       const_name (", ndim=")                                             \
           + const_name<(size_t) ((NDIM) >= 0 ? (NDIM) : 0)> (),          \
       const_name (""))                                                   \
   + const_name<((LAYOUT) & gpumem::c_contig) == 0> (                     \
       const_name (", strided"), const_name (""))                         \
   + const_name ("]"))

/* Whether a parameter of type PARAM is made in place from a caster's
   loaded ARRAY (array's taken constructor, a prvalue: no move, no
   moved-from array to empty): ARRAY itself, a const reference or an
   rvalue reference to it; not a pointer or a reference that may be
   written through, which get the caster's array itself.  */
template <class Param, class Array>
constexpr bool made_in_place
    = std::is_same_v<std::remove_cv_t<std::remove_reference_t<Param>>, Array>
      && !(std::is_lvalue_reference_v<Param>
           && !std::is_const_v<std::remove_reference_t<Param>>);

/* The tags of gpumem::array's constructors for a caster's value: made
   empty, to be loaded before anything else reads it (unloaded), and
   the parameter made from it (taken).  */
struct unloaded_t
{
};
constexpr unloaded_t unloaded{};
struct taken_t
{
};
constexpr taken_t taken{};

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
   Python owner and, for gpumem's memory, a hold on the memory itself:
   it stays while this array lives, also past free () in Python and in
   a call that runs without the GIL.  Made, copied and destroyed with
   the GIL held.  */
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
  /* For a caster's value, loaded before anything else reads it: only
     the owner is set (none), which the destructor reads; load () makes
     the array whole, loaded or empty.  */
  GPUMEM_INLINE explicit array (detail::unloaded_t) noexcept
  {
    view_.owner = nullptr;
  }
  /* The parameter, made from a caster's loaded value FROM: takes its
     reference and hold, and leaves it with neither, for its destructor
     alone to read.  */
  GPUMEM_INLINE array (detail::taken_t, array &from) noexcept
  {
    take (from);
    hold_ = from.hold_;
    from.view_.owner = nullptr;
    from.hold_ = nullptr;
  }
  array (const array &other) noexcept
  {
    take (other);
    Py_XINCREF (view_.owner);
    hold_ = other.hold_;
    if (hold_ != nullptr)
      gm_hold_take (hold_);
  }
  GPUMEM_INLINE array (array &&other) noexcept
  {
    take (other);
    hold_ = other.hold_;
    other.vacate ();
  }
  array &operator= (const array &other) noexcept
  {
    if (this != &other)
      {
        PyObject *old = view_.owner;
        gm_hold *old_hold = hold_;
        take (other);
        Py_XINCREF (view_.owner);
        hold_ = other.hold_;
        if (hold_ != nullptr)
          gm_hold_take (hold_);
        drop (old_hold);
        Py_XDECREF (old);
      }
    return *this;
  }
  array &operator= (array &&other) noexcept
  {
    if (this != &other)
      {
        PyObject *old = view_.owner;
        gm_hold *old_hold = hold_;
        take (other);
        hold_ = other.hold_;
        other.vacate ();
        drop (old_hold);
        Py_XDECREF (old);
      }
    return *this;
  }
  /* (A test, then Py_DECREF: Py_XDECREF may be a call, and a moved-from
     array has no owner.)  A hold comes only with an owner, and goes
     first: the owner keeps what its last drop reads.  */
  GPUMEM_INLINE ~array ()
  {
    if (view_.owner != nullptr)
      {
        drop (hold_);
        Py_DECREF (view_.owner);
      }
  }

  /* Takes OBJ's memory after the parameter's checks (detail::load).  0,
     or -1 with a Python exception set and *this empty.  Loads in place:
     a caster calls it once an argument.  */
  GPUMEM_INLINE int load (PyObject *obj)
  {
    if (view_.owner != nullptr)
      {
        drop (hold_);
        Py_CLEAR (view_.owner);
      }
    hold_ = nullptr;
    if (detail::load (obj, &view_, &hold_, dtype_name, dtype_typestr, NDIM,
                      detail::view_flags (writable, LAYOUT)) < 0)
      {
        clear ();
        return -1;
      }
    return 0;
  }

  /* Makes *this a new uninitialized C-contiguous gpumem.DeviceArray of
     SHAPE (NDIM of its dimensions) on DEVICE (-1: the current one),
     loaded as load () loads it.  0, or -1 with a Python exception
     (ValueError, OutOfMemoryError, RuntimeError from a gpumem without
     new_array).  */
  int allocate (int ndim, const std::int64_t *shape, int device = -1)
  {
    const gm_c_api_table *table = detail::api ();
    gm_buffer made_buffer;
    array made;
    int result;
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
    if (table->new_array (ndim, shape, dtype_name, device, &made_buffer) < 0)
      return -1;
    result = made.load (made_buffer.owner);
    Py_DECREF (made_buffer.owner);
    if (result < 0)
      return -1;
    *this = std::move (made);
    return 0;
  }

  explicit operator bool () const noexcept { return view_.owner != nullptr; }
  /* The address of element 0: with the default layout (c_contig) the
     elements are data () [0] to data () [size () - 1]; with
     gpumem::strided, walk stride (i) from it.  */
  T *data () const noexcept { return static_cast<T *> (view_.ptr); }
  int ndim () const noexcept { return view_.ndim; }
  std::int64_t shape (int i) const noexcept { return view_.shape[i]; }
  /* Strides in elements (stride_bytes: in bytes), negative for a
     reversed view.  */
  std::int64_t stride (int i) const noexcept
  {
    return view_.strides[i] / view_.itemsize;
  }
  std::int64_t stride_bytes (int i) const noexcept
  {
    return view_.strides[i];
  }
  std::int64_t size () const noexcept { return view_.size; }
  bool contiguous () const noexcept { return gm_view_is_contiguous (&view_); }
  int device () const noexcept { return view_.device; }
  /* Whether the memory is host memory (the host backend's): a CPU path
     must run then, as no kernel can.  */
  bool on_host () const noexcept { return view_.device_type == device_host; }
  /* The cudaStream_t to launch on for this array alone: the stream of
     gpumem's pending work on the memory, else the caller's current one
     (a `with stream:` block's, gpumem.concurrent ()'s), else NULL, the
     default stream.  With several arrays use gpumem::launch_stream,
     which orders the launch after every argument's pending work.  */
  stream_t stream () const noexcept
  {
    return static_cast<stream_t> (view_.launch);
  }
  /* The stream whose work writing the memory is still pending (gpumem's
     stream, or for another library's tensor its current work stream),
     or NULL when none is.  */
  stream_t pending () const noexcept
  {
    return static_cast<stream_t> (view_.stream);
  }
  /* A pointer to element I along the first dimension, through its stride
     (a 1-d array's I-th element), for any layout.  */
  T *at (std::int64_t i) const noexcept
  {
    return reinterpret_cast<T *> (static_cast<char *> (view_.ptr)
                                  + i * view_.strides[0]);
  }
  /* The array as the C API describes it: shape and strides borrowed
     from object () or held in the view (gpumem/extension.h).  */
  const gm_view &view () const noexcept { return view_; }
  /* The array as a gm_buffer, made from view (): a copy, whose owner is
     object () (borrowed: no reference of its own).  */
  gm_buffer buffer () const noexcept
  {
    gm_buffer buf;
    std::memset (&buf, 0, sizeof buf);
    gm_view_to_buffer (&view_, &buf);
    if (view_.owner != nullptr)
      std::memcpy (buf.typestr, dtype_typestr,
                   sizeof (dtype<value_type>::typestr));
    return buf;
  }
  /* The Python object that keeps the memory alive (borrowed); for an
     array from allocate, the new DeviceArray.  */
  PyObject *object () const noexcept { return view_.owner; }
  /* That object as a new reference; *this is empty after, and the
     memory no longer held but by that reference.  */
  PyObject *release () noexcept
  {
    PyObject *owner = view_.owner;
    drop (hold_);
    clear ();
    return owner;
  }

  /* The type as help () shows it.  */
  static std::string type_text ()
  {
    return detail::type_text (dtype_name, writable, NDIM, LAYOUT);
  }

private:
  /* Ends HOLD (none when NULL): the memory goes if it was the last.  */
  static GPUMEM_INLINE void drop (gm_hold *hold) noexcept
  {
    if (hold != nullptr)
      gm_hold_drop (gm_c_api, hold);
  }
  /* Empty: no memory, no owner, no hold.  */
  GPUMEM_INLINE void clear () noexcept
  {
    hold_ = nullptr;
    view_.ptr = nullptr;
    view_.owner = nullptr;
    view_.shape = nullptr;
    view_.strides = nullptr;
    view_.stream = nullptr;
    view_.launch = nullptr;
    view_.size = 0;
    view_.itemsize = sizeof (value_type);
    view_.ndim = 0;
    view_.device = -1;
    view_.device_type = 0;
    view_.readonly = 0;
    view_.dtype = dtype_name;
  }
  /* Empty after a move: no owner, no memory, no dimensions; the other
     fields, which nothing reads then, as they were.  */
  GPUMEM_INLINE void vacate () noexcept
  {
    hold_ = nullptr;
    view_.ptr = nullptr;
    view_.owner = nullptr;
    view_.shape = nullptr;
    view_.strides = nullptr;
    view_.size = 0;
    view_.ndim = 0;
  }
  /* OTHER's view, without its reference: the fields, and the dims only
     where shape and strides point into OTHER's, ours then pointing into
     ours.  */
  GPUMEM_INLINE void take (const array &other) noexcept
  {
    static_assert (offsetof (gm_view, dims) + sizeof view_.dims
                     == sizeof (gm_view), "gm_view's dims come last");
    const gm_view &from = other.view_;
    detail::copy_bytes<offsetof (gm_view, dims)> (&view_, &from);
    if (from.shape == from.dims)
      {
        detail::copy_bytes<sizeof from.dims> (view_.dims, from.dims);
        view_.shape = view_.dims;
        view_.strides = view_.dims + GM_VIEW_NDIM;
      }
  }

  gm_view view_;
  gm_hold *hold_;
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

/* launch_stream's work over the N views VIEWS: *OUT is the current
   stream of their device (NULL: the default stream), made to wait for
   each one's pending stream.  0, or -1 with a Python exception
   (ValueError: an empty array, arrays on two devices).  */
inline int
launch_stream (const gm_view *const *views, int n, stream_t *out)
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
      if (views[i]->owner == nullptr)
        {
          PyErr_SetString (PyExc_ValueError, "gpumem::launch_stream: "
                           "argument is an empty gpumem::array");
          return -1;
        }
      if (device >= 0 && views[i]->device != device)
        {
          PyErr_Format (PyExc_ValueError, "gpumem::launch_stream: the "
                        "arrays are on devices %d and %d; one launch uses "
                        "one device", device, views[i]->device);
          return -1;
        }
      device = views[i]->device;
    }
  if (n == 0 || views[0]->device_type == device_host)
    return 0;
  if (table->current_stream (device, &target) < 0)
    return -1;
  for (int i = 0; i < n; i++)
    if (table->stream_wait (device, target, views[i]->stream) < 0)
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
  const gm_view *views[] = {&arrays.view ()...};
  stream_t stream;
  if (launch_stream (views, (int) sizeof... (Arrays), &stream) < 0)
    throw Error ();
  return stream;
}

template <class Error, class... Arrays>
void
launch_done_or_throw (stream_t stream, const Arrays &...written)
{
  PyObject *objects[] = {written.object ()..., nullptr};
  const gm_view *views[] = {&written.view ()..., nullptr};
  int device = views[0] != nullptr ? views[0]->device : -1;
  if (launch_done (stream, device, objects, (int) sizeof... (Arrays)) < 0)
    throw Error ();
}

} // namespace detail

} // namespace gpumem

#endif /* GPUMEM_ARRAY_HPP */
