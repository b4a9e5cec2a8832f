/* jit-cache.h -- the files of gpumem.jit's disk cache: one file per
   compiled kernel (jit.c describes the format and the key), read only
   when nobody but the user or root can have written it (jit-cache.c
   says what is trusted and why).  */

#ifndef GM_JIT_CACHE_H
#define GM_JIT_CACHE_H

#include "jit.h"

/* A cache file's first 8 bytes; also the start of every key.  */
#define GM_JIT_CACHE_MAGIC "GMJIT001"

typedef enum gm_jit_cache_found
{
  GM_JIT_CACHE_NONE,       /* no such file (or no folder) */
  GM_JIT_CACHE_HIT,        /* read, checked, CODE filled */
  GM_JIT_CACHE_CORRUPT,    /* a trusted file that does not check out */
  GM_JIT_CACHE_UNTRUSTED   /* a folder or file others may have written */
} gm_jit_cache_found;

/* Checks the cache file DATA of SIZE bytes against KEY (the format in
   jit.c): 1 with CODE's entry and image (malloc'd) and size filled, -1
   when it does not check out (CODE untouched).  Reads no byte outside
   DATA; no file is involved.  */
int gm_jit_cache_parse (const unsigned char *data, size_t size,
                        const unsigned char key[32], gm_jit_code *code);

/* Reads the cache file NAME in the folder DIR for KEY into CODE (as
   gm_jit_cache_parse).  GM_JIT_CACHE_UNTRUSTED, with WHY (of WHY_SIZE
   bytes) saying why and naming DIR, when the folder or the file is not
   one the user alone (or root) controls: then nothing was read.  */
gm_jit_cache_found gm_jit_cache_read (const char *dir, const char *name,
                                      const unsigned char key[32],
                                      gm_jit_code *code, char *why,
                                      size_t why_size);

/* Writes CODE as the cache file NAME in DIR for KEY, whole or not at
   all: a temporary file of mode 0600 made with O_EXCL, renamed into
   place.  DIR is made as mkdir -p does, itself with mode 0700.  0; -1
   with WHY saying why it could not; -2 with WHY when DIR is not trusted
   or NAME is a file of another user (nothing is written then).  */
int gm_jit_cache_write (const char *dir, const char *name,
                        const unsigned char key[32], const gm_jit_code *code,
                        char *why, size_t why_size);

#endif /* GM_JIT_CACHE_H */
