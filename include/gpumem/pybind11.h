/* gpumem/pybind11.h -- gpumem::array<T> as a pybind11 argument and
   result: a binding takes device memory from a gpumem.DeviceArray, any
   __cuda_array_interface__ object (CuPy, PyTorch, Numba) or a DLPack
   producer, with the checks of gpumem/array.hpp, and returns new
   DeviceArrays (gpumem::empty).  docs/cpp-bindings.md is the guide.

     #include <gpumem/pybind11.h>
     void scale (gpumem::array<float, 1> x, float by);
     PYBIND11_MODULE (mymod, m) { m.def ("scale", &scale); }

   help () shows the parameter as gpumem.DeviceArray[float32, ndim=1].
   An argument that fails its checks raises gpumem's TypeError or
   ValueError, its message led by the parameter's type; with overloads,
   each overload is tried first without conversion, and the first whose
   array fails in the converting pass raises.  */

#ifndef GPUMEM_PYBIND11_H
#define GPUMEM_PYBIND11_H

#include <pybind11/pybind11.h>

#include <gpumem/array.hpp>

#include <vector>

namespace gpumem
{

/* A new uninitialized C-contiguous DeviceArray of SHAPE on DEVICE (-1:
   the current one), to fill and return to Python.  Throws
   pybind11::error_already_set (ValueError, OutOfMemoryError).  */
template <class T, int NDIM = any_ndim>
array<T, NDIM, c_contig>
empty (const std::vector<std::int64_t> &shape, int device = -1)
{
  array<T, NDIM, c_contig> made;
  if (made.allocate ((int) shape.size (), shape.data (), device) < 0)
    throw pybind11::error_already_set ();
  return made;
}

/* The stream to launch on for ARRAYS (gpumem::array arguments of one
   call): the caller's current stream of their device (a `with stream:`
   block's, gpumem.concurrent ()'s), else NULL, the default stream; made
   to wait, with events and no host wait, for every argument's pending
   work (gpumem's streams, another library's current stream).  Pass it
   to gpumem::launch_done after the launch.  Throws pybind11::error_already_set
   (ValueError: arrays on two devices).  */
template <class... Arrays>
stream_t
launch_stream (const Arrays &...arrays)
{
  return detail::launch_stream_or_throw<pybind11::error_already_set> (arrays...);
}

/* Ends a launch on STREAM (from launch_stream) that wrote WRITTEN (the
   output arrays): outside a `with stream:` block (STREAM NULL) it waits
   for the work, the GIL released, so the call is complete on return as
   gpumem's own calls are; inside one it records that the block's stream
   writes each output that is a gpumem.DeviceArray.  Throws
   pybind11::error_already_set (CudaError from the work, KeyboardInterrupt).  */
template <class... Arrays>
void
launch_done (stream_t stream, const Arrays &...written)
{
  detail::launch_done_or_throw<pybind11::error_already_set> (stream, written...);
}

} // namespace gpumem

namespace pybind11
{
namespace detail
{

template <class T, int NDIM, unsigned LAYOUT>
struct type_caster<gpumem::array<T, NDIM, LAYOUT>>
{
  using Array = gpumem::array<T, NDIM, LAYOUT>;

  static constexpr auto name = GPUMEM_CASTER_NAME (T, NDIM, LAYOUT);

  /* A parameter by value, const or rvalue reference: made in place
     from the loaded value; by pointer or reference: the value.  */
  template <typename T_>
  using cast_op_type
      = conditional_t<gpumem::detail::made_in_place<T_, Array>, Array,
                      movable_cast_op_type<T_>>;
  GPUMEM_INLINE explicit operator Array ()
  {
    return Array (gpumem::detail::taken, value);
  }
  explicit operator Array * () { return &value; }
  explicit operator Array & () { return value; }

  /* SRC's memory into value.  True; false in the no-conversion pass of
     an overloaded function (the next overload is tried); else throws
     gpumem's exception, led by the parameter's type.  */
  bool load (handle src, bool convert)
  {
    if (value.load (src.ptr ()) == 0)
      return true;
    if (!convert)
      {
        PyErr_Clear ();
        return false;
      }
    gpumem::detail::name_error (Array::type_text ());
    throw error_already_set ();
  }

  /* The array's Python object: the DeviceArray of gpumem::empty, or the
     object the argument came from.  */
  static handle cast (const Array *src, return_value_policy policy,
                      handle parent)
  {
    if (src == nullptr)
      return none ().release ();
    return cast (*src, policy, parent);
  }
  static handle cast (const Array &src, return_value_policy, handle)
  {
    PyObject *object = src.object ();
    if (object == nullptr)
      return none ().release ();
    Py_INCREF (object);
    return object;
  }

private:
  Array value{gpumem::detail::unloaded};
};

} // namespace detail
} // namespace pybind11

#endif /* GPUMEM_PYBIND11_H */
