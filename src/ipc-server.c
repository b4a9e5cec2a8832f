/* ipc-server.c -- the share server: hands shareable blocks to other
   processes and counts who still uses them.

   Each process that shares starts one thread listening on an abstract
   Unix socket named after its pid and a random number.  The server is
   the authority on what was shared: each share of a block is a record
   holding the handle's bytes as gm_ipc_export made them, its random
   secret and the users it admits.  A consumer connects, the server
   reads its user (SO_PEERCRED), the consumer presents the whole handle
   (a 2-byte length, then the bytes) within REQUEST_DEADLINE_MS, and
   only a handle equal to a record, from a user it admits, receives the
   block's file descriptor (SCM_RIGHTS); the consumer keeps the
   connection open as its lease.  One poll serves every connection, so
   no peer can stall another.  When the connection ends -- the consumer closed the array
   or exited, however it exited -- the lease ends.  A block is released
   once its producer has dropped it and no lease remains: CUDA asks that
   every importer free an imported pool pointer before its exporter does
   (cudaMemPoolImportPointer), and this order gives exactly that.
   Plain C: the backend's gm_ipc_ops do the memory.  */

#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ipc.h"

/* How long a new connection may take to present its handle.  */
#define REQUEST_DEADLINE_MS 2000
/* Connections of one user still presenting a handle: more are closed at
   once, so that no user can fill the server.  */
#define PENDING_PER_UID 16
/* How long the server leaves new connections waiting when it has no
   descriptor left for them.  */
#define NOFILE_PAUSE_MS 100
/* The longest wait of the server's poll: how late a signal-free server
   sees a deadline pass at worst.  */
#define POLL_SLICE_MS 100

/* One share: a view of a block, as its handle's bytes, and who may open
   it.  */
typedef struct share_record
{
  struct share_record *next;
  uint64_t id, secret;
  bool until_opened;
  bool pending;              /* until_opened and not opened yet */
  uint32_t allow[GM_IPC_MAX_ALLOW];
  size_t nallow;
  size_t size;
  uint8_t encoded[GM_IPC_MAX_BYTES];
} share_record;

struct gm_ipc_block
{
  gm_ipc_block *next;
  pid_t pid;                 /* the process that allocated it */
  int device;
  int fd;                    /* what a consumer receives */
  void *ctx, *ptr;
  size_t nbytes;
  size_t leases;
  bool producer_holds;
  size_t pending_opens;      /* until_opened shares not opened yet */
  size_t exporting;          /* gm_ipc_export calls under way */
  share_record *shares;
};

/* A consumer's connection: presenting a handle until its deadline, then
   the lease on BLOCK.  */
typedef struct connection
{
  int fd;
  uint32_t uid;
  gm_ipc_block *block;       /* NULL until the handle was accepted */
  long long deadline;        /* ms, CLOCK_MONOTONIC */
  size_t got;
  uint8_t request[2 + GM_IPC_MAX_BYTES];
} connection;

/* Held for every field below; the server thread takes it briefly.  */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool started;
static pid_t server_pid;
static uint32_t server_uid;
static uint64_t server_name;
static int listen_fd = -1;
static int reserve_fd = -1;          /* given up to refuse when out of fds */
static gm_ipc_block *blocks;
static uint64_t next_share = 1;
static connection *conns;
static size_t nconns, conns_room, nleases;
static size_t leases_per_uid;        /* the bound on one user's leases */
static size_t open_imports;
static const gm_ipc_ops *server_ops;

static long long
now_ms (void)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (long long) now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

static uint64_t
random_u64 (void)
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

/* Whether the SIZE bytes at A and B are equal, in a time that does not
   depend on where they differ (B holds a secret).  */
static bool
same_bytes (const uint8_t *a, const uint8_t *b, size_t size)
{
  uint8_t diff = 0;

  for (size_t i = 0; i < size; i++)
    diff |= a[i] ^ b[i];
  return diff == 0;
}

