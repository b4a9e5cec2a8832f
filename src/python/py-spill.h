/* py-spill.h -- the Python layer's side of spilling (py-spill.c,
   py-array-core.c): set_spill and an array's spill (), the hook the
   spill engine (src/core/spill.h) calls when it moves an owner's bytes,
   and the transparent return of spilled arguments.  Included by
   gm-python.h, after the array's type.  */

#ifndef GM_PY_SPILL_H
#define GM_PY_SPILL_H

/* gpumem.set_spill and the array's spill (); the engine's hook.  */
extern PyMethodDef gmpy_spill_methods[];
PyObject *gmpy_array_spill (PyObject *self, PyObject *unused);
PyObject *gmpy_array_get_is_spilled (PyObject *self, void *closure);
void gmpy_array_moved (void *array);
/* Brings the spilled bytes of OWNER (an array that owns its memory) back
   to its device, complete on return (STREAM NULL) or queued on STREAM;
   with EVICT other idle arrays may move to make room, but never those
   whose records KEEP names (the caller holds their addresses).  0, or
   -1 with OutOfMemoryError.  */
int gmpy_array_come_back (arraypy_object *owner, gm_stream *stream,
                          bool evict, gm_block *const *keep, int nkeep);
/* Brings every spilled DeviceArray among the N objects OBJS (any
   objects; NULL ones skipped) back to its device before a call takes
   their addresses, other idle arrays moving to make room but never
   these: the transparent return of a kernel's or a copy's arguments.
   0, or -1 with an exception.  */
int gmpy_array_prepare_slow (PyObject *const *objs, Py_ssize_t n);
static inline int
gmpy_array_prepare (PyObject *const *objs, Py_ssize_t n)
{
  return gm_spill_blocks_out == 0 ? 0 : gmpy_array_prepare_slow (objs, n);
}
/* prefetch of the N device-memory DeviceArrays ARRAYS to LOCATION:
   their device, which is LOCATION (the spilled ones come back as
   gmpy_array_prepare_slow brings them, on the stream STREAM_OBJ, a
   call's stream= argument, dispatches to: complete on return without
   one), or GM_LOCATION_HOST (they spill, complete on return).  0 or -1
   (py-spill.c).  */
int gmpy_spill_prefetch (PyObject *const *arrays, Py_ssize_t n,
                         int location, PyObject *stream_obj);
#endif /* GM_PY_SPILL_H */
