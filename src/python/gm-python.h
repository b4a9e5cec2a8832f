/* gm-python.h -- the private header of gpumem's Python layer.

   Included first by every file that touches Python (interp.c, module.c,
   py-*.c): <Python.h> must come before any system header, since it sets
   feature macros (_POSIX_C_SOURCE) that config.h would otherwise clash
   with.  */

#ifndef GM_PYTHON_H
#define GM_PYTHON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>

#include "config.h"
#include "gm.h"
#include "gm-interp.h"
#include "graph-deps.h"
#include "gpumem/extension.h"

#include "gm-limited-api.h"

/* Where a call goes, decided once a call (py-dispatch.h).  */
typedef struct gmpy_dispatch gmpy_dispatch;

/* The module's state.  There is one a process: a second import of
   gpumem (after del sys.modules["gpumem"]) makes a module that holds
   the first one's names and a copy of its references (module.c);
   gmpy_state_get () returns the first module's state to C helpers that
   have no module object at hand.  */
typedef struct gmpy_state
{
  PyTypeObject *device_type;
  PyTypeObject *array_type;
  PyTypeObject *stream_type;
  PyTypeObject *event_type;
  PyTypeObject *pinned_type;     /* gpumem.PinnedBuffer (py-pinned.c) */
  PyObject *error;               /* gpumem.Error */
  PyObject *cuda_error;          /* gpumem.CudaError */
  PyObject *oom_error;           /* gpumem.OutOfMemoryError */
  PyObject *numpy;               /* the numpy module */
  PyObject *np_ndarray;          /* numpy.ndarray */
  PyObject *np_dtypes[GM_NDTYPES];  /* numpy.dtype of each gm_dtype */
  PyObject *devices;             /* tuple of gpumem.Device */
  PyObject *kernels;             /* the gpumem.kernels module */
  PyObject *plugins;             /* dict: plugin path -> its namespace */
  PyObject *jit_kernels;         /* dict: JIT cache key -> its function */
} gmpy_state;

/* The floor (py-utils.c): what every py-*.c file shares.  */

/* The state of the one gpumem module the embedded interpreter imports:
   set by its exec slot, cleared when it is freed (gmpy_state_set).  Read
   it through gmpy_state_get, which the C API calls for every argument of
   a C++ binding's call: inline, so that no call is made.  */
extern gmpy_state *gmpy_module_state;
/* The module's state, or NULL before gpumem is imported or after it is
   freed.  */
static inline gmpy_state *
gmpy_state_get (void)
{
  return gmpy_module_state;
}
/* Called by the module's exec slot (STATE) and its free (NULL).  */
void gmpy_state_set (gmpy_state *state);

/* The module (module.c).  */
extern PyModuleDef gmpy_module_def;
/* The init function interp.c registers in the inittab.  */
PyMODINIT_FUNC PyInit_gpumem (void);

/* Starts the backend when none runs yet: in the extension module,
   imported by a plain python (py-standalone.c).  Its fallback to the
   host backend is a warning of category WARNING (gpumem.BackendWarning),
   not the program's notice on standard error.  0, or -1 with ImportError
   set saying why the backend cannot start (or the warning, raised by a
   filter that turns it into an error).  */
int gmpy_backend_start (PyObject *warning);

/* Sets the Python exception for STATUS from gm_last_error (); returns
   NULL (for the caller to return).  The only bridge from a gm_status to
   an exception.  */
PyObject *gmpy_raise (gm_status status);
/* As gmpy_raise, for int-returning functions: returns -1.  */
int gmpy_raise_int (gm_status status);

/* Waits, without the GIL and interruptibly, until the work of STREAM on
   DEVICE is done.  0, or -1 with an exception set (KeyboardInterrupt
   from Ctrl-C, or CudaError from the work).  */
int gmpy_wait (int device, gm_stream *stream);
/* Waits, as gmpy_wait does, for all work on DEVICE, then for the device
   itself (gpumem.synchronize, Device.synchronize).  0 or -1.  */
int gmpy_synchronize_device (int device);

/* Reads SHAPE (an int or a sequence of non-negative ints) into NDIM and
   DIMS, checking them with gmpy_shape_fits.  0 or -1 (TypeError,
   ValueError).  */
int gmpy_shape_arg (PyObject *shape, size_t itemsize, int *ndim,
                    Py_ssize_t dims[GM_MAX_NDIM]);
/* 0 when the NDIM dimensions DIMS other than 0 (and than DIMS[SKIP]; -1:
   none skipped) times ITEMSIZE fit a Py_ssize_t, as NumPy asks of every
   array, an empty one too (so that its strides and its views' offsets
   fit); else -1 with ValueError "WHAT is too large".  */
int gmpy_shape_fits (int ndim, const Py_ssize_t *dims, int skip,
                     size_t itemsize, const char *what);
/* As gmpy_shape_arg; when UNKNOWN is not NULL one dimension may be -1
   (reshape's "the one the others leave"): its index goes to *UNKNOWN
   (-1 when none is) and it is left out of the size check.  */
int gmpy_shape_read (PyObject *shape, size_t itemsize, int *ndim,
                     Py_ssize_t dims[GM_MAX_NDIM], int *unknown);
