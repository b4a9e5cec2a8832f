/* gpumem/embed.h -- running gpumem inside another C or C++ program.

   A program links libgpumem (pkg-config --libs gpumem), registers its
   own kernels (the table of gpumem/kernel.h, as a plugin exports it),
   starts gpumem, and runs Python code that imports the gpumem module:

     #include <gpumem/embed.h>

     gm_embed_register_kernels (gm_plugin_table (), "myprogram");
     if (gm_embed_init (NULL) != GM_EMBED_OK)
       fprintf (stderr, "%s\n", gm_embed_last_error ());
     gm_embed_run_string ("import gpumem; print(gpumem.kernels.list())");
     gm_embed_finish ();

   Every function returns a gm_embed_status; gm_embed_last_error ()
   says what went wrong.  One interpreter a process, from one thread.
   gpumem-capi(3) is the manual.  */

#ifndef GPUMEM_EMBED_H
#define GPUMEM_EMBED_H

#include <gpumem/kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gm_embed_status
{
  GM_EMBED_OK = 0,
  GM_EMBED_EXCEPTION = 1,    /* the Python code raised (traceback printed
                                to standard error) */
  GM_EMBED_USAGE = 2,        /* a bad argument, or a file that does not
                                open */
  GM_EMBED_UNAVAILABLE = 3,  /* the backend asked for cannot run */
  GM_EMBED_KERNELS = 4,      /* a kernel table was refused */
  GM_EMBED_STATE = 5         /* called out of order (before init, after
                                finish, registering after init) */
} gm_embed_status;

typedef enum gm_embed_backend
{
  GM_EMBED_BACKEND_AUTO = 0,  /* CUDA when a device answers, else host */
  GM_EMBED_BACKEND_CUDA = 1,
  GM_EMBED_BACKEND_HOST = 2
} gm_embed_backend;

typedef struct gm_embed_options
{
  gm_embed_backend backend;
  int quiet;               /* nonzero: no notice on standard error */
  /* The Python interpreter (or virtual environment's bin/python3) whose
     environment to use; NULL: the one gpumem was built with.  */
  const char *python;
  /* sys.argv for the code; NULL and 0 give [""].  */
  int argc;
  char **argv;
} gm_embed_options;

/* Adds the kernels of TABLE to gpumem.kernels, under the name ORIGIN in
   messages and gpumem -k style listings.  Before gm_embed_init.  The
   table and what it points to must live until gm_embed_finish.
   GM_EMBED_KERNELS (the message names ORIGIN and the kernel) for a table
   gpumem refuses, as it refuses a plugin's.  */
gm_embed_status gm_embed_register_kernels (const gm_plugin_info *table,
                                           const char *origin);

/* Loads the kernel plugins named in PATHS, colon-separated as the
   GPUMEM_KERNELS variable of the gpumem program (empty entries skipped;
   NULL or "" loads none), into gpumem.kernels, with that variable's
   parsing and checks: gm_embed_load_kernels (getenv ("GPUMEM_KERNELS"))
   honours it.  Before gm_embed_init.  GM_EMBED_KERNELS (the message
   names the file and, where one is at fault, the kernel) for a plugin
   that does not load; those before it stay loaded.  */
gm_embed_status gm_embed_load_kernels (const char *paths);

/* Starts the backend and the Python interpreter with the gpumem module.
   OPTIONS may be NULL (auto backend, notices on, the built-in Python).
   GM_EMBED_UNAVAILABLE when the backend asked for cannot run,
   GM_EMBED_STATE when gpumem or Python already runs.  */
gm_embed_status gm_embed_init (const gm_embed_options *options);

/* Runs CODE (Python statements) in __main__.  GM_EMBED_EXCEPTION when it
   raised (SystemExit with a nonzero code too); SystemExit with code 0 or
   None is GM_EMBED_OK.  */
gm_embed_status gm_embed_run_string (const char *code);

/* Runs the Python file PATH in __main__, its folder first on sys.path.
   GM_EMBED_USAGE when it does not open; else as gm_embed_run_string.  */
gm_embed_status gm_embed_run_file (const char *path);

/* Ends the interpreter, then the backend.  GM_EMBED_EXCEPTION when
   finalizing Python failed.  Once; gpumem cannot be started again in
   the same process.  */
gm_embed_status gm_embed_finish (void);

/* What the last call that did not return GM_EMBED_OK found wrong.  */
const char *gm_embed_last_error (void);

#ifdef __cplusplus
}
#endif

#endif /* GPUMEM_EMBED_H */