/* Releases BLOCK when its producer, every until_opened share, every
   lease and every export under way have let go; under the lock.  */
static void
release_if_unused (gm_ipc_block *block)
{
  gm_ipc_block **link;

  if (block->producer_holds || block->pending_opens > 0 || block->leases > 0
      || block->exporting > 0)
    return;
  for (link = &blocks; *link != NULL; link = &(*link)->next)
    if (*link == block)
      {
        *link = block->next;
        break;
      }
  while (block->shares != NULL)
    {
      share_record *next = block->shares->next;
      free (block->shares);
      block->shares = next;
    }
  server_ops->release (block->device, block->ctx, block->ptr, block->nbytes);
  close (block->fd);
  free (block);
}

/* The share whose handle is the SIZE bytes ENCODED, naming record ID
   and SECRET, with its block in *BLOCK; NULL when there is none (never
   made, revoked, released, or a wrong secret).  *ALTERED tells a handle
   with the right record and secret whose other bytes differ from the
   record.  Under the lock.  */
static share_record *
find_share (uint64_t id, uint64_t secret, const uint8_t *encoded,
            size_t size, gm_ipc_block **block, bool *altered)
{
  *altered = false;
  for (gm_ipc_block *b = blocks; b != NULL; b = b->next)
    for (share_record *share = b->shares; share != NULL; share = share->next)
      if (share->id == id)
        {
          if (!same_bytes ((const uint8_t *) &secret,
                           (const uint8_t *) &share->secret, 8))
            return NULL;
          if (size != share->size
              || !same_bytes (encoded, share->encoded, size))
            {
              *altered = true;
              return NULL;
            }
          *block = b;
          return share;
        }
  return NULL;
}

/* Whether SHARE admits a process of user UID; under the lock.  */
static bool
admits (const share_record *share, uint32_t uid)
{
  bool trusted = false;

  if (gm_ipc_trusted (uid, &trusted) == GM_OK && trusted)
    return true;
  for (size_t i = 0; i < share->nallow; i++)
    if (share->allow[i] == uid)
      return true;
  return false;
}

/* Whether any share admits UID; under the lock.  */
static bool
admitted_anywhere (uint32_t uid)
{
  bool trusted = false;

  if (gm_ipc_trusted (uid, &trusted) == GM_OK && trusted)
    return true;
  for (gm_ipc_block *b = blocks; b != NULL; b = b->next)
    for (share_record *share = b->shares; share != NULL; share = share->next)
      if (admits (share, uid))
        return true;
  return false;
}

/* Counts one open of SHARE of BLOCK: a new lease, and its until_opened
   hold let go; under the lock.  */
static void
count_open (gm_ipc_block *block, share_record *share)
{
  block->leases++;
  if (share->pending)
    {
      share->pending = false;
      block->pending_opens--;
    }
}