/* The number of elements of a shape of NDIM dimensions DIMS.  */
Py_ssize_t gmpy_shape_size (int ndim, const Py_ssize_t *dims);
/* DIMS as a tuple of ints: new reference or NULL.  */
PyObject *gmpy_shape_tuple (int ndim, const Py_ssize_t *dims);

/* Reads fast-call arguments into OUT by position or keyword, following
   NAMES (NULL-terminated); the first REQUIRED are required, the rest
   default to NULL; at most POSITIONAL (-1: all) may come by position.
   FNAME names the function in messages.  0 or -1 (TypeError).  */
int gmpy_parse_args (PyObject *const *args, Py_ssize_t nargs,
                     PyObject *kwnames, const char *fname,
                     const char *const *names, int required, int positional,
                     PyObject **out);

/* Parses a size argument: a non-negative Python int (TypeError if not an
   integer, ValueError if negative).  0 or -1.  */
int gmpy_size_arg (PyObject *obj, const char *what, Py_ssize_t *value);
/* Reads OBJ, a stream number another library hands over (a
   cudaStream_t's value, DLPack's and the CUDA Array Interface's 1 and
   2), into *VALUE; the caller checks its own special values.  A
   stream's handle is an address in this process, and user addresses lie
   below 2**63 on every 64-bit system: a larger number names no stream
   (CUDA would crash on it) and raises ValueError naming WHAT; TypeError
   for a bool or anything but an int.  0 or -1.  */
int gmpy_stream_number (PyObject *obj, const char *what, long long *value);

/* Reads OBJ, the argument WHAT ("root", "dest") of FNAME (an int, not a
   bool), into *VALUE, and the int itself into *INDEX (a new reference)
   for the caller's range message, which must name the number given: one
   too large for a Py_ssize_t reads as -1, never clipped.  TypeError for
   anything else (*INDEX NULL).  0 or -1.  */
int gmpy_rank_arg (PyObject *obj, const char *fname, const char *what,
                   PyObject **index, Py_ssize_t *value);
/* Reads OBJ, the argument WHAT ("root", "dest") of FNAME, into *RANK: a
   rank of the MPI job (comm-job.h); NULL leaves *RANK as it is.  0 or -1
   (TypeError, ValueError).  */
int gmpy_comm_rank_arg (PyObject *obj, const char *fname, const char *what,
                        int *rank);

/* The numpy.dtype for a dtype= argument (name, type or dtype), as a
   gm_dtype in *DTYPE.  0 or -1 (TypeError naming the supported ones).  */
int gmpy_dtype_arg (PyObject *obj, gm_dtype *dtype);

/* Types, one file each.  Each *_init adds its type to MODULE and STATE;
   0 or -1.  */
int gmpy_device_init (PyObject *module, gmpy_state *state);
int gmpy_array_init (PyObject *module, gmpy_state *state);
int gmpy_stream_init (PyObject *module, gmpy_state *state);
int gmpy_kernels_init (PyObject *module, gmpy_state *state);
int gmpy_pinned_init (PyObject *module, gmpy_state *state);

/* A checked Python function calling KERNEL, as gpumem.kernels.NAME is
   (argument checks, docstring, help ()).  New reference or NULL.  */
PyObject *gmpy_kernel_function (const gm_kernel *kernel);
/* A new module object called NAME with docstring DOC, holding one such
   function for each of the COUNT KERNELS and list ().  New reference or
   NULL.  */
PyObject *gmpy_kernels_namespace (const char *name, const char *doc,
                                  const gm_kernel *const *kernels, int count);
/* Adds gpumem._C_API, the extension authors' capsule (py-capi.c).  0 or
   -1.  */
int gmpy_capi_init (PyObject *module);
/* gpumem.use_pool, torch_mem_pool and the pool blocks other libraries
   hold (py-frameworks.c).  */
int gmpy_frameworks_init (PyObject *module);
/* A new gpumem._PoolBlock: NBYTES of the pool booked to OWNER on DEVICE,
   ordered on the foreign stream STREAM (a cudaStream_t, NULL: the
   default one), its address in *PTR; freed when the object goes.  NULL
   with gpumem's exception (py-frameworks.c).  */
PyObject *gmpy_pool_block_new (size_t nbytes, gm_mem_owner owner,
                               int device, void *stream, void **ptr);
/* Asks the caches other libraries keep on gpumem's pool (PyTorch's
   inside torch_mem_pool ()) to give idle blocks back, when any library
   was switched over (py-frameworks.c).  0 or -1.  */
int gmpy_frameworks_release_caches (void);
/* Adds gpumem._cupy_allocator, CuPy's allocator function in C
   (py-cupy-alloc.c).  */
int gmpy_cupy_alloc_init (PyObject *module);
/* gpumem.shared_empty, share, open_shared and sharing_stats, and the
   reducer that multiprocessing's pickler uses for DeviceArray
   (py-share.c).  0 or -1.  */
int gmpy_ipc_init (PyObject *module);
/* gpumem.share(OBJ, until_opened=UNTIL_OPENED, allow=ALLOW: NALLOW
   uids) and gpumem.open_shared (HANDLE), for the other modules that
   hand arrays between processes (py-comm-share.c).  A new reference, or
   NULL with an exception.  */
PyObject *gmpy_ipc_share (PyObject *obj, bool until_opened,
                          const uint32_t *allow, size_t nallow);
