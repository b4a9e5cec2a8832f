/* child-env.h -- what the program's child processes inherit.  */

#ifndef GM_CHILD_ENV_H
#define GM_CHILD_ENV_H

/* Prepares the environment that the program's children inherit, before
   Python starts: the folder of the gpumem extension module first on
   PYTHONPATH (when the module is found: installed beside the program,
   or built in the build tree), and BACKEND_NAME ("cuda" or "host", the
   backend the program chose) in GPUMEM_BACKEND.  A python started by
   multiprocessing (spawn, forkserver) or by subprocess with
   sys.executable then imports the same gpumem on the same backend.
   Returns the module's folder, or NULL when no module was found (then
   PYTHONPATH is left as it was).  */
const char *gm_child_env_setup (const char *backend_name);

#endif /* GM_CHILD_ENV_H */