/* Sends STATUS (GM_IPC_REPLY_*) and, with it, FD when FD >= 0.  */
static void
send_reply (int conn, uint8_t status, int fd)
{
  struct msghdr msg = { 0 };
  struct iovec iov = { &status, 1 };
  union
  {
    char buf[CMSG_SPACE (sizeof (int))];
    struct cmsghdr align;
  } control;

  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0)
    {
      struct cmsghdr *cmsg;
      memset (&control, 0, sizeof control);
      msg.msg_control = control.buf;
      msg.msg_controllen = sizeof control.buf;
      cmsg = CMSG_FIRSTHDR (&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN (sizeof (int));
      memcpy (CMSG_DATA (cmsg), &fd, sizeof fd);
    }
  (void) sendmsg (conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Leases user UID holds; under the lock.  */
static size_t
leases_of (uint32_t uid, bool pending)
{
  size_t n = 0;

  for (size_t i = 0; i < nconns; i++)
    if (conns[i].uid == uid && (conns[i].block == NULL) == pending)
      n++;
  return n;
}

/* Answers connection C, whose request is complete: a handle the server
   made, from a user its share admits, gets the block's descriptor (a
   read-only one for a read-only view, where the backend has one), and C
   becomes the lease.  false when C is to be closed.  Under the lock.  */
static bool
answer (connection *c)
{
  size_t size = (size_t) c->request[0] | ((size_t) c->request[1] << 8);
  const uint8_t *encoded = c->request + 2;
  gm_ipc_handle handle;
  gm_ipc_block *block = NULL;
  share_record *share;
  bool altered;
  int fd;

  if (gm_ipc_decode (encoded, size, &handle) != NULL)
    {
      send_reply (c->fd, GM_IPC_REPLY_ALTERED, -1);
      return false;
    }
  share = find_share (handle.block, handle.secret, encoded, size, &block,
                      &altered);
  if (share == NULL)
    {
      send_reply (c->fd, altered ? GM_IPC_REPLY_ALTERED
                                 : GM_IPC_REPLY_CLOSED, -1);
      return false;
    }
  if (!admits (share, c->uid))
    {
      send_reply (c->fd, GM_IPC_REPLY_REFUSED, -1);
      return false;
    }
  if (leases_of (c->uid, false) >= leases_per_uid)
    {
      send_reply (c->fd, GM_IPC_REPLY_BUSY, -1);
      return false;
    }
  fd = block->fd;
  if (handle.readonly && server_ops->readonly_fd != NULL)
    {
      fd = server_ops->readonly_fd (block->fd);
      if (fd < 0)
        {
          send_reply (c->fd, GM_IPC_REPLY_NOMEM, -1);
          return false;
        }
    }
  c->block = block;
  nleases++;
  count_open (block, share);
  send_reply (c->fd, GM_IPC_REPLY_OK, fd);
  if (fd != block->fd)
    close (fd);
  return true;
}

/* Reads what connection C sent: false when it is to be closed (it sent
   too much or ended), else true; answers it once complete.  Under the
   lock.  */
static bool
read_request (connection *c)
{
  for (;;)
    {
      size_t want = 2, size;
      ssize_t got;

      if (c->got >= 2)
        {
          size = (size_t) c->request[0] | ((size_t) c->request[1] << 8);
          if (size < GM_IPC_FIXED_BYTES || size > GM_IPC_MAX_BYTES)
            return false;
          want = 2 + size;
          if (c->got == want)
            return answer (c);
        }
      got = recv (c->fd, c->request + c->got, want - c->got, MSG_DONTWAIT);
      if (got == 0)
        return false;
      if (got < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      c->got += (size_t) got;
    }
}

/* Closes connection I, ending its lease if it holds one; under the
   lock.  */
static void
drop_connection (size_t i)
{
  gm_ipc_block *block = conns[i].block;

  close (conns[i].fd);
  conns[i] = conns[--nconns];
  if (block != NULL)
    {
      nleases--;
      block->leases--;
      release_if_unused (block);
    }
}

/* Takes one new connection from the listening socket; under the lock.
   Returns the time until which new connections wait (out of
   descriptors), or 0.  */
static long long
accept_one (void)
{
  struct ucred cred;
  socklen_t len = sizeof cred;
  int fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

  if (fd < 0)
    {
      if (errno != EMFILE && errno != ENFILE && errno != ENOBUFS
          && errno != ENOMEM)
        return 0;
      /* The connection stays queued and the socket readable: refuse it
         with the descriptor kept for this, and wait a moment before the
         next rather than spin.  */
      if (reserve_fd >= 0)
        {
          close (reserve_fd);
          fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC);
          if (fd >= 0)
            close (fd);
          reserve_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
        }
      return now_ms () + NOFILE_PAUSE_MS;
    }
  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0
      || !admitted_anywhere ((uint32_t) cred.uid)
      || leases_of ((uint32_t) cred.uid, true) >= PENDING_PER_UID)
    {
      close (fd);
      return 0;
    }
  if (nconns == conns_room)
    {
      size_t room = conns_room ? 2 * conns_room : 16;
      connection *grown = realloc (conns, room * sizeof *grown);
      if (grown == NULL)
        {
          close (fd);
          return 0;
        }
      conns = grown;
      conns_room = room;
    }
  memset (&conns[nconns], 0, offsetof (connection, request));
  conns[nconns].fd = fd;
  conns[nconns].uid = (uint32_t) cred.uid;
  conns[nconns].deadline = now_ms () + REQUEST_DEADLINE_MS;
  nconns++;
  return 0;
}

/* The server: one poll over the listening socket, the connections still
   presenting a handle (each with a deadline) and the leases (whose end
   is their connection's end).  Only this thread adds or removes
   connections.  */
static void *
server_main (void *unused)
{
  struct pollfd *fds = NULL;
  size_t room = 0;
  long long paused_until = 0;
  (void) unused;

  for (;;)
    {
      long long now = now_ms ();
      int timeout = POLL_SLICE_MS;
      size_t n;

      pthread_mutex_lock (&lock);
      if (nconns + 1 > room)
        {
          struct pollfd *grown = realloc (fds, (nconns + 1) * sizeof *grown);
          if (grown == NULL)
            {
              pthread_mutex_unlock (&lock);
              usleep (POLL_SLICE_MS * 1000);
              continue;
            }
          fds = grown;
          room = nconns + 1;
        }
      n = nconns + 1;
      fds[0].fd = listen_fd;
      fds[0].events = now >= paused_until ? POLLIN : 0;
      if (now < paused_until && paused_until - now < timeout)
        timeout = (int) (paused_until - now);
      for (size_t i = 0; i < nconns; i++)
        {
          fds[i + 1].fd = conns[i].fd;
          fds[i + 1].events = POLLIN;
          if (conns[i].block == NULL && conns[i].deadline - now < timeout)
            timeout = conns[i].deadline > now
                      ? (int) (conns[i].deadline - now) : 0;
        }
      pthread_mutex_unlock (&lock);
      if (poll (fds, n, timeout) < 0 && errno != EINTR)
        usleep (POLL_SLICE_MS * 1000);
      pthread_mutex_lock (&lock);
      now = now_ms ();
      /* From the last down: dropping I moves the last connection, seen
         already, into I; connections accepted below are not in FDS.  */
      for (size_t i = n - 1; i >= 1; i--)
        {
          connection *c = &conns[i - 1];
          if (c->block != NULL)
            {
              /* A lease carries no data: readable means it ended (or
                 its peer broke the protocol, which ends it too).  */
              if (fds[i].revents != 0)
                drop_connection (i - 1);
            }
          else if ((fds[i].revents != 0 && !read_request (c))
                   || (c->block == NULL && now >= c->deadline))
            drop_connection (i - 1);
        }
      if (fds[0].revents & POLLIN)
        paused_until = accept_one ();
      pthread_mutex_unlock (&lock);
    }
  return NULL;
}

/* In a child made by fork: the server thread did not come along, and the
   parent's connections must not stay open here, or the parent would not
   see its consumers' leases end.  The child starts its own server when
   it shares.  */
static void
atfork_prepare (void)
{
  pthread_mutex_lock (&lock);
}

static void
atfork_parent (void)
{
  pthread_mutex_unlock (&lock);
}

static void
atfork_child (void)
{
  pthread_mutex_init (&lock, NULL);
  if (listen_fd >= 0)
    close (listen_fd);
  listen_fd = -1;
  if (reserve_fd >= 0)
    close (reserve_fd);
  reserve_fd = -1;
  for (size_t i = 0; i < nconns; i++)
    close (conns[i].fd);
  nconns = 0;
  nleases = 0;
  /* The parent's blocks stay the parent's: gm_ipc_drop sees their pid.  */
  blocks = NULL;
  started = false;
}

/* Starts this process's server; under the lock.  */
static gm_status
server_start (void)
{
  struct sockaddr_un addr;
  unsigned len;
  struct rlimit files;
  pthread_t thread;
  pthread_attr_t attr;
  sigset_t all, old;
  int fd, rc;

  if (started)
    return GM_OK;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                         "socket: %s", strerror (errno));
  server_pid = getpid ();
  server_uid = (uint32_t) geteuid ();
  server_name = random_u64 ();
  gm_ipc_socket_address (&addr, &len, (uint32_t) server_pid, server_name);
  if (bind (fd, (struct sockaddr *) &addr, (socklen_t) len) != 0
      || listen (fd, 64) != 0)
    {
      int saved = errno;
      close (fd);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                           "cannot listen on a Unix socket: %s",
                           strerror (saved));
    }
  /* One user holds at most half the descriptors this process may open
     in leases, so that the others (and the process) keep some.  */
  leases_per_uid = 512;
  if (getrlimit (RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY
      && files.rlim_cur / 2 < leases_per_uid)
    leases_per_uid = files.rlim_cur / 2 > 8 ? files.rlim_cur / 2 : 8;
  if (reserve_fd < 0)
    reserve_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  listen_fd = fd;
  /* The thread takes no signal: they stay with the program's threads.  */
  sigfillset (&all);
  pthread_sigmask (SIG_SETMASK, &all, &old);
  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  rc = pthread_create (&thread, &attr, server_main, NULL);
  pthread_attr_destroy (&attr);
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  if (rc != 0)
    {
      close (fd);
      listen_fd = -1;
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                           "no thread for the share server: %s",
                           strerror (rc));
    }
  started = true;
  return GM_OK;
}

