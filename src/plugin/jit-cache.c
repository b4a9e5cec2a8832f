/* jit-cache.c -- the files of gpumem.jit's disk cache (jit-cache.h):
   which files are trusted, reading one, writing one.

   A cache file is code that gpumem runs, so it is read only from where
   nobody but the user (or root) can have put it, as ssh's StrictModes
   and Git's safe.directory decide: the folder belongs to the user or
   root and no other user can write it (or it is sticky, as /tmp is,
   and then the file must be the user's own); the file is a regular
   file, not a symbolic link, belongs to the user or root, and is
   writable by neither group nor others.  A folder's group counts as
   others unless it is the user's private group (user_private_group).
   A folder named through a symbolic link is followed only when the
   link is the user's or root's, and then what it leads to is checked
   as any folder.  The key in a file's name and header is no
   protection: anyone can compute it from the source.  The folder and
   the file are opened once and checked through their descriptors
   (fstat), so what is checked is what is read.  */

/* openat, fstatat, renameat, O_NOFOLLOW, O_CLOEXEC, getpwuid_r.  */
#define _XOPEN_SOURCE 700
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jit-cache.h"
#include "sha256.h"

#define HEADER_SIZE (8 + 32 + 4 + 8 + 32)
/* An entry name longer than this is no kernel's: a corrupt length.  */
#define MAX_ENTRY 4096
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

int
gm_jit_cache_parse (const unsigned char *data, size_t size,
                    const unsigned char key[32], gm_jit_code *code)
{
  unsigned char digest[32];
  uint64_t entry_len, image_len;
  gm_sha256 ctx;
  char *entry = NULL;
  void *image = NULL;

  if (size < HEADER_SIZE || memcmp (data, GM_JIT_CACHE_MAGIC, 8) != 0
      || memcmp (data + 8, key, 32) != 0)
    return -1;
  entry_len = get_le (data + 40, 4);
  image_len = get_le (data + 44, 8);
  if (entry_len == 0 || entry_len > MAX_ENTRY || image_len == 0
      || image_len > MAX_IMAGE
      || (uint64_t) size != HEADER_SIZE + entry_len + image_len
      || memchr (data + HEADER_SIZE, '\0', entry_len) != NULL)
    return -1;
  gm_sha256_init (&ctx);
  gm_sha256_update (&ctx, data + HEADER_SIZE + entry_len, image_len);
  gm_sha256_final (&ctx, digest);
  if (memcmp (digest, data + 52, 32) != 0)
    return -1;
  entry = malloc (entry_len + 1);
  image = malloc (image_len);
  if (entry == NULL || image == NULL)
    {
      free (entry);
      free (image);
      return -1;
    }
  memcpy (entry, data + HEADER_SIZE, entry_len);
  entry[entry_len] = '\0';
  memcpy (image, data + HEADER_SIZE + entry_len, image_len);
  code->entry = entry;
  code->image = image;
  code->size = image_len;
  return 1;
}

/* Whether GID is the user's private group, as useradd makes one: named
   as the user is and listing no other member.  (Users whose primary
   group it is are not listed in it: the name is what tells a private
   group from a shared one such as "users".)  */
static bool
user_private_group (gid_t gid)
{
  char buf[16384];
  struct passwd pw, *pw_found = NULL;
  struct group gr, *gr_found = NULL;
  char user[256];

  if (getpwuid_r (geteuid (), &pw, buf, sizeof buf, &pw_found) != 0
      || pw_found == NULL || strlen (pw.pw_name) >= sizeof user)
    return false;
  strcpy (user, pw.pw_name);
  if (getgrgid_r (gid, &gr, buf, sizeof buf, &gr_found) != 0
      || gr_found == NULL || strcmp (gr.gr_name, user) != 0)
    return false;
  for (char **member = gr.gr_mem; member != NULL && *member != NULL;
       member++)
    if (strcmp (*member, user) != 0)
      return false;
  return true;
}

