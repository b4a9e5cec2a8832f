// algo.cpp -- the stitching workload's algo as a nanobind module over gpumem arrays.
#include <gpumem/nanobind.h>
#include "../pybind11/algo.h"
namespace nb = nanobind;
using floats = gpumem::array<float, 1>;
using const_floats = gpumem::array<const float, 1>;

floats algo (const_floats images, const_floats complete_update, floats partial_update,
             std::int64_t number_of_images)
{
  if (number_of_images > images.size () || complete_update.size () < 4 || partial_update.size () < 4)
    throw nb::value_error ("algo: needs number_of_images <= len(images) and 4 updates");
  algo_run (images.on_host (), partial_update.stream (), images.data (), images.stride (0),
      complete_update.data (), complete_update.stride (0), partial_update.data (),
      partial_update.stride (0), number_of_images);
  return partial_update;
}

NB_MODULE (algo_nanobind, m)
{
  m.def ("algo", &algo, nb::arg ("images"), nb::arg ("complete_update"),
         nb::arg ("partial_update"), nb::arg ("number_of_images"));
}