static void
register_atfork (void)
{
  pthread_atfork (atfork_prepare, atfork_parent, atfork_child);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* The backend's sharing, with the fork handlers registered once.  */
static const gm_ipc_ops *
current_ops (void)
{
  pthread_once (&atfork_once, register_atfork);
  return gm_backend_current != NULL ? gm_backend_current->ipc : NULL;
}

/* GM_OK when NBYTES fits DEVICE and its memory limit, else
   GM_ERR_NOMEM saying which it exceeds.  */
static gm_status
check_size (int device, size_t nbytes)
{
  size_t free_bytes, total;
  gm_mem_stats stats;

  if (gm_backend_current->mem_info (device, &free_bytes, &total) == GM_OK
      && total > 0 && nbytes > total)
    return gm_error_set (GM_ERR_NOMEM, 0, NULL, "cannot make %zu bytes of "
                         "shared memory on device %d: it has %zu bytes",
                         nbytes, device, total);
  if (gm_mem_stats_get (device, &stats) == GM_OK && stats.limit != SIZE_MAX
      && nbytes > stats.limit)
    return gm_error_set (GM_ERR_NOMEM, 0, NULL, "cannot make %zu bytes of "
                         "shared memory on device %d: its memory limit is "
                         "%zu bytes (set_memory_limit)", nbytes, device,
                         stats.limit);
  return GM_OK;
}

gm_status
gm_ipc_alloc (int device, size_t nbytes, gm_stream *stream,
              gm_ipc_block **out, void **ptr)
{
  const gm_ipc_ops *ops = current_ops ();
  gm_ipc_block *block;
  gm_status status;

  if (ops == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the %s backend "
                         "cannot share memory between processes",
                         gm_backend_current ? gm_backend_current->name
                                            : "(none)");
  if (nbytes == 0)
    nbytes = 1;
  status = check_size (device, nbytes);
  if (status != GM_OK)
    return status;
  block = calloc (1, sizeof *block);
  if (block == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for a shared block's record");
  pthread_mutex_lock (&lock);
  server_ops = ops;
  status = server_start ();
  pthread_mutex_unlock (&lock);
  if (status == GM_OK)
    status = ops->alloc (device, nbytes, stream, &block->ptr, &block->fd,
                         &block->ctx);
  if (status != GM_OK)
    {
      free (block);
      return status;
    }
  block->device = device;
  block->nbytes = nbytes;
  block->pid = getpid ();
  block->producer_holds = true;
  pthread_mutex_lock (&lock);
  block->next = blocks;
  blocks = block;
  pthread_mutex_unlock (&lock);
  *out = block;
  *ptr = block->ptr;
  return GM_OK;
}

/* Records the share of BLOCK that HANDLE (its locating fields filled,
   but the record's number and secret) describes, or finds the same
   share made before (not UNTIL_OPENED, the same users admitted): fills
   HANDLE's number and secret and encodes it into ENCODED, *SIZE bytes.
   Under the lock.  */
static gm_status
record_share (gm_ipc_block *block, bool until_opened, const uint32_t *allow,
              size_t nallow, gm_ipc_handle *handle, uint8_t *encoded,
              size_t *size)
{
  share_record *share;
  gm_ipc_handle check;

  if (!until_opened)
    for (share = block->shares; share != NULL; share = share->next)
      if (!share->until_opened && share->nallow == nallow
          && memcmp (share->allow, allow, nallow * sizeof *allow) == 0)
        {
          handle->block = share->id;
          handle->secret = share->secret;
          *size = gm_ipc_encode (handle, encoded);
          if (*size == share->size
              && memcmp (encoded, share->encoded, *size) == 0)
            return GM_OK;
        }
  share = calloc (1, sizeof *share);
  if (share == NULL)
    return gm_error_set (GM_ERR_HOST_NOMEM, 0, NULL,
                         "no memory for a share's record");
  share->id = next_share++;
  share->secret = random_u64 ();
  handle->block = share->id;
  handle->secret = share->secret;
  *size = gm_ipc_encode (handle, encoded);
  /* What the server hands out it must accept: the view lies in the
     block, with every other rule of the decoder.  */
  if (gm_ipc_decode (encoded, *size, &check) != NULL)
    {
      free (share);
      return gm_error_set (GM_ERR_VALUE, 0, NULL, "cannot share this view: "
                           "%s", gm_ipc_decode (encoded, *size, &check));
    }
  share->until_opened = share->pending = until_opened;
  memcpy (share->allow, allow, nallow * sizeof *allow);
  share->nallow = nallow;
  share->size = *size;
  memcpy (share->encoded, encoded, *size);
  share->next = block->shares;
  block->shares = share;
  if (until_opened)
    block->pending_opens++;
  return GM_OK;
}

gm_status
gm_ipc_export (gm_ipc_block *block, gm_stream *stream, bool until_opened,
               const uint32_t *allow, size_t nallow, gm_ipc_handle *handle,
               uint8_t *encoded, size_t *size)
{
  const gm_ipc_ops *ops = current_ops ();
  gm_status status;
  bool trusted;

  if (block->pid != getpid ())
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "this shared array was "
                         "allocated by process %d, whose child this is: "
                         "share it from there, or copy it",
                         (int) block->pid);
  if (nallow > GM_IPC_MAX_ALLOW)
    return gm_error_set (GM_ERR_VALUE, 0, NULL, "a share admits at most %d "
                         "other users, not %zu", GM_IPC_MAX_ALLOW, nallow);
  status = gm_ipc_trusted (0, &trusted);
  if (status != GM_OK)
    return status;
  pthread_mutex_lock (&lock);
  block->exporting++;
  pthread_mutex_unlock (&lock);
  handle->kind = ops->kind;
  gm_ipc_node_id (handle->node);
  status = ops->device_uuid (block->device, handle->device_uuid);
  if (status == GM_OK)
    status = ops->describe (block->device, block->ctx, block->ptr, stream,
                            handle->opaque);
  pthread_mutex_lock (&lock);
  handle->pid = (uint32_t) block->pid;
  handle->uid = server_uid;
  handle->device = (uint32_t) block->device;
  handle->nbytes = block->nbytes;
  handle->server = server_name;
  if (status == GM_OK)
    status = record_share (block, until_opened, allow, nallow, handle,
                           encoded, size);
  block->exporting--;
  release_if_unused (block);
  pthread_mutex_unlock (&lock);
  return status;
}

gm_status
gm_ipc_unshare (const gm_ipc_handle *handle)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  size_t size = gm_ipc_encode (handle, encoded);
  gm_ipc_block *block = NULL;
  share_record *share = NULL, **link;
  bool altered = false;

  pthread_mutex_lock (&lock);
  if (started && handle->pid == (uint32_t) getpid ()
      && handle->server == server_name)
    share = find_share (handle->block, handle->secret, encoded, size,
                        &block, &altered);
  if (share == NULL)
    {
      pthread_mutex_unlock (&lock);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "unshare: the handle "
                           "names no share of this process (%s)",
                           altered ? "it was altered"
                                   : "made elsewhere, revoked already, or "
                                     "its memory released");
    }
  for (link = &block->shares; *link != share; link = &(*link)->next)
    ;
  *link = share->next;
  if (share->pending)
    block->pending_opens--;
  free (share);
  release_if_unused (block);
  pthread_mutex_unlock (&lock);
  return GM_OK;
}