/* Whether a user other than the user (and root) may write in the folder
   whose status is ST, sticky or not.  */
static bool
others_can_write (const struct stat *st)
{
  return (st->st_mode & S_IWOTH)
         || ((st->st_mode & S_IWGRP) && !user_private_group (st->st_gid));
}

/* 0 when the cache folder DIR, whose status is ST, may hold files the
   user runs; else -1 with WHY saying why not.  */
static int
folder_trusted (const char *dir, const struct stat *st, char *why,
                size_t why_size)
{
  uid_t uid = geteuid ();

  if (st->st_uid != uid && st->st_uid != 0)
    {
      snprintf (why, why_size, "the cache folder %.300s belongs to another "
                "user (uid %ld)", dir, (long) st->st_uid);
      return -1;
    }
  if ((st->st_mode & S_IWOTH) && !(st->st_mode & S_ISVTX))
    {
      snprintf (why, why_size, "the cache folder %.300s is writable by "
                "every user and not sticky", dir);
      return -1;
    }
  if (others_can_write (st) && !(st->st_mode & S_ISVTX))
    {
      snprintf (why, why_size, "the cache folder %.300s is writable by its "
                "group (gid %ld), which is not the user's private group, "
                "and not sticky", dir, (long) st->st_gid);
      return -1;
    }
  return 0;
}

/* 0 when the cache file NAME, whose status is ST, in the folder DIR,
   whose status is DIR_ST, may be run; else -1 with WHY saying why not.  */
static int
file_trusted (const char *dir, const struct stat *dir_st, const char *name,
              const struct stat *st, char *why, size_t why_size)
{
  uid_t uid = geteuid ();
  bool shared = others_can_write (dir_st);

  if (!S_ISREG (st->st_mode))
    snprintf (why, why_size, "the cache file %.80s in %.300s is not a "
              "regular file", name, dir);
  else if (st->st_uid != uid && (st->st_uid != 0 || shared))
    snprintf (why, why_size, "the cache file %.80s in %.300s belongs to "
              "another user (uid %ld)", name, dir, (long) st->st_uid);
  else if (st->st_mode & (S_IWGRP | S_IWOTH))
    snprintf (why, why_size, "the cache file %.80s in %.300s is writable "
              "by other users", name, dir);
  else
    return 0;
  return -1;
}

/* Opens the folder DIR, checked: its descriptor, with *ST its status,
   or -1 with errno set (ENOENT: there is none) or, when it is not
   trusted, -2 with WHY filled.  */
static int
open_folder (const char *dir, struct stat *st, char *why, size_t why_size)
{
  struct stat link_st;
  int fd;

  /* A link another user made (in /tmp, say) could lead anywhere the
     user may write: it is not followed.  */
  if (lstat (dir, &link_st) == 0 && S_ISLNK (link_st.st_mode)
      && link_st.st_uid != geteuid () && link_st.st_uid != 0)
    {
      snprintf (why, why_size, "the cache folder %.300s is a symbolic link "
                "of another user (uid %ld)", dir, (long) link_st.st_uid);
      return -2;
    }
  fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  if (fstat (fd, st) != 0)
    {
      int saved = errno;
      close (fd);
      errno = saved;
      return -1;
    }
  if (folder_trusted (dir, st, why, why_size) != 0)
    {
      close (fd);
      return -2;
    }
  return fd;
}