PyObject *gmpy_ipc_open (PyObject *handle);
/* The capsules that own a shared object's memory (py-share-capsule.c): a
   new capsule that owns BLOCK (gm_ipc_drop when it goes) or IMPORT
   (gm_ipc_close), or NULL with an exception after dropping or closing
   it.  gmpy_ipc_capsule_block is the block such a capsule OBJ owns, or
   NULL (no exception) when OBJ is anything else.  */
struct gm_ipc_block;
struct gm_ipc_import;
PyObject *gmpy_ipc_block_capsule (struct gm_ipc_block *block);
PyObject *gmpy_ipc_import_capsule (struct gm_ipc_import *import);
struct gm_ipc_block *gmpy_ipc_capsule_block (PyObject *obj);
/* gm_ipc_open of the decoded HANDLE without the GIL, Ctrl-C ending its
   wait (KeyboardInterrupt), for shared arrays and events alike
   (py-share-capsule.c): 0, or -1 with an exception.  */
struct gm_ipc_handle;
int gmpy_ipc_open_import (const struct gm_ipc_handle *handle,
                          struct gm_ipc_import **import, void **base,
                          int *device);

/* Module functions of the memory books (py-memory.c): memory_stats,
   set_memory_limit, empty_cache.  */
extern PyMethodDef gmpy_memory_methods[];
/* gpumem.nvtx (py-nvtx.c).  */
extern PyMethodDef gmpy_nvtx_methods[];
/* gpumem.show_config (py-config.c).  */
extern PyMethodDef gmpy_config_methods[];
/* Installs the memory history's stack hooks, adds memory_history,
   memory_snapshot, dump_snapshot and memory_report to MODULE, starts the
   history GPUMEM_MEMORY_HISTORY asks for, and registers what the
   program asks at exit (py-mem-history.c).  0 or -1.  */
int gmpy_mem_history_init (PyObject *module);
/* Module functions of the kernel files: load_kernels (py-plugin.c),
   jit and jit_stats (py-jit.c).  */
extern PyMethodDef gmpy_plugin_methods[];
extern PyMethodDef gmpy_jit_methods[];
/* gpumem.comm (py-comm.c), added to MODULE.  0 or -1.  */
int gmpy_comm_init (PyObject *module, gmpy_state *state);
/* Joins the job's MPI through mpi4py (py-comm-net.c), in a build without
   MPI, as the module is made, before any array: where an MPI launcher
   started this python (or GPUMEM_MPI=1), or mpi4py started MPI already.
   Where mpi4py cannot be imported, warns (RuntimeWarning) and
   gpumem.comm is absent.
   0, or -1 with an exception set.  */
int gmpy_comm_net_start (void);

/* Why gpumem.comm is absent in a build without MPI, or NULL.  */
const char *gmpy_comm_net_absent (void);

/* gpumem.allreduce_devices and bcast_devices (py-comm-devices.c), in
   every build: adds them to MODULE; gmpy_comm_devices_alias adds
   MODULE's to TARGET (gpumem.comm) too.  0 or -1.  */
int gmpy_comm_devices_init (PyObject *module, gmpy_state *state);
int gmpy_comm_devices_alias (PyObject *module, PyObject *target);

/* gpumem.Device.  */
typedef struct devicepy_object
{
  PyObject_HEAD
  int index;
  PyObject *previous;     /* list: devices current before each `with` */
} devicepy_object;

/* The Device object for INDEX (new reference), or NULL with ValueError
   naming the valid range.  */
PyObject *gmpy_device_get (int index);
/* Reads a device argument (None, an int or a Device) into *INDEX; None
   gives the current device.  0 or -1.  */
int gmpy_device_arg (PyObject *obj, int *index);
/* The current device of this thread (set by `with Device(i):`).  */
int gmpy_current_device (void);
/* 0 when INDEX names one of the backend's devices, else -1 with
   ValueError naming the valid range.  */
int gmpy_device_check (long index);

/* gpumem.Stream and gpumem.Event.  */
typedef struct streampy_object
{
  PyObject_HEAD
  gm_stream *stream;
  int device;
  bool external;          /* made by Stream.from_handle: not ours */
  bool non_blocking;      /* the backend's GM_STREAM_NON_BLOCKING */
} streampy_object;


/* gpumem.current_stream(device=None).  */
PyObject *gmpy_current_stream_fn (PyObject *module, PyObject *args,
                                  PyObject *kwargs);

/* The thread's stream context (py-stream-context.c).  */
/* The stream gmpy_dispatch_get (OBJ, DEVICE) gives, in *STREAM: the
   given one, else, when DEVICE >= 0, the current stream of DEVICE in
   this thread (see gmpy_stream_current), else NULL: the default stream
   (py-dispatch.c).  0 or -1.  */
int gmpy_stream_arg (PyObject *obj, int device, gm_stream **stream);
/* The Stream of the innermost open `with stream:` block of DEVICE in
   this thread, or None: a new reference, NULL with an exception.  */
PyObject *gmpy_stream_current (int device);
/* Whether a `with stream:` block of any device is open in this thread.  */
bool gmpy_stream_context_open (void);
/* The count of open blocks, in all threads, that pick the stream of
   calls without stream=: `with stream:` blocks (counted by
   gmpy_stream_context_push and _pop) and gpumem.concurrent () blocks
   (counted by gmpy_launch_blocks_note: OPENED true on entry, false on
   exit).  *gmpy_launch_blocks () is nonzero while any is open.  Under
   the GIL.  */
