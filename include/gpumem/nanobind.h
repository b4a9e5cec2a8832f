/* gpumem/nanobind.h -- gpumem::array<T> as a nanobind argument and
   result, the same as gpumem/pybind11.h gives pybind11: a caster of its
   own over gpumem's C API (gpumem/array.hpp), not nb::ndarray, so that
   any __cuda_array_interface__ object is taken, gpumem's checks and
   messages are kept, and the pending stream is known.
   docs/cpp-bindings.md is the guide.

     #include <gpumem/nanobind.h>
     void scale (gpumem::array<float, 1> x, float by);
     NB_MODULE (mymod, m) { m.def ("scale", &scale); }

   nanobind's casters may not raise: an argument that fails its checks
   in the converting pass is taken with its error kept, and the error is
   raised (gpumem's TypeError or ValueError, led by the parameter's type)
   when the function's arguments are handed over, before it runs.  In
   the no-conversion pass of an overloaded function it is refused
   quietly, so that another overload can take it.  */

#ifndef GPUMEM_NANOBIND_H
#define GPUMEM_NANOBIND_H

#include <nanobind/nanobind.h>

#include <gpumem/array.hpp>

#include <vector>

namespace gpumem
{

/* A new uninitialized C-contiguous DeviceArray of SHAPE on DEVICE (-1:
   the current one), to fill and return to Python.  Throws
   nanobind::python_error (ValueError, OutOfMemoryError).  */
template <class T, int NDIM = any_ndim>
array<T, NDIM, c_contig>
empty (const std::vector<std::int64_t> &shape, int device = -1)
{
  array<T, NDIM, c_contig> made;
  if (made.allocate ((int) shape.size (), shape.data (), device) < 0)
    throw nanobind::python_error ();
  return made;
}

/* The stream to launch on for ARRAYS (gpumem::array arguments of one
   call): the caller's current stream of their device (a `with stream:`
   block's, gpumem.concurrent ()'s), else NULL, the default stream; made
   to wait, with events and no host wait, for every argument's pending
   work (gpumem's streams, another library's current stream).  Pass it
   to gpumem::launch_done after the launch.  Throws nanobind::python_error
   (ValueError: arrays on two devices).  */
template <class... Arrays>
stream_t
launch_stream (const Arrays &...arrays)
{
  return detail::launch_stream_or_throw<nanobind::python_error> (arrays...);
}

/* Ends a launch on STREAM (from launch_stream) that wrote WRITTEN (the
   output arrays): outside a `with stream:` block (STREAM NULL) it waits
   for the work, the GIL released, so the call is complete on return as
   gpumem's own calls are; inside one it records that the block's stream
   writes each output that is a gpumem.DeviceArray.  Throws
   nanobind::python_error (CudaError from the work, KeyboardInterrupt).  */
template <class... Arrays>
void
launch_done (stream_t stream, const Arrays &...written)
{
  detail::launch_done_or_throw<nanobind::python_error> (stream, written...);
}

} // namespace gpumem

namespace nanobind
{
namespace detail
{

template <class T, int NDIM, unsigned LAYOUT>
struct type_caster<gpumem::array<T, NDIM, LAYOUT>>
{
  using Array = gpumem::array<T, NDIM, LAYOUT>;
  using Value = Array;
  using Element = typename Array::value_type;

  static constexpr auto Name = GPUMEM_CASTER_NAME (T, NDIM, LAYOUT);
  /* A parameter by value, const or rvalue reference: made in place
     from the loaded value; by pointer or reference: the value.  */
  template <typename T_>
  using Cast = std::conditional_t<gpumem::detail::made_in_place<T_, Value>,
                                  Value, movable_cast_t<T_>>;
  template <typename T_> static constexpr bool can_cast () { return true; }

  Array value{gpumem::detail::unloaded};
  /* The error of a failed load in the converting pass (a new reference,
     or NULL), raised when the value is taken (nanobind catches it
     there).  A bare pointer: nothing to release in the common case.  */
  PyObject *error = nullptr;

  type_caster () = default;
  type_caster (const type_caster &) = delete;
  type_caster &operator= (const type_caster &) = delete;
  GPUMEM_INLINE ~type_caster ()
  {
    if (error != nullptr)
      Py_DECREF (error);
  }

  GPUMEM_INLINE bool from_python (handle src, uint8_t flags,
                                  cleanup_list *) noexcept
  {
    return value.load (src.ptr ()) == 0 || refused (flags);
  }
  /* After a failed load: false in the no-conversion pass (the exception
     cleared, so that another overload is tried), else true with the
     error kept, led by the parameter's type.  */
  bool refused (uint8_t flags) noexcept
  {
    if (!(flags & (uint8_t) cast_flags::convert))
      {
        PyErr_Clear ();
        return false;
      }
    gpumem::detail::name_error (Array::type_text ());
    error = gpumem::detail::take_error ();
    return true;
  }

  static handle from_cpp (const Array &src, rv_policy, cleanup_list *) noexcept
  {
    PyObject *object = src.object ();
    if (object == nullptr)
      return none ().release ();
    Py_INCREF (object);
    return object;
  }
  template <typename T_,
            enable_if_t<std::is_same_v<std::remove_cv_t<T_>, Value>> = 0>
  static handle from_cpp (T_ *p, rv_policy policy, cleanup_list *list)
  {
    if (!p)
      return none ().release ();
    return from_cpp (*p, policy, list);
  }

  /* Raises the kept error, if any.  */
  GPUMEM_INLINE void check ()
  {
    if (error != nullptr)
      raise ();
  }
  [[noreturn]] void raise ()
  {
    PyObject *taken = error;
    error = nullptr;
    gpumem::detail::restore_error (taken);
    throw python_error ();
  }
  GPUMEM_INLINE explicit operator Value ()
  {
    check ();
    return Value (gpumem::detail::taken, value);
  }
  explicit operator Value * () { check (); return &value; }
  explicit operator Value & () { check (); return value; }
};

} // namespace detail
} // namespace nanobind

#endif /* GPUMEM_NANOBIND_H */
