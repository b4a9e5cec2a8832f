/* py-array-math.c -- a DeviceArray refuses array math, and says where
   it is.

   gpumem owns memory, moves it and launches kernels; it does no element
   arithmetic.  An operator (a + 1, a * b, -a, a @ b, a < 0) and the
   reductions and element functions that NumPy and CuPy arrays have as
   methods (a.sum (), a.max (), a.dot (b)) raise TypeError naming the
   two ways: another library on the same memory without a copy
   (cupy.asarray (a), torch.from_dlpack (a), numpy.from_dlpack (a) on
   the host backend), or a kernel.  == and != stay identity, as for any
   object; a sequence times a one-element integer array (its __index__)
   stays the sequence's repeat.  */

#include "gm-python.h"

#include <string.h>

/* The message of every refusal; WHAT names the operation.  */
static PyObject *
refuse (const char *what)
{
  PyErr_Format (PyExc_TypeError,
                "a DeviceArray does no array math (%s): gpumem owns the "
                "memory and launches kernels.  Do the math in CuPy or "
                "PyTorch on the same memory, without a copy: "
                "cupy.asarray(a) or torch.from_dlpack(a) "
                "(numpy.from_dlpack(a) on the host backend); or write it "
                "as a kernel (gpumem.jit, a plugin: docs/kernels.md); or "
                "copy to the host with a.copy_to_host()", what);
  return NULL;
}

/* A binary operator's slot: refused, unless the other operand is a
   sequence that repeats (list * a, a * list), which is left to it.  */
static PyObject *
binary (PyObject *left, PyObject *right, const char *what)
{
  PyObject *other = gmpy_array_check (left) ? right : left;
  if (PyType_GetSlot (Py_TYPE (other), Py_sq_repeat) != NULL
      && !gmpy_array_check (other))
    Py_RETURN_NOTIMPLEMENTED;
  return refuse (what);
}

#define GM_BINARY(NAME, WHAT)                                           \
  static PyObject *                                                     \
  NAME (PyObject *left, PyObject *right)                                \
  {                                                                     \
    return binary (left, right, WHAT);                                  \
  }

GM_BINARY (math_add, "a + b")
GM_BINARY (math_subtract, "a - b")
GM_BINARY (math_multiply, "a * b")
GM_BINARY (math_true_divide, "a / b")
GM_BINARY (math_floor_divide, "a // b")
GM_BINARY (math_remainder, "a % b")
GM_BINARY (math_divmod, "divmod(a, b)")
GM_BINARY (math_matrix_multiply, "a @ b")
GM_BINARY (math_lshift, "a << b")
GM_BINARY (math_rshift, "a >> b")
GM_BINARY (math_and, "a & b")
GM_BINARY (math_or, "a | b")
GM_BINARY (math_xor, "a ^ b")

static PyObject *
math_power (PyObject *left, PyObject *right, PyObject *modulo)
{
  return binary (left, right, "a ** b");
}

static PyObject *
math_negative (PyObject *self)
{
  return refuse ("-a");
}

static PyObject *
math_positive (PyObject *self)
{
  return refuse ("+a");
}

static PyObject *
math_absolute (PyObject *self)
{
  return refuse ("abs(a)");
}

static PyObject *
math_invert (PyObject *self)
{
  return refuse ("~a");
}

/* <, <=, > and >= are refused; == and != are left to identity.  */
static PyObject *
math_richcompare (PyObject *self, PyObject *other, int op)
{
  static const char *const names[] = {
    [Py_LT] = "a < b", [Py_LE] = "a <= b", [Py_GT] = "a > b",
    [Py_GE] = "a >= b"
  };

  if (op == Py_EQ || op == Py_NE)
    Py_RETURN_NOTIMPLEMENTED;
  return refuse (names[op]);
}

/* Identity's hash, which a type that defines tp_richcompare must give
   itself to stay hashable.  */
static Py_hash_t
math_hash (PyObject *self)
{
  return ((hashfunc) PyType_GetSlot (&PyBaseObject_Type, Py_tp_hash)) (self);
}

/* The methods of NumPy's and CuPy's arrays that compute: a.NAME is a
   TypeError here, where it would otherwise be a bare AttributeError.  */
static const char *const math_methods[] = {
  "sum", "prod", "mean", "std", "var", "min", "max", "argmin", "argmax",
  "all", "any", "cumsum", "cumprod", "dot", "clip", "round", "conj",
  "nonzero", "ptp", "trace", "sort", "argsort", NULL
};

/* tp_getattro: the generic lookup; a missing attribute that is one of
   MATH_METHODS becomes the refusal.  */
static PyObject *
math_getattro (PyObject *self, PyObject *name)
{
  PyObject *value = PyObject_GenericGetAttr (self, name);
  const char *text;
  char what[64];

  if (value != NULL || !PyErr_ExceptionMatches (PyExc_AttributeError)
      || !PyUnicode_Check (name))
    return value;
  text = PyUnicode_AsUTF8 (name);
  if (text == NULL)
    return NULL;
  for (const char *const *m = math_methods; *m != NULL; m++)
    if (strcmp (text, *m) == 0)
      {
        PyErr_Clear ();
        snprintf (what, sizeof what, "a.%s()", text);
        return refuse (what);
      }
  return NULL;
}

const PyType_Slot gmpy_array_math_slots[] = {
  {Py_nb_add, math_add},
  {Py_nb_subtract, math_subtract},
  {Py_nb_multiply, math_multiply},
  {Py_nb_true_divide, math_true_divide},
  {Py_nb_floor_divide, math_floor_divide},
  {Py_nb_remainder, math_remainder},
  {Py_nb_divmod, math_divmod},
  {Py_nb_power, math_power},
  {Py_nb_matrix_multiply, math_matrix_multiply},
  {Py_nb_lshift, math_lshift},
  {Py_nb_rshift, math_rshift},
  {Py_nb_and, math_and},
  {Py_nb_or, math_or},
  {Py_nb_xor, math_xor},
  {Py_nb_negative, math_negative},
  {Py_nb_positive, math_positive},
  {Py_nb_absolute, math_absolute},
  {Py_nb_invert, math_invert},
  {Py_tp_richcompare, math_richcompare},
  {Py_tp_hash, math_hash},
  {Py_tp_getattro, math_getattro},
  {0, NULL}
};