gm_jit_cache_found
gm_jit_cache_read (const char *dir, const char *name,
                   const unsigned char key[32], gm_jit_code *code,
                   char *why, size_t why_size)
{
  struct stat dir_st, st;
  gm_jit_cache_found found = GM_JIT_CACHE_CORRUPT;
  unsigned char *data = NULL;
  size_t size, done = 0;
  int dirfd = open_folder (dir, &dir_st, why, why_size), fd;

  if (dirfd == -2)
    return GM_JIT_CACHE_UNTRUSTED;
  if (dirfd < 0)
    return GM_JIT_CACHE_NONE;
  /* O_NONBLOCK: a FIFO in the way neither blocks the open nor is read.  */
  fd = openat (dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    {
      if (errno == ENOENT)
        found = GM_JIT_CACHE_NONE;
      else if (errno == ELOOP)
        {
          snprintf (why, why_size, "the cache file %.80s in %.300s is a "
                    "symbolic link", name, dir);
          found = GM_JIT_CACHE_UNTRUSTED;
        }
      close (dirfd);
      return found;
    }
  if (fstat (fd, &st) != 0)
    goto done;
  if (file_trusted (dir, &dir_st, name, &st, why, why_size) != 0)
    {
      found = GM_JIT_CACHE_UNTRUSTED;
      goto done;
    }
  if (st.st_size < HEADER_SIZE
      || (uint64_t) st.st_size > HEADER_SIZE + MAX_ENTRY + MAX_IMAGE)
    goto done;
  size = (size_t) st.st_size;
  data = malloc (size);
  if (data == NULL)
    goto done;
  while (done < size)
    {
      ssize_t n = read (fd, data + done, size - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        goto done;
      done += (size_t) n;
    }
  if (gm_jit_cache_parse (data, size, key, code) == 1)
    found = GM_JIT_CACHE_HIT;
done:
  free (data);
  close (fd);
  close (dirfd);
  return found;
}

/* Makes folder DIR as mkdir -p does, the last one with mode 0700 (the
   parents as the umask says); folders that exist are left as they are.
   0 or -1 (errno).  */
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
  if (mkdir (path, 0700) != 0 && errno != EEXIST)
    return -1;
  return 0;
}

int
gm_jit_cache_write (const char *dir, const char *name,
                    const unsigned char key[32], const gm_jit_code *code,
                    char *why, size_t why_size)
{
  unsigned char header[HEADER_SIZE];
  size_t entry_len = strlen (code->entry);
  char tmp[64];
  struct stat dir_st, st;
  gm_sha256 ctx;
  FILE *fp;
  int dirfd, fd = -1, result = -1;

  if (make_dirs (dir) != 0)
    {
      snprintf (why, why_size, "cannot make the cache folder %.300s: %s",
                dir, strerror (errno));
      return -1;
    }
  dirfd = open_folder (dir, &dir_st, why, why_size);
  if (dirfd == -2)
    return -2;
  if (dirfd < 0)
    {
      snprintf (why, why_size, "cannot open the cache folder %.300s: %s",
                dir, strerror (errno));
      return -1;
    }
  /* A name of this process's own, made by this call alone (O_EXCL),
     readable by the user alone.  */
  for (int attempt = 0; attempt < 100 && fd < 0; attempt++)
    {
      static _Atomic unsigned long counter;
      snprintf (tmp, sizeof tmp, ".tmp-%ld-%lu", (long) getpid (),
                (unsigned long) atomic_fetch_add (&counter, 1));
      fd = openat (dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
                   | O_CLOEXEC, 0600);
      if (fd < 0 && errno != EEXIST)
        break;
    }
  if (fd < 0)
    {
      snprintf (why, why_size, "cannot write in the cache folder %.300s: "
                "%s", dir, strerror (errno));
      close (dirfd);
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
      goto done;
    }
  /* Never over a file another user owns (root may have put one in the
     user's folder): it stays, and nothing is written.  */
  if (fstatat (dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0
      && st.st_uid != geteuid ())
    {
      snprintf (why, why_size, "the cache file %.80s in %.300s belongs to "
                "another user (uid %ld) and is left as it is", name, dir,
                (long) st.st_uid);
      result = -2;
      goto done;
    }
  if (renameat (dirfd, tmp, dirfd, name) != 0)
    {
      snprintf (why, why_size, "cannot rename a cache file in %.300s: %s",
                dir, strerror (errno));
      goto done;
    }
  result = 0;
done:
  if (result != 0)
    unlinkat (dirfd, tmp, 0);
  close (dirfd);
  return result;
}
