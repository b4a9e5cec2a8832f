/* bindings.cpp -- the module tests/test_bindings.py builds twice, with
   gpumem/pybind11.h (gmbind_pybind11) and with gpumem/nanobind.h
   (GM_NANOBIND: gmbind_nanobind), to check the casters.  The functions
   that read or write elements do it on the CPU: call them with host
   memory (the host backend).  */
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef GM_NANOBIND
#include <gpumem/nanobind.h>
namespace py = nanobind;
#define GM_BIND_MODULE NB_MODULE (gmbind_nanobind, m)
using python_error = nanobind::python_error;
#else
#include <gpumem/pybind11.h>
namespace py = pybind11;
#define GM_BIND_MODULE PYBIND11_MODULE (gmbind_pybind11, m)
using python_error = pybind11::error_already_set;
#endif

using gpumem::array;
using gpumem::c_contig;
using gpumem::strided;

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
sum_contig (array<const float, 1> x)
{
  host_memory_only (x);
  double sum = 0;
  for (std::int64_t i = 0; i < x.size (); i++)
    sum += x.data ()[i];
  return sum;
}

/* The sum of any 1-d view, walked through its stride.  */
static double
sum_strided (array<const float, 1, strided> x)
{
  host_memory_only (x);
  double sum = 0;
  for (std::int64_t i = 0; i < x.shape (0); i++)
    sum += *x.at (i);
  return sum;
}

/* Sets every element of a 1-d view to VALUE.  */
static void
fill (array<float, 1, strided> x, float value)
{
  host_memory_only (x);
  for (std::int64_t i = 0; i < x.shape (0); i++)
    *x.at (i) = value;
}

/* Arrays C++ keeps past the call that took them (keep, kept_sum,
   forget): their memory must stay whatever Python does.  */
static std::vector<array<float, 1>> kept;

static void
keep (array<float, 1> x)
{
  kept.push_back (x);
}

/* The other ways a parameter may take an array, each a caster's path
   of its own: a const reference and an rvalue reference (made in place,
   as by value), a reference and a pointer (an array kept in the
   caster).  Each returns the sum of X's elements (host memory only);
   keep_moved keeps X, moved from the parameter.  */
static double
sum_const_ref (const array<const float, 1> &x)
{
  return sum_contig (x);
}

static double
sum_ref (array<const float, 1> &x)
{
  return sum_contig (x);
}

static double
sum_pointer (const array<const float, 1> *x)
{
  return sum_contig (*x);
}

static double
keep_moved (array<float, 1> &&x)
{
  kept.push_back (std::move (x));
  const array<float, 1> &got = kept.back ();
  host_memory_only (got);
  double sum = 0;
  for (std::int64_t i = 0; i < got.size (); i++)
    sum += got.data ()[i];
  return sum;
}

/* The sum of every element of the kept arrays, read on the CPU (host
   memory only).  */
static double
kept_sum ()
{
  double sum = 0;
  for (const auto &x : kept)
    {
      host_memory_only (x);
      for (std::int64_t i = 0; i < x.size (); i++)
        sum += x.data ()[i];
    }
  return sum;
}

static std::size_t
forget ()
{
  std::size_t n = kept.size ();
  kept.clear ();
  return n;
}

/* Adds 1 to every element ROUNDS times with the GIL released, as a
   native call that runs while Python threads go on (host memory only);
   the last element after.  */
