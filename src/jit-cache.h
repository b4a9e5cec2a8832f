/* jit-cache.h -- the files of gpumem.jit's disk cache: one file per
   compiled kernel, its format and where it is read and written
   (jit.c describes the format and the key).  */

#ifndef GM_JIT_CACHE_H
#define GM_JIT_CACHE_H

#include "jit.h"

/* A cache file's first 8 bytes; also the start of every key.  */
#define GM_JIT_CACHE_MAGIC "GMJIT001"

/* Reads the cache file PATH for KEY: 1 with CODE's entry, image and
   size filled, 0 when there is none, -1 when it exists but does not
   check out (corrupt).  */
int gm_jit_cache_read (const char *path, const unsigned char key[32],
                       gm_jit_code *code);

/* Writes CODE as the cache file PATH in DIR for KEY, whole or not at
   all, making DIR as mkdir -p does.  0, or -1 with WHY (of WHY_SIZE
   bytes) saying why.  */
int gm_jit_cache_write (const char *dir, const char *path,
                        const unsigned char key[32], const gm_jit_code *code,
                        char *why, size_t why_size);

#endif /* GM_JIT_CACHE_H */
