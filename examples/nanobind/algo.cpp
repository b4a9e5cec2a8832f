// algo.cpp -- the stitching workload's algo as a nanobind module over gpumem arrays.
#include <gpumem/nanobind.h>
#include "../pybind11/algo.h"

gpumem::array<float, 1> algo (gpumem::array<const float, 1> images, gpumem::array<const float, 1> update,
                              gpumem::array<float, 1> partial, std::int64_t n)
{
  if (n > images.size () || update.size () < 4 || partial.size () < 4)
    throw nanobind::value_error ("algo: needs number_of_images <= len(images) and 4 updates");
  auto stream = gpumem::launch_stream (images, update, partial);
  algo_run (images.on_host (), stream, images.data (), images.stride (0),
            update.data (), update.stride (0), partial.data (), partial.stride (0), n);
  gpumem::launch_done (stream, partial);
  return partial;
}

NB_MODULE (algo_nanobind, m)
{
  m.def ("algo", &algo, nanobind::arg ("images"), nanobind::arg ("complete_update"),
         nanobind::arg ("partial_update"), nanobind::arg ("number_of_images"));
}