static double
increment_released (array<float, 1> x, int rounds)
{
  host_memory_only (x);
  float *data = x.data ();
  std::int64_t n = x.size ();
  {
    py::gil_scoped_release unlocked;
    for (int r = 0; r < rounds; r++)
      for (std::int64_t i = 0; i < n; i++)
        data[i] += 1.0f;
  }
  return n > 0 ? data[n - 1] : 0.0;
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
matrix (array<const double, 2, strided> x)
{
  return x.ndim ();
}

/* Element N - 1 through a bare pointer, as a kernel written for one
   reads it: the default layout must refuse a view it would misread.  */
static double
last (array<const float, 1> x, std::int64_t n)
{
  host_memory_only (x);
  if (n < 1 || n > x.size ())
    throw std::out_of_range ("last: n must be 1 to size ()");
  return x.data ()[n - 1];
}

/* For the call-cost benchmark: three arrays through the caster, and
   three integers; both return a small int, which Python does not
   allocate.  */
static std::int64_t
three_arrays (array<const float> a, array<const float> b,
              array<float> c)
{
  return a.ndim () + b.ndim () + c.ndim ();
}

static std::int64_t
three_ints (std::int64_t a, std::int64_t b, std::int64_t c)
{
  return a + b + c;
}

/* gpumem::launch_stream (a, b) as an integer, ended with launch_done
   (b written).  */
static std::uintptr_t
launch_of (array<const float, gpumem::any_ndim, strided> a,
           array<float, gpumem::any_ndim, strided> b)
{
  gpumem::stream_t stream = gpumem::launch_stream (a, b);
  gpumem::launch_done (stream, b);
  return (std::uintptr_t) stream;
}

#ifdef GM_BIND_CUDA
#include <cuda_runtime.h>
#include <type_traits>
static_assert (std::is_same<gpumem::stream_t, cudaStream_t>::value,
               "gpumem::stream_t is cudaStream_t");

int gm_bind_tail (const float *x, std::int64_t offset, float *out,
                  std::int64_t n, void *stream);
int gm_bind_sync (void *stream);

/* OUT = the last OUT.size () elements of X, by a kernel.  With HELPER
   the launch goes on gpumem::launch_stream (x, out) and ends with
   launch_done; without, on out.stream () as a binding for one array
   does (the default stream waited for), which does not wait for X's
   pending writes on another stream.  */
static void
tail_into (array<const float, 1> x, array<float, 1> out, bool helper)
{
  if (out.size () > x.size ())
    throw std::invalid_argument ("tail_into: out is longer than x");
  gpumem::stream_t stream = helper ? gpumem::launch_stream (x, out)
                                   : out.stream ();
  int status = gm_bind_tail (x.data (), x.size () - out.size (), out.data (),
                             out.size (), stream);
  if (status == 0 && !helper && stream == nullptr)
    status = gm_bind_sync (stream);
  if (status != 0)
    throw std::runtime_error ("tail_into: CUDA error "
                              + std::to_string (status));
  if (helper)
    gpumem::launch_done (stream, out);
}
#endif

/* Every dimension of X as the caster moved it into the call: the sum
   of (i + 1) * shape (i) + 1000 * (i + 1) * stride (i), in elements.  */
static std::int64_t
dims_code (array<const float, gpumem::any_ndim, strided> x)
{
  std::int64_t code = 0;
  for (int i = 0; i < x.ndim (); i++)
    code += (i + 1) * x.shape (i) + 1000 * (i + 1) * x.stride (i);
  return code;
}

/* The stream handle as an integer, for the tests.  */
static std::uintptr_t
stream_of (array<const float> x)
{
  return (std::uintptr_t) x.stream ();
}

/* The casters of this module load through a copy of gpumem's table
   that ends before MEMBER: "load_view" as against a gpumem older than
   0.4 (gpumem/array.hpp's load_through_buffer), "array_type" as against
   one older than 0.5 (no lent views: every argument through
   load_view); "" through gpumem's own table again.  */
static void
as_older_gpumem (const char *member)
{
  static const gm_c_api_table *own = nullptr;
  static gm_c_api_table copy;

  if (own == nullptr)
    {
      own = gpumem::detail::api ();
      if (own == nullptr)
        throw python_error ();
      copy = *own;
    }
  bool own_table = std::strcmp (member, "") == 0;
  if (std::strcmp (member, "load_view") == 0)
    copy.size = offsetof (gm_c_api_table, load_view);
  else if (std::strcmp (member, "array_type") == 0)
    copy.size = offsetof (gm_c_api_table, array_type);
  else if (!own_table)
    throw std::invalid_argument ("as_older_gpumem: load_view, array_type "
                                 "or \"\"");
  gm_c_api = own_table ? own : &copy;
}

GM_BIND_MODULE
{
  m.def ("sum_contig", &sum_contig, py::arg ("x"));
  m.def ("sum_strided", &sum_strided, py::arg ("x"));
  m.def ("fill", &fill, py::arg ("x"), py::arg ("value"));
  m.def ("arange", &arange, py::arg ("n"), py::arg ("write") = true);
  m.def ("matrix", &matrix, py::arg ("x"));
  m.def ("last", &last, py::arg ("x"), py::arg ("n"));
  m.def ("three_arrays", &three_arrays);
  m.def ("dims_code", &dims_code);
  m.def ("three_ints", &three_ints);
  m.def ("stream_of", &stream_of);
  m.def ("launch_of", &launch_of);
  m.def ("as_older_gpumem", &as_older_gpumem);
  m.def ("keep", &keep, py::arg ("x"));
  m.def ("sum_const_ref", &sum_const_ref, py::arg ("x"));
  m.def ("sum_ref", &sum_ref, py::arg ("x"));
  m.def ("sum_pointer", &sum_pointer, py::arg ("x"));
  m.def ("keep_moved", &keep_moved, py::arg ("x"));
  m.def ("kept_sum", &kept_sum);
  m.def ("forget", &forget);
  m.def ("increment_released", &increment_released, py::arg ("x"),
         py::arg ("rounds"));
#ifdef GM_BIND_CUDA
  m.def ("tail_into", &tail_into, py::arg ("x"), py::arg ("out"),
         py::arg ("helper"));
#endif
}
