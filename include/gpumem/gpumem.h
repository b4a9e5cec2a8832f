/* gpumem/gpumem.h -- gpumem's installed C interface, all of it.

   A program or library that uses gpumem includes this header and links
   with libgpumem ('pkg-config --cflags --libs gpumem').  It includes
   each installed header of gpumem; each of them can also be included
   alone:
     gpumem/kernel.h    kernel authors: the plain-C types of a kernel's
                        parameters and launch, the plugin table and its
                        macros (no Python, no CUDA)
     gpumem/embed.h     embedding gpumem in a program: its own kernels,
                        running Python code, status codes
   gpumem/extension.h, for Python extensions, includes <Python.h> and is
   not included here.  */

#ifndef GPUMEM_GPUMEM_H
#define GPUMEM_GPUMEM_H

#include "kernel.h"
#include "embed.h"

#endif /* GPUMEM_GPUMEM_H */
