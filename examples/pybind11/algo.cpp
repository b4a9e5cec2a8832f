// algo.cpp -- the stitching workload's algo as a pybind11 module over gpumem arrays.
#include <gpumem/pybind11.h>
#include "algo.h"

gpumem::array<float, 1> algo (gpumem::array<const float, 1> images, gpumem::array<const float, 1> update,
                              gpumem::array<float, 1> partial, std::int64_t n)
{
  if (n > images.size () || update.size () < 4 || partial.size () < 4)
    throw pybind11::value_error ("algo: needs number_of_images <= len(images) and 4 updates");
  auto stream = gpumem::launch_stream (images, update, partial);
  algo_run (images.on_host (), stream, images.data (), images.stride (0),
            update.data (), update.stride (0), partial.data (), partial.stride (0), n);
  gpumem::launch_done (stream, partial);
  return partial;
}

PYBIND11_MODULE (algo_pybind11, m)
{
  m.def ("algo", &algo, pybind11::arg ("images"), pybind11::arg ("complete_update"),
         pybind11::arg ("partial_update"), pybind11::arg ("number_of_images"));
}
