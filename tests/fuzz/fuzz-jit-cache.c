/* fuzz-jit-cache.c -- libFuzzer target: gpumem.jit's cache files
   (gm_jit_cache_parse in src/plugin/jit-cache.c), the bytes read from a file
   that the user's cache folder holds.

   Input: one byte of choice, then the file.  With the choice's low bit
   set, the key asked for is the one in the file's header (so that the
   fuzzer reaches the lengths and the checksum at once), else a fixed
   one.  A file that parses must be exactly what the format says: the
   magic, the key asked for, an entry name without NUL of the length
   given, an image whose SHA-256 is the header's, nothing more; the
   entry and image returned must be those bytes.  One that does not
   must leave the code untouched.  A file that parses is then written
   with gm_jit_cache_write into a private folder and read back with
   gm_jit_cache_read, which must give it back.  Anything else aborts.  */

#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit-cache.h"
#include "sha256.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static char folder[64];

static uint64_t
le (const uint8_t *p, int n)
{
  uint64_t v = 0;

  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void
remove_folder (void)
{
  char path[96];

  snprintf (path, sizeof path, "%s/fuzzed.bin", folder);
  unlink (path);
  rmdir (folder);
}

/* The round trip through a real file; the folder is this process's,
   removed when it exits.  */
static void
round_trip (const unsigned char key[32], const gm_jit_code *code)
{
  gm_jit_code back = {0};
  char why[512] = "";
  const char *name = "fuzzed.bin";

  if (folder[0] == '\0')
    {
      strcpy (folder, "/tmp/gpumem-fuzz-jit-XXXXXX");
      if (mkdtemp (folder) == NULL)
        abort ();
      atexit (remove_folder);
    }
  if (gm_jit_cache_write (folder, name, key, code, why, sizeof why) != 0
      || gm_jit_cache_read (folder, name, key, &back, why, sizeof why)
         != GM_JIT_CACHE_HIT
      || back.size != code->size || strcmp (back.entry, code->entry) != 0
      || memcmp (back.image, code->image, code->size) != 0)
    abort ();
  free (back.entry);
  free (back.image);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const unsigned char fixed[32] = {0x67, 0x70, 0x75, 0x6d};
  unsigned char key[32], digest[32];
  gm_jit_code code = {0};
  uint64_t entry_len, image_len;
  gm_sha256 ctx;
  uint8_t *file;

  if (size < 1)
    return 0;
  memcpy (key, (data[0] & 1) && size >= 41 ? data + 9 : fixed, 32);
  size--;
  /* A copy of its own, so that ASan sees any read past the end.  */
  file = malloc (size ? size : 1);
  if (file == NULL)
    return 0;
  memcpy (file, data + 1, size);
  if (gm_jit_cache_parse (file, size, key, &code) != 1)
    {
      if (code.entry != NULL || code.image != NULL || code.size != 0)
        abort ();
      free (file);
      return 0;
    }
  if (size < 84 || memcmp (file, GM_JIT_CACHE_MAGIC, 8) != 0
      || memcmp (file + 8, key, 32) != 0)
    abort ();
  entry_len = le (file + 40, 4);
  image_len = le (file + 44, 8);
  if (entry_len == 0 || image_len == 0 || size != 84 + entry_len + image_len
      || strlen (code.entry) != entry_len
      || memcmp (code.entry, file + 84, entry_len) != 0
      || code.size != image_len
      || memcmp (code.image, file + 84 + entry_len, image_len) != 0)
    abort ();
  gm_sha256_init (&ctx);
  gm_sha256_update (&ctx, code.image, code.size);
  gm_sha256_final (&ctx, digest);
  if (memcmp (digest, file + 52, 32) != 0)
    abort ();
  round_trip (key, &code);
  free (code.entry);
  free (code.image);
  free (file);
  return 0;
}