void gmpy_launch_blocks_note (bool opened);
const uint32_t *gmpy_launch_blocks (void);
/* Counts a non-blocking Stream made (MADE true) or gone (false), and
   whether any is alive, under the GIL.  While any is, code that
   launches on the default stream on its own asks gpumem for its stream
   (gmpy_dispatch_handle joins them): each counts as a block that picks
   the launch stream, so that a lent view is not read in place.  */
void gmpy_non_blocking_note (bool made);
bool gmpy_non_blocking_streams (void);
/* Opens a `with stream:` block of STREAM (a gpumem.Stream) in this
   thread: its device's calls without stream= go to it until
   gmpy_stream_context_pop.  0 or -1.  */
int gmpy_stream_context_push (PyObject *stream);
/* Closes STREAM's block opened by the calling frame (else its innermost
   one), wherever it is in its thread's stack and whichever thread opened
   it, as if it had never opened: the stream of calls without stream=
   is again that of the innermost block still open.  RuntimeError when
   STREAM has no open block.  0 or -1.  */
int gmpy_stream_context_pop (PyObject *stream);

/* gpumem.Event (py-stream.c).  */
typedef struct eventpy_object
{
  PyObject_HEAD
  gm_event *event;
  int device;
  bool recorded;
  bool timing;            /* made with timing=True */
  bool interprocess;      /* may be shared (Event(interprocess=True)) */
  /* A shared event's memory: the producer's block (made at its first
     share) or the consumer's import, as a capsule; else NULL.  */
  PyObject *shared;
} eventpy_object;

/* A new gpumem.Event over EVENT (an interprocess event opened from
   another process) on DEVICE, keeping SHARED (its import) while it
   lives.  Takes EVENT in every case.  New reference or NULL.  */
PyObject *gmpy_event_wrap (gm_event *event, int device, PyObject *shared);

/* py-share-event.c: the handle of an interprocess EVENT (gpumem.Event) as
   bytes, new reference or NULL (gpumem.Error for an event not made with
   interprocess=True); and the Event that a decoded event HANDLE opens.  */
PyObject *gmpy_event_share (PyObject *event, bool until_opened,
                            const uint32_t *allow, size_t nallow);
PyObject *gmpy_event_open (const struct gm_ipc_handle *handle);

/* gpumem.DeviceArray.  */
/* Which memory an array's allocation is (memory= of the functions
   that make arrays): device memory, or managed memory whose home is the
   array's device (py-managed.c).  */
typedef enum gmpy_memory
{
  GMPY_MEMORY_DEVICE,
  GMPY_MEMORY_MANAGED
} gmpy_memory;

typedef struct arraypy_object
{
  PyObject_HEAD
  char *data;                  /* address of element 0 */
  int ndim;
  Py_ssize_t shape[GM_MAX_NDIM];
  /* Bytes from one index to the next along each axis (negative for a
     reversed view); C-contiguous for every array but a strided view.  */
  Py_ssize_t strides[GM_MAX_NDIM];
  bool contiguous;             /* C-contiguous: the fast paths apply */
  Py_ssize_t size;
  gm_dtype dtype;
  int device;
  bool readonly;
  bool released;               /* free () was called on this object */
  /* An owner whose bytes the spill engine moved to host memory (its
     DATA and ALLOC NULL until they come back on use).  */
  bool spilled;
  /* A view's element 0, in bytes from its books' (the array that keeps
     the books: gmpy_array_usable sets DATA from it).  */
  Py_ssize_t offset;
  /* Owner: the memory it allocated, and its size, while it is the
     books' (not shared).  NULL for views and for arrays wrapped around
     foreign memory.  */
  void *alloc;
  size_t alloc_bytes;
  /* The record of the memory's holders (block-record.h), held by this
     array until it lets go: an owner's allocation, or the foreign
     memory an array wraps (its last release lets go of the foreign
     owner).  NULL for views, which hold their base.  */
  gm_block *block;
  /* A view's owner (a DeviceArray), or the foreign object that owns the
     memory; NULL for an owner.  Kept alive while this object lives.  */
  PyObject *base;
  /* The gpumem.Stream whose work last wrote this memory (kept on the
     owner; on the array itself when it has none), or NULL: named as
     the stream by __cuda_array_interface__ while that work is pending.  */
  PyObject *last_stream;
  /* DLPack exports of this array (and, on an owner, of its views) that
     their consumers still hold: free () leaves the memory to them.  */
  Py_ssize_t exports;
  /* Calls running without the GIL that use this memory (kept on the
     array that keeps the books: an owner, or an array over foreign
     memory): free () leaves the memory to the last of them
     (gmpy_array_hold).  */
  Py_ssize_t users;
  PyObject *weakreflist;
  /* The strides in elements, as the DLPack C exchange API lends them
     (py-dlpack-exchange.c): malloc'd at the first such call, NULL
     before.  */
  int64_t *dl_strides;
  /* What the array lends a C++ caster to read in place
     (gm_c_api_table.lent_offset): filled by the C API's load_view while
     the array is plain (py-capi.c), made unusable before its memory is
     freed (gmpy_array_mark_released) or shared, or a stream's work
     becomes pending on it (gmpy_array_unlend).  */
  gm_lent lent;
  /* The memory of the allocation (a view's: its owner's).  */
  gmpy_memory memory;
} arraypy_object;

