/* gm-limited-api.h -- the limited API (configure --enable-abi3) against
   the full one, for the Python layer: included by gm-python.h after
   <Python.h>, so that every py-*.c file is written once for both
   builds.  */

#ifndef GM_LIMITED_API_H
#define GM_LIMITED_API_H

/* The limited API (configure --enable-abi3: Py_LIMITED_API, CPython
   3.11's) against the full one.  The Python layer is written once:
   these names give the same results in both builds.  In the limited
   build a type's slots are read through PyType_GetSlot, the unchecked
   access macros are the checked functions, and a type's name is built
   from its __module__ and __qualname__ (gmpy_type_name).  */
#ifdef Py_LIMITED_API
# define GMPY_TYPE_NAME(type) gmpy_type_name (type)
# define GMPY_TYPE_ALLOC(type) \
  (((allocfunc) PyType_GetSlot ((type), Py_tp_alloc)) ((type), 0))
# define GMPY_TYPE_FREE(type, obj) \
  (((freefunc) PyType_GetSlot ((type), Py_tp_free)) (obj))
# define PyTuple_GET_ITEM(t, i) PyTuple_GetItem ((t), (i))
# define PyTuple_GET_SIZE(t) PyTuple_Size (t)
# define PyTuple_SET_ITEM(t, i, v) ((void) PyTuple_SetItem ((t), (i), (v)))
# define PyList_GET_ITEM(l, i) PyList_GetItem ((l), (i))
# define PyList_GET_SIZE(l) PyList_Size (l)
# define PyList_SET_ITEM(l, i, v) ((void) PyList_SetItem ((l), (i), (v)))
# define PyBytes_AS_STRING(b) PyBytes_AsString (b)
# define PyBytes_GET_SIZE(b) PyBytes_Size (b)
# define PyDict_GET_SIZE(d) PyDict_Size (d)
# define PyCFunction_GET_SELF(f) PyCFunction_GetSelf (f)
# define PyCFunction_GET_FUNCTION(f) PyCFunction_GetFunction (f)
# define PyUnicode_AsUTF8(s) PyUnicode_AsUTF8AndSize ((s), NULL)
# ifndef Py_SETREF
#  define Py_SETREF(dst, src) \
  do { PyObject *gmpy_old_ = (PyObject *) (dst); (dst) = (src); \
       Py_DECREF (gmpy_old_); } while (0)
#  define Py_XSETREF(dst, src) \
  do { PyObject *gmpy_old_ = (PyObject *) (dst); (dst) = (src); \
       Py_XDECREF (gmpy_old_); } while (0)
# endif
/* Buffers taken without the GIL: the C library's (PyMem_Raw* enter
   the stable ABI in 3.13; Python's raw allocator is malloc unless
   PYTHONMALLOC says otherwise, and these buffers never reach Python).  */
# define PyMem_RawMalloc(size) malloc (size)
# define PyMem_RawRealloc(ptr, size) realloc ((ptr), (size))
# define PyMem_RawFree(ptr) free (ptr)
/* The four functions of the limited build outside the limited API:
   every CPython from 3.11 exports them with these signatures, on
   opaque pointers (PyGILState_Check since 3.4, PyFrame_GetBack 3.9,
   PyCode_Addr2Line 3.10, PyFrame_GetLasti 3.11).  The limited API
   has nothing for PyGILState_Check, and for the frames only attribute
   lookups (f_back, f_lasti, co_lines), a lookup a frame at every
   allocation the memory history records: its stack capture, which
   must not touch Python without the GIL (py-mem-history.c), and the
   import warning's stack level (py-standalone.c) use these.
   .ci/run's abi3audit check allows these four and no other.  */
PyAPI_FUNC (int) PyGILState_Check (void);
PyAPI_FUNC (PyFrameObject *) PyFrame_GetBack (PyFrameObject *frame);
PyAPI_FUNC (int) PyFrame_GetLasti (PyFrameObject *frame);
PyAPI_FUNC (int) PyCode_Addr2Line (PyCodeObject *code, int offset);
/* TYPE's name as the full API's tp_name gives it for gpumem's, NumPy's,
   the built-in types and classes ("module.qualname"; "qualname" for
   builtins; a class statement's __name__), in one of a few buffers of
   the calling thread: valid until the fourth call after.  */
const char *gmpy_type_name (PyTypeObject *type);
#else
# define GMPY_TYPE_NAME(type) ((type)->tp_name)
# define GMPY_TYPE_ALLOC(type) ((type)->tp_alloc ((type), 0))
# define GMPY_TYPE_FREE(type, obj) ((type)->tp_free (obj))
/* Vectorcall, which enters the limited API in 3.12: the full build's
   alone (a graph's g(), the calls of CuPy's allocator hook).  */
# define GMPY_VECTORCALL 1
#endif

#endif /* GM_LIMITED_API_H */
