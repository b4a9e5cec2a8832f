/* jit-cache.c -- the files of gpumem.jit's disk cache (jit-cache.h).  */

/* fchmod, strdup.  */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit-cache.h"
#include "sha256.h"

#define HEADER_SIZE (8 + 32 + 4 + 8 + 32)
/* Code larger than this is no kernel: a corrupt length.  */
#define MAX_IMAGE ((uint64_t) 1 << 30)

static void
put_u32 (unsigned char *p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char) (v >> (8 * i));
}

static void
put_u64 (unsigned char *p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char) (v >> (8 * i));
}

static uint64_t
get_le (const unsigned char *p, int n)
{
  uint64_t v = 0;

  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}


/* Reads the cache file PATH for KEY: 1 with *CODE filled, 0 when there
   is none, -1 when it exists but does not check out (corrupt).  */
int
gm_jit_cache_read (const char *path, const unsigned char key[32], gm_jit_code *code)
{
  unsigned char header[HEADER_SIZE], digest[32];
  uint64_t entry_len, image_len;
  struct stat st;
  gm_sha256 ctx;
  FILE *fp = fopen (path, "rb");
  int result = -1;

  if (fp == NULL)
    return errno == ENOENT ? 0 : -1;
  if (fstat (fileno (fp), &st) != 0
      || fread (header, 1, HEADER_SIZE, fp) != HEADER_SIZE
      || memcmp (header, GM_JIT_CACHE_MAGIC, 8) != 0
      || memcmp (header + 8, key, 32) != 0)
    goto done;
  entry_len = get_le (header + 40, 4);
  image_len = get_le (header + 44, 8);
  if (entry_len == 0 || entry_len > 4096 || image_len == 0
      || image_len > MAX_IMAGE
      || (uint64_t) st.st_size != HEADER_SIZE + entry_len + image_len)
    goto done;
  code->entry = malloc (entry_len + 1);
  code->image = malloc (image_len);
  if (code->entry == NULL || code->image == NULL
      || fread (code->entry, 1, entry_len, fp) != entry_len
      || fread (code->image, 1, image_len, fp) != image_len)
    goto done;
  code->entry[entry_len] = '\0';
  code->size = image_len;
  gm_sha256_init (&ctx);
  gm_sha256_update (&ctx, code->image, image_len);
  gm_sha256_final (&ctx, digest);
  if (memcmp (digest, header + 52, 32) != 0
      || strlen (code->entry) != entry_len)
    goto done;
  result = 1;
done:
  fclose (fp);
  if (result != 1)
    {
      free (code->entry);
      free (code->image);
      code->entry = NULL;
      code->image = NULL;
    }
  return result;
}

/* Makes folder DIR and its parents as mkdir -p does.  0 or -1 (errno).  */
static int
make_dirs (const char *dir)
{
  char path[4096];
  size_t len = strlen (dir);

  if (len == 0 || len >= sizeof path)
    {
      errno = ENAMETOOLONG;
      return -1;
    }
  memcpy (path, dir, len + 1);
  for (char *p = path + 1; *p != '\0'; p++)
    if (*p == '/')
      {
        *p = '\0';
        if (mkdir (path, 0777) != 0 && errno != EEXIST)
          return -1;
        *p = '/';
      }
  if (mkdir (path, 0777) != 0 && errno != EEXIST)
    return -1;
  return 0;
}

/* Writes CODE as the cache file PATH in DIR for KEY, whole or not at
   all.  0, or -1 with WHY filled.  */
int
gm_jit_cache_write (const char *dir, const char *path, const unsigned char key[32],
             const gm_jit_code *code, char *why, size_t why_size)
{
  unsigned char header[HEADER_SIZE];
  size_t entry_len = strlen (code->entry);
  char tmp[4200];
  gm_sha256 ctx;
  FILE *fp;
  int fd;

  if (make_dirs (dir) != 0)
    {
      snprintf (why, why_size, "cannot make the cache folder %.300s: %s",
                dir, strerror (errno));
      return -1;
    }
  /* A name of this process's own, made with mode 0666 so that the umask
     applies by itself (reading the umask means setting it, for the whole
     process, while other threads may be making files).  */
  fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++)
    {
      static _Atomic unsigned long counter;
      snprintf (tmp, sizeof tmp, "%s/.tmp-%ld-%lu", dir, (long) getpid (),
                (unsigned long) atomic_fetch_add (&counter, 1));
      fd = open (tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd < 0 && errno != EEXIST)
        break;
    }
  if (fd < 0)
    {
      snprintf (why, why_size, "cannot write in the cache folder %.300s: "
                "%s", dir, strerror (errno));
      return -1;
    }
  memcpy (header, GM_JIT_CACHE_MAGIC, 8);
  memcpy (header + 8, key, 32);
  put_u32 (header + 40, (uint32_t) entry_len);
  put_u64 (header + 44, code->size);
  gm_sha256_init (&ctx);
  gm_sha256_update (&ctx, code->image, code->size);
  gm_sha256_final (&ctx, header + 52);
  fp = fdopen (fd, "wb");
  if (fp == NULL
      || fwrite (header, 1, HEADER_SIZE, fp) != HEADER_SIZE
      || fwrite (code->entry, 1, entry_len, fp) != entry_len
      || fwrite (code->image, 1, code->size, fp) != code->size
      || fclose (fp) != 0)
    {
      snprintf (why, why_size, "cannot write a cache file in %.300s: %s",
                dir, strerror (errno));
      if (fp == NULL)
        close (fd);
      unlink (tmp);
      return -1;
    }
  if (rename (tmp, path) != 0)
    {
      snprintf (why, why_size, "cannot rename a cache file in %.300s: %s",
                dir, strerror (errno));
      unlink (tmp);
      return -1;
    }
  return 0;
}