void
gm_ipc_drop (gm_ipc_block *block)
{
  const gm_ipc_ops *ops = current_ops ();

  if (block->pid != getpid ())
    {
      /* A copy inherited through fork: the parent owns the block; only
         this process's mapping, descriptor and copy of the record go
         (the child lists none of the parent's blocks).  */
      if (ops != NULL && ops->kind == GM_IPC_KIND_HOST)
        ops->unmap (block->device, NULL, block->ptr, block->nbytes);
      close (block->fd);
      while (block->shares != NULL)
        {
          share_record *next = block->shares->next;
          free (block->shares);
          block->shares = next;
        }
      free (block);
      return;
    }
  pthread_mutex_lock (&lock);
  block->producer_holds = false;
  release_if_unused (block);
  pthread_mutex_unlock (&lock);
}

gm_status
gm_ipc_open_local (const gm_ipc_handle *handle, bool *own,
                   gm_ipc_block **out, void **ptr)
{
  uint8_t encoded[GM_IPC_MAX_BYTES];
  size_t size = gm_ipc_encode (handle, encoded);
  gm_ipc_block *block = NULL;
  share_record *share;
  bool altered;

  pthread_mutex_lock (&lock);
  *own = started && handle->pid == (uint32_t) getpid ()
         && handle->server == server_name;
  if (!*own)
    {
      pthread_mutex_unlock (&lock);
      return GM_OK;
    }
  share = find_share (handle->block, handle->secret, encoded, size, &block,
                      &altered);
  if (share == NULL)
    {
      pthread_mutex_unlock (&lock);
      if (altered)
        return gm_error_set (GM_ERR_FAILED, 0, NULL, "the handle does not "
                             "match what its producer (this process) "
                             "shared: it was altered");
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "the shared array is "
                           "closed: its producer (this process) freed it "
                           "or revoked the handle");
    }
  count_open (block, share);
  *out = block;
  *ptr = block->ptr;
  pthread_mutex_unlock (&lock);
  return GM_OK;
}

void
gm_ipc_close_local (gm_ipc_block *block)
{
  pthread_mutex_lock (&lock);
  block->leases--;
  release_if_unused (block);
  pthread_mutex_unlock (&lock);
}

void
gm_ipc_count_import (int delta)
{
  pthread_mutex_lock (&lock);
  open_imports = delta > 0 ? open_imports + 1 : open_imports - 1;
  pthread_mutex_unlock (&lock);
}

void
gm_ipc_counts (size_t *nblocks, size_t *nleases_out, size_t *imports)
{
  size_t n = 0;

  pthread_mutex_lock (&lock);
  for (gm_ipc_block *block = blocks; block != NULL; block = block->next)
    n++;
  *nblocks = n;
  *nleases_out = nleases;
  *imports = open_imports;
  pthread_mutex_unlock (&lock);
}
