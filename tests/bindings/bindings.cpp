/* bindings.cpp -- the module tests/test_bindings.py builds twice, with
   gpumem/pybind11.h (gmbind_pybind11) and with gpumem/nanobind.h
   (GM_NANOBIND: gmbind_nanobind), to check the casters.  The functions
   that read or write elements do it on the CPU: call them with host
   memory (the host backend).  */
#include <stdexcept>

#ifdef GM_NANOBIND
#include <gpumem/nanobind.h>
namespace py = nanobind;
#define GM_BIND_MODULE NB_MODULE (gmbind_nanobind, m)
#else
#include <gpumem/pybind11.h>
namespace py = pybind11;
#define GM_BIND_MODULE PYBIND11_MODULE (gmbind_pybind11, m)
#endif

using gpumem::array;
using gpumem::c_contig;

/* Refuses device memory, which the CPU cannot read: ValueError.  */
template <class A>
static void
host_memory_only (const A &x)
{
  if (!x.on_host ())
    throw std::invalid_argument ("this test function reads elements on "
                                 "the CPU: host memory only");
}

/* The sum of a contiguous array, read through data () and size ().  */
static double
sum_contig (array<const float, 1, c_contig> x)
{
  host_memory_only (x);
  double sum = 0;
  for (std::int64_t i = 0; i < x.size (); i++)
    sum += x.data ()[i];
  return sum;
}

/* The sum of any 1-d view, walked through its stride.  */
static double
sum_strided (array<const float, 1> x)
{
  host_memory_only (x);
  double sum = 0;
  for (std::int64_t i = 0; i < x.shape (0); i++)
    sum += *x.at (i);
  return sum;
}

/* Sets every element of a 1-d view to VALUE.  */
static void
fill (array<float, 1> x, float value)
{
  host_memory_only (x);
  for (std::int64_t i = 0; i < x.shape (0); i++)
    *x.at (i) = value;
}

/* A new DeviceArray [0, 1, ..., n - 1] (host memory only).  */
static array<float, 1, c_contig>
arange (std::int64_t n, bool write)
{
  auto made = gpumem::empty<float, 1> ({n});
  for (std::int64_t i = 0; write && i < n; i++)
    made.data ()[i] = (float) i;
  return made;
}

/* Takes 2-d arrays of any dtype-checked layout: the number of dims.  */
static int
matrix (array<const double, 2> x)
{
  return x.ndim ();
}

/* For the call-cost benchmark: three arrays through the caster, and
   three integers.  */
static std::int64_t
three_arrays (array<const float> a, array<const float> b,
              array<float> c)
{
  return a.size () + b.size () + c.size ();
}

static std::int64_t
three_ints (std::int64_t a, std::int64_t b, std::int64_t c)
{
  return a + b + c;
}

/* The stream handle as an integer, for the tests.  */
static std::uintptr_t
stream_of (array<const float> x)
{
  return (std::uintptr_t) x.stream ();
}

GM_BIND_MODULE
{
  m.def ("sum_contig", &sum_contig, py::arg ("x"));
  m.def ("sum_strided", &sum_strided, py::arg ("x"));
  m.def ("fill", &fill, py::arg ("x"), py::arg ("value"));
  m.def ("arange", &arange, py::arg ("n"), py::arg ("write") = true);
  m.def ("matrix", &matrix, py::arg ("x"));
  m.def ("three_arrays", &three_arrays);
  m.def ("three_ints", &three_ints);
  m.def ("stream_of", &stream_of);
}