/* Makes ARRAY's lent view unusable: casters go through load_view until
   it lends again (py-capi.c).  */
static inline void
gmpy_array_unlend (arraypy_object *array)
{
  array->lent.usable = 0;
}

/* Marks ARRAY freed (free () was called, or its memory is gone), its
   lent view withdrawn first: the one way RELEASED is set.  */
static inline void
gmpy_array_mark_released (arraypy_object *array)
{
  gmpy_array_unlend (array);
  array->released = true;
}

/* The record of the holders of OBJ's memory (a DeviceArray's, a view's
   its base's), or NULL for anything else or memory already let go
   (py-array-core.c, as all the array's helpers below).  */
gm_block *gmpy_array_block (PyObject *obj);
/* Whether OBJ is a DeviceArray.  */
int gmpy_array_check (PyObject *obj);
/* The owner whose allocation ARRAY uses (ARRAY itself for an owner), or
   NULL for foreign memory.  */
arraypy_object *gmpy_array_owner (arraypy_object *array);

/* Another library's array in gpumem's pool (use_pool), for share()
   (py-share-pool.c).  gmpy_ipc_pool_block: the shareable block of
   ARRAY, a DeviceArray over foreign memory, when that memory is a block
   another library holds from gpumem's pool (made shareable on its first
   share), and in *START the block's start; NULL without an exception
   when it is not, NULL with one on error.  gmpy_ipc_pool_array: OBJ
   (neither a DeviceArray nor an Event) as a DeviceArray over its memory,
   which must be such a block: a new reference, or NULL with TypeError
   for an object without device memory, gpumem.Error for memory outside
   gpumem's pool.  */
struct gm_ipc_block *gmpy_ipc_pool_block (arraypy_object *array,
                                          const char **start);
PyObject *gmpy_ipc_pool_array (PyObject *obj);
/* 0 when ARRAY's memory may be used (a spilled array back first), else
   -1 with ValueError (freed) (py-array-core.c).  A use that may write
   (WRITE; when unsure, a use writes) ends the spill engine's clean host
   copy (gm_spill_written); one that only reads (a copy's source, an in
   parameter) keeps it.  */
int gmpy_array_usable (arraypy_object *array);
int gmpy_array_usable_for (arraypy_object *array, bool write);

/* The DeviceArray core (py-array-core.c): what the type's methods and the
   interop files build on.  */
/* A new owner array of SHAPE and DTYPE on DEVICE (uninitialized).  */
arraypy_object *gmpy_array_new (int ndim, const Py_ssize_t *shape,
                                gm_dtype dtype, int device,
                                gm_stream *stream);
#include "py-spill.h"
/* gmpy_array_new with the allocation in MEMORY, for the calls that make
   an array from its shape alone (empty, zeros, full, the *_like ones,
   to_device), which hold no other array's address: with spilling on,
   idle arrays may move to host memory to make room.  */
arraypy_object *gmpy_array_new_in (int ndim, const Py_ssize_t *shape,
                                   gm_dtype dtype, int device,
                                   gm_stream *stream, gmpy_memory memory);
/* ARRAY's bytes: its size times its item size.  */
size_t gmpy_array_nbytes (const arraypy_object *array);
/* A view of SOURCE's memory at byte OFFSET from its data, of NDIM
   dimensions SHAPE and STRIDES (bytes): a new reference or NULL.  */
PyObject *gmpy_array_view (arraypy_object *source, Py_ssize_t offset,
                           int ndim, const Py_ssize_t *shape,
                           const Py_ssize_t *strides);
/* A new array of SHAPE and DTYPE on DEVICE over memory gpumem did not
   allocate, at DATA; it holds a strong reference to BASE, which keeps
   that memory alive.  New reference or NULL.  */
PyObject *gmpy_array_wrap (int ndim, const Py_ssize_t *shape, gm_dtype dtype,
                           int device, void *data, bool readonly,
                           PyObject *base);
/* Records that the work of a call dispatched as D writes OBJ's memory,
   when OBJ is a DeviceArray and D names a gpumem.Stream (stream= or a
   `with stream:` block's); nothing else is recorded: the default
   stream's work completes before the call returns.  D NULL, for C
   callers that hold no dispatch: the dispatch of a call on OBJ's device
   naming no stream.  */
void gmpy_array_note_stream (PyObject *obj, const gmpy_dispatch *d);
/* The gpumem stream whose work writing ARRAY's memory is still pending,
   in *STREAM; NULL when none is.  0, or -1 with an exception.  */
int gmpy_array_pending_stream (arraypy_object *array, gm_stream **stream);
/* Marks the memory of OBJ, when it is a DeviceArray, in use by a call
   that is about to run without the GIL (a copy, a kernel and the wait
   for it, a collective), until gmpy_array_unhold (the result).  In
   between, free () from another thread only makes gpumem refuse the
   array (later calls raise ValueError); the memory itself is released
   when the last such call ends, so no call ever uses freed memory.
   Returns a new reference for gmpy_array_unhold, or NULL when OBJ is
   not a DeviceArray; never fails.  */
PyObject *gmpy_array_hold (PyObject *obj);
/* Ends what gmpy_array_hold (HELD) began; HELD may be NULL.  Releases
   the memory if free () was called meanwhile.  Keeps any pending
   exception; never fails (a failed release is unraisable).  */
