/* share-server.c -- the share server: hands shareable blocks to other
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
   connection open as its lease.  When the connection ends -- the
   consumer closed the array or exited, however it exited -- the lease
   ends.  One poll serves every connection, each one still presenting
   its handle has a deadline, one user has a bound on its connections,
   and running out of descriptors refuses a connection rather than
   spinning: no peer can stall another.  The records and the blocks are
   share-records.c's; gm_ipc_alloc, which starts the server, is here.  */

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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "share.h"

/* How long a new connection may take to present its handle.  */
#define REQUEST_DEADLINE_MS 2000
/* Connections of one user (another than the producer's own and root)
   still presenting a handle: more are closed at once, so that no user
   can fill the server.  */
#define PENDING_PER_UID 16
/* How long the server leaves new connections waiting when it has no
   descriptor left for them.  */
#define NOFILE_PAUSE_MS 100
/* The longest wait of the server's poll: how late a signal-free server
   sees a deadline pass at worst.  */
#define POLL_SLICE_MS 100

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

/* Under gm_ipc_lock; only the server thread adds or removes
   connections.  */
static bool started;
static uint32_t server_uid;
static int listen_fd = -1;
static int reserve_fd = -1;          /* given up to refuse when out of fds */
static connection *conns;
static size_t nconns, conns_room;
static size_t leases_per_uid;        /* the bound on one user's leases */

static long long
now_ms (void)
{
  struct timespec now;

  clock_gettime (CLOCK_MONOTONIC, &now);
  return (long long) now.tv_sec * 1000 + now.tv_nsec / 1000000;
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
   becomes the lease, unless its user (another than the producer's own
   and root, who are bound by the descriptor limit alone) holds as many
   as one may.  false
   when C is to be closed.  Under the lock.  */
static bool
answer (connection *c)
{
  size_t size = (size_t) c->request[0] | ((size_t) c->request[1] << 8);
  gm_ipc_block *block;
  uint8_t reply;
  int fd;

  if (c->uid != 0 && c->uid != server_uid
      && leases_of (c->uid, false) >= leases_per_uid)
    {
      send_reply (c->fd, GM_IPC_REPLY_BUSY, -1);
      return false;
    }
  block = gm_ipc_lease_begin (c->request + 2, size, c->uid, &fd, &reply);
  if (block == NULL)
    {
      send_reply (c->fd, reply, -1);
      return false;
    }
  c->block = block;
  send_reply (c->fd, GM_IPC_REPLY_OK, fd);
  if (fd != gm_ipc_block_fd (block))
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
    gm_ipc_lease_end (block);
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
      || !gm_ipc_admitted ((uint32_t) cred.uid)
      || (cred.uid != 0 && (uint32_t) cred.uid != server_uid
          && leases_of ((uint32_t) cred.uid, true) >= PENDING_PER_UID))
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

      pthread_mutex_lock (&gm_ipc_lock);
      if (nconns + 1 > room)
        {
          struct pollfd *grown = realloc (fds, (nconns + 1) * sizeof *grown);
          if (grown == NULL)
            {
              pthread_mutex_unlock (&gm_ipc_lock);
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
      pthread_mutex_unlock (&gm_ipc_lock);
      if (poll (fds, n, timeout) < 0 && errno != EINTR)
        usleep (POLL_SLICE_MS * 1000);
      pthread_mutex_lock (&gm_ipc_lock);
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
      pthread_mutex_unlock (&gm_ipc_lock);
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
  pthread_mutex_lock (&gm_ipc_lock);
}

static void
atfork_parent (void)
{
  pthread_mutex_unlock (&gm_ipc_lock);
}

static void
atfork_child (void)
{
  pthread_mutex_init (&gm_ipc_lock, NULL);
  if (listen_fd >= 0)
    close (listen_fd);
  listen_fd = -1;
  if (reserve_fd >= 0)
    close (reserve_fd);
  reserve_fd = -1;
  for (size_t i = 0; i < nconns; i++)
    close (conns[i].fd);
  nconns = 0;
  /* The parent's blocks stay the parent's: gm_ipc_drop sees their pid.  */
  gm_ipc_forget_blocks ();
  started = false;
  gm_ipc_server_named (false, 0, 0, 0);
}

gm_status
gm_ipc_server_start (void)
{
  struct sockaddr_un addr;
  unsigned len;
  struct rlimit files;
  pthread_t thread;
  pthread_attr_t attr;
  sigset_t all, old;
  uint32_t pid;
  uint64_t name;
  int fd, rc;

  if (started)
    return GM_OK;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                         "socket: %s", strerror (errno));
  pid = (uint32_t) getpid ();
  server_uid = (uint32_t) geteuid ();
  name = gm_ipc_random ();
  gm_ipc_socket_address (&addr, &len, pid, name);
  if (bind (fd, (struct sockaddr *) &addr, (socklen_t) len) != 0
      || listen (fd, 64) != 0)
    {
      int saved = errno;
      close (fd);
      return gm_error_set (GM_ERR_FAILED, 0, NULL, "cannot share memory: "
                           "cannot listen on a Unix socket: %s",
                           strerror (saved));
    }
  /* Another user holds at most half the descriptors this process may
     open in leases (and at most 512), so that the process keeps some.  */
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
  gm_ipc_server_named (true, pid, server_uid, name);
  return GM_OK;
}

static void
register_atfork (void)
{
  pthread_atfork (atfork_prepare, atfork_parent, atfork_child);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* The current backend's sharing, once the fork handlers are registered
   (before the first block exists).  */
static const gm_ipc_ops *
producer_ops (void)
{
  pthread_once (&atfork_once, register_atfork);
  return gm_ipc_current_ops ();
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
  const gm_ipc_ops *ops = producer_ops ();
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
  pthread_mutex_lock (&gm_ipc_lock);
  status = gm_ipc_server_start ();
  pthread_mutex_unlock (&gm_ipc_lock);
  if (status != GM_OK)
    return status;
  return gm_ipc_block_add (ops, device, nbytes, stream, out, ptr);
}

gm_status
gm_ipc_adopt (gm_mem_owner owner, int device, void *ptr, size_t nbytes,
              gm_ipc_block **out)
{
  const gm_ipc_ops *ops = producer_ops ();
  gm_status status;

  if (ops == NULL || ops->adopt == NULL)
    return gm_error_set (GM_ERR_UNAVAILABLE, 0, NULL, "the %s backend "
                         "cannot share memory between processes",
                         gm_backend_current ? gm_backend_current->name
                                            : "(none)");
  pthread_mutex_lock (&gm_ipc_lock);
  status = gm_ipc_server_start ();
  pthread_mutex_unlock (&gm_ipc_lock);
  if (status != GM_OK)
    return status;
  return gm_ipc_block_adopt (ops, owner, device, ptr, nbytes, out);
}
