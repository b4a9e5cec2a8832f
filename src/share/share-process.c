/* share-process.c -- what sharing keeps once a process, beneath the
   share server (share-server.c), its books (share-records.c) and the
   consumer (share-client.c): the lock of the server's state, random
   numbers, the current backend's sharing, and the name under which
   this process's server answers (its identity, which handles carry,
   and its socket's address).  Plain C.  */

#define _GNU_SOURCE
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "share.h"

pthread_mutex_t gm_ipc_lock = PTHREAD_MUTEX_INITIALIZER;

/* This process's running server as its handles name it; under
   gm_ipc_lock.  */
static bool serving;
static uint32_t server_pid, server_uid;
static uint64_t server_name;

uint64_t
gm_ipc_random (void)
{
  uint64_t value = 0;

  if (getrandom (&value, sizeof value, 0) != (ssize_t) sizeof value)
    {
      struct timespec now;
      clock_gettime (CLOCK_REALTIME, &now);
      value = ((uint64_t) now.tv_nsec << 32) ^ (uint64_t) now.tv_sec
              ^ ((uint64_t) getpid () << 48) ^ (uintptr_t) &value;
    }
  return value;
}

const gm_ipc_ops *
gm_ipc_current_ops (void)
{
  return gm_backend_current != NULL ? gm_backend_current->ipc : NULL;
}

void
gm_ipc_socket_address (void *out, unsigned *len, uint32_t pid, uint64_t name)
{
  struct sockaddr_un *addr = out;
  int n;

  memset (addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  /* The abstract namespace (a leading NUL): nothing on disk to clean up
     after a process that dies.  */
  n = snprintf (addr->sun_path + 1, sizeof addr->sun_path - 1,
                "gpumem-share-%u-%016llx", (unsigned) pid,
                (unsigned long long) name);
  *len = (unsigned) (offsetof (struct sockaddr_un, sun_path) + 1 + n);
}


void
gm_ipc_server_named (bool running, uint32_t pid, uint32_t uid, uint64_t name)
{
  serving = running;
  server_pid = pid;
  server_uid = uid;
  server_name = name;
}

bool
gm_ipc_server_is (uint32_t pid, uint64_t name)
{
  return serving && pid == server_pid && name == server_name;
}

void
gm_ipc_server_identity (uint64_t *name, uint32_t *uid)
{
  *name = server_name;
  *uid = server_uid;
}