void gmpy_array_unhold (PyObject *held);
/* Adds DELTA (+1 or -1) to the live DLPack exports of ARRAY and of its
   owner; when they drop to 0 on an array free () was called on, its
   memory is released then.  Never fails (errors are unraisable).  */
void gmpy_array_exports_add (arraypy_object *array, int delta);
/* What free () does once no DLPack consumer and no call without the
   GIL holds ARRAY's memory: an owner releases its allocation, a view or
   a wrapped foreign array lets go of what it holds.  */
void gmpy_array_let_go (arraypy_object *array);
/* Gives ARRAY, just wrapped around foreign memory, the byte STRIDES of
   that memory (its ndim of them).  */
void gmpy_array_set_strides (arraypy_object *array, const Py_ssize_t *strides);
/* Checks foreign byte STRIDES for NDIM-dimensional DIMS of ITEMSIZE-byte
   elements: multiples of ITEMSIZE, and no axis of length > 1 with stride
   0 (elements that share memory).  Sets *CONTIGUOUS.  0, or -1 with
   ValueError naming WHAT.  */
int gmpy_strides_check (int ndim, const Py_ssize_t *dims,
                        const Py_ssize_t *strides, size_t itemsize,
                        bool *contiguous, const char *what);
/* ARRAY's strides in bytes, a new tuple or NULL.  */
PyObject *gmpy_strides_tuple (const arraypy_object *array);
/* The type's slots for what an array holds (its base, its last
   stream, its allocation): tp_traverse, tp_clear and tp_dealloc.  */
int gmpy_array_traverse (PyObject *self, visitproc visit, void *arg);
int gmpy_array_clear (PyObject *self);
void gmpy_array_dealloc (PyObject *self);

/* Indexing and assignment (py-index.c).  */
PyObject *gmpy_array_subscript (PyObject *self, PyObject *key);
int gmpy_array_ass_subscript (PyObject *self, PyObject *key,
                              PyObject *value);
/* sq_item, so that iteration walks the first axis.  */
PyObject *gmpy_array_item (PyObject *self, Py_ssize_t index);
/* tp_iter: the first axis's items; TypeError for a 0-d array.  */
PyObject *gmpy_array_iter (PyObject *self);

/* Copies of any layout, fill and copy() (py-array-copy.c).  */
/* DeviceArray.fill (value) and DeviceArray.copy ().  */
PyObject *gmpy_array_fill (PyObject *self, PyObject *value);
PyObject *gmpy_array_copy (PyObject *self, PyObject *unused);
/* Fills ARRAY (any layout) with VALUE, converted as numpy.array (VALUE,
   dtype) converts it.  0 or -1.  */
int gmpy_array_fill_value (arraypy_object *array, PyObject *value);
/* DST[...] = SRC for DeviceArrays, queued on STREAM (of DST's device):
   directly on the device when both are on one device with equal dtypes
   and shapes, do not overlap and the copy takes few calls; else through
   host memory (complete on return; it also broadcasts SRC and converts
   its dtype as NumPy's assignment does: unsafe casting).  The caller
   notes the stream.  0 or -1.  */
int gmpy_array_assign (arraypy_object *dst, arraypy_object *src,
                       gm_stream *stream);
/* gpumem.copy (DST, SRC, COUNT, STREAM_OBJ) when DST or SRC is a strided
   DeviceArray view: COUNT must be None or all of the view's elements,
   and the other side as many elements (any shape, host or device).
   1 when done (complete on return), 0 when neither is a strided view
   (the caller copies), -1 with an exception.  */
int gmpy_copy_strided (PyObject *dst, PyObject *src, PyObject *count,
                       PyObject *stream_obj);
/* ARRAY (any layout) in a new C-contiguous numpy.ndarray, complete on
   return even when STREAM is given.  New reference or NULL.  */
PyObject *gmpy_array_strided_to_host (arraypy_object *array,
                                      gm_stream *stream);
/* Writes host data SRC into ARRAY (any layout): SRC broadcast to its
   shape when BROADCAST, else of the same number of elements; converted
   as NumPy's same_kind casting allows, or any way (UNSAFE, as NumPy's
   item assignment).  Complete on return.  WHAT names SRC in messages.
   0 or -1 (TypeError, ValueError, or the backend's error).  */
int gmpy_array_strided_from_host (arraypy_object *array, PyObject *src,
                                  bool broadcast, bool unsafe,
                                  gm_stream *stream, const char *what);

/* A DeviceArray as one Python scalar (py-array-scalar.c), by NumPy's
   rules: the slots nb_float, nb_int, nb_bool, nb_index and the methods
   __complex__ () and item ().  An array of one element gives it, copied
   to the host (complete on return); float, int and complex raise
   TypeError for another size, item () ValueError, bool () ValueError
   for an empty array or one of more elements; __index__ takes only a
   0-d array of an integer dtype (else TypeError).  */
PyObject *gmpy_array_float (PyObject *self);
PyObject *gmpy_array_int (PyObject *self);
int gmpy_array_bool (PyObject *self);
PyObject *gmpy_array_index (PyObject *self);
PyObject *gmpy_array_complex (PyObject *self, PyObject *unused);
PyObject *gmpy_array_to_scalar (PyObject *self, PyObject *unused);

/* DeviceArray's refusals of array math (py-array-math.c): operators,
   <, <=, >, >=, and a tp_getattro that turns NumPy's computing methods
   (a.sum ()) into the same TypeError, which names cupy.asarray (a),
   torch.from_dlpack (a) and kernels.  Ends with {0, NULL}.  */
extern const PyType_Slot gmpy_array_math_slots[];

/* Views with permuted axes (py-transpose.c): DeviceArray.transpose
   (*axes) and the attribute T.  */
PyObject *gmpy_array_transpose (PyObject *self, PyObject *args);
PyObject *gmpy_array_get_T (PyObject *self, void *closure);

/* Pickling by value (py-pickle.c): DeviceArray.__reduce__ () gives
   gpumem._rebuild and (a host copy, the device index);
   gpumem._rebuild (host, device) makes the array again.  */
PyObject *gmpy_array_reduce (PyObject *self, PyObject *unused);
PyObject *gmpy_rebuild (PyObject *module, PyObject *args);

/* Arrays made like others, and filled ones (py-array-make.c):
   gpumem.empty_like, zeros_like, ones_like, full_like, full, ones.  */
extern PyMethodDef gmpy_make_methods[];

/* Managed arrays (py-managed.c).  Reads a memory= argument (None:
   FALLBACK; else 'device' or 'managed') into *MEMORY: 0, or -1 with
   TypeError or ValueError.  */
int gmpy_memory_arg (PyObject *obj, gmpy_memory fallback,
                     gmpy_memory *memory);
/* DeviceArray.memory, prefetch, discard, advise; __array__ of a
   managed array (a NumPy view of its memory, no copy).  */
PyObject *gmpy_array_get_memory (PyObject *self, void *closure);
PyObject *gmpy_array_prefetch (PyObject *self, PyObject *args,
                               PyObject *kwargs);
PyObject *gmpy_array_discard (PyObject *self, PyObject *args,
                              PyObject *kwargs);
PyObject *gmpy_array_advise (PyObject *self, PyObject *args,
                             PyObject *kwargs);
PyObject *gmpy_array_managed_numpy (PyObject *self, PyObject *args,
                                    PyObject *kwargs);
/* gpumem.prefetch.  */
extern PyMethodDef gmpy_managed_methods[];

/* Module functions that make arrays (py-array.c).  */
PyObject *gmpy_empty (PyObject *module, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames);
PyObject *gmpy_zeros (PyObject *module, PyObject *const *args,
                      Py_ssize_t nargs, PyObject *kwnames);
PyObject *gmpy_alloc_gpu_memory (PyObject *module, PyObject *args,
                                 PyObject *kwargs);
PyObject *gmpy_to_device (PyObject *module, PyObject *args,
                          PyObject *kwargs);
/* gpumem.pinned_empty (py-pinned.c).  */
PyObject *gmpy_pinned_empty (PyObject *module, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames);

/* The CUDA Array Interface (py-cai.c).  */
/* DeviceArray.__cuda_array_interface__: a new dict, or NULL
   (AttributeError where the backend's memory is not CUDA memory).  */
PyObject *gmpy_array_cai (PyObject *self, void *closure);

/* Device memory described by anything a kernel or copy accepts: a
   DeviceArray or a __cuda_array_interface__ object (read by py-cai.c).  */
typedef struct gmpy_devbuf
{
  char *data;
  Py_ssize_t size;
  gm_dtype dtype;
  int device;
  bool readonly;
  bool reads;                  /* only read: gmpy_devbuf_get_read */
  /* The DeviceArray it describes (borrowed from the caller), or NULL:
     see gmpy_devbuf_usable.  */
  PyObject *array;
} gmpy_devbuf;

/* Fills BUF from OBJ if OBJ is device memory: 1 if it is, 0 if it is
   not device memory at all, -1 with an exception set if it is but
   cannot be used (freed, unsupported dtype, not contiguous).  WHAT
   names the argument in messages; _read for a call that only reads.  */
int gmpy_devbuf_get (PyObject *obj, gmpy_devbuf *buf, const char *what);
int gmpy_devbuf_get_read (PyObject *obj, gmpy_devbuf *buf, const char *what);
/* Reads OBJ's __cuda_array_interface__ (versions 0 to 3) into BUF, and
   its shape into *NDIM and DIMS and, when STRIDES is not NULL, its byte
   strides into STRIDES (else it must be C-contiguous); waits for the
   stream it names, if any, so that the data may be read.  1, 0 when OBJ
   has no interface, -1 with an exception (TypeError for a malformed
   interface or an unsupported type, ValueError for strides that are not
   C-contiguous where they must be or that are not usable, a mask, a
   pointer to host memory, or stream 0).  */
int gmpy_cai_read (PyObject *obj, gmpy_devbuf *buf, int *ndim,
                   Py_ssize_t dims[GM_MAX_NDIM], Py_ssize_t *strides,
                   const char *what);
/* 0 when BUF's memory may still be used, else -1 with ValueError: the
   Python code a call runs after gmpy_devbuf_get (an argument's __index__
   or __array__, a signal handler, another thread while the GIL is
   released) may have freed its DeviceArray.  Check again after any such
   code, right before the memory is handed to the backend
   (py-array-core.c).  */
int gmpy_devbuf_usable (const gmpy_devbuf *buf);

/* gpumem.asarray (OBJ) (py-asarray.c): OBJ itself when a DeviceArray,
   else a DeviceArray over the memory of a CUDA Array Interface object
   or a DLPack producer of device memory, holding OBJ.  */
PyObject *gmpy_asarray (PyObject *module, PyObject *obj);
/* gpumem.asarray (obj, readonly=False) as Python calls it.  */
PyObject *gmpy_asarray_py (PyObject *module, PyObject *args,
                           PyObject *kwargs);
/* OBJ as asarray takes it, the dispatch keyed on OBJ's type: a
   DeviceArray itself, then a type's DLPack exchange API, then
   __dlpack__, then __cuda_array_interface__; with HOST_DLPACK, on the
   host backend, DLPack producers of host memory too (as from_dlpack
   takes them).  WHO names the caller in the TypeError for an object
   that is no device memory (NULL: none).  New reference or NULL.  */
PyObject *gmpy_asarray_for (PyObject *obj, const char *who,
                            bool host_dlpack);


/* Module-level copy functions (py-copy.c).  */
PyObject *gmpy_copy_to_gpu (PyObject *module, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *kwnames);
PyObject *gmpy_copy_from_gpu (PyObject *module, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames);
PyObject *gmpy_copy (PyObject *module, PyObject *const *args,
                     Py_ssize_t nargs, PyObject *kwnames);
/* The copy engine (py-copy-engine.c).  Each checks the whole copy
   once (counts against both sides, dtypes, a writable destination)
   before the first byte moves, and sends it where D says.  */
/* Host -> device: the first COUNT elements of host object SRC (all of
   them when COUNT < 0, counted as NumPy counts them), converted to DST's
   dtype as NumPy's same_kind casting allows, into DST.  */
int gmpy_copy_host_to_device (const gmpy_devbuf *dst, PyObject *src,
                              Py_ssize_t count, const gmpy_dispatch *d,
                              const char *src_name);
/* Device -> host: COUNT elements of SRC into writable host object DST.  */
int gmpy_copy_device_to_host (PyObject *dst, const gmpy_devbuf *src,
                              Py_ssize_t count, const gmpy_dispatch *d,
                              const char *dst_name);
/* Device -> device (gpumem.copy): COUNT elements (< 0: all of SRC) of
   equal dtypes; a stream D names must be on DST's or SRC's device.  */
int gmpy_copy_device_to_device (const gmpy_devbuf *dst,
                                const gmpy_devbuf *src, Py_ssize_t count,
                                const gmpy_dispatch *d);
/* Runs BACKEND->copy for large copies in chunks, without the GIL,
   checking for Ctrl-C between chunks.  0 or -1.  */
int gmpy_backend_copy (void *dst, int dst_device, const void *src,
                       int src_device, size_t nbytes, gm_stream *stream);
/* gmpy_backend_copy, checking before each chunk that DST_BUF and
   SRC_BUF (NULL for host memory) may still be used (gmpy_devbuf_usable):
   the Python code run since they were read, or between chunks, may have
   freed one.  Their arrays are held meanwhile, and a copy without a
   stream waits first for the work queued on its devices
   (gmpy_copy_enter).  Ranges
   that overlap are copied as memmove would, through host memory and
   complete on return, on every backend.  0 or -1.  */
int gmpy_guarded_copy (const gmpy_devbuf *dst_buf, const gmpy_devbuf *src_buf,
                       void *dst, int dst_device, const void *src,
                       int src_device, size_t nbytes, const gmpy_dispatch *d);
/* What gmpy_copy_enter holds for the copies of one call.  */
typedef struct gmpy_copy_hold
{
  PyObject *arrays[2];          /* the DeviceArrays (borrowed), or NULL */
  PyObject *held[2];            /* what gmpy_array_hold gave for them */
} gmpy_copy_hold;
/* The one rule for every copy between DeviceArray memory and anything
   else (py-copy-engine.c): before the first byte moves, checks that
   DST_ARRAY and SRC_ARRAY (DeviceArrays, or NULL for host or foreign
   memory) may be used, holds them (gmpy_array_hold) so that free ()
   from another thread leaves their memory to the copies, and, without
   STREAM, waits for the work queued on DST_DEVICE and SRC_DEVICE (-1:
   host memory) as gmpy_wait waits (answering Ctrl-C, letting other
   threads run), then checks them again: that wait may have let another
   thread free one.  The caller then runs its backend copies (after that
   wait they take their usual time, even with the GIL held), checks
   again with gmpy_copy_usable after any Python code or released GIL,
   and ends with gmpy_copy_leave.  0; or -1 with an exception set
   (ValueError for a freed array, KeyboardInterrupt) and nothing held.  */
int gmpy_copy_enter (gmpy_copy_hold *hold, PyObject *dst_array,
                     int dst_device, PyObject *src_array, int src_device,
                     gm_stream *stream);
/* 0 while HOLD's arrays may still be used, else -1 with ValueError.  */
int gmpy_copy_usable (const gmpy_copy_hold *hold);
/* Ends what gmpy_copy_enter (HOLD) began: lets go of the arrays, whose
   memory goes now if free () was called meanwhile.  Keeps any pending
   exception; never fails.  */
void gmpy_copy_leave (gmpy_copy_hold *hold);

#include "py-dispatch.h"

#endif /* GM_PYTHON_H */
