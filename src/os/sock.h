/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: abstract unix sockets, fd passing and bounded waits
 * (sock.c). Every wait runs to an absolute deadline in sseg_now() seconds,
 * polls in short slices so that this thread's interrupt check (if any) is
 * asked, and never raises SIGPIPE. Functions return 0 or a negative errno;
 * those that say so set the error sentence. */
#ifndef SSEG_OS_SOCK_H
#define SSEG_OS_SOCK_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"

static inline double sseg_os_deadline(int timeout_ms)
{
	return sseg_now() + timeout_ms / 1000.0;
}

/* Milliseconds left, rounded up; 0 once the deadline passed. */
SSEG_HIDDEN int sseg_os_remaining_ms(double deadline);

/* This thread's interrupt check for every wait below (NULL: none). A wait
 * whose check answers non-zero returns -EINTR. */
SSEG_HIDDEN void sseg_os_set_interrupt(sseg_interrupt_fn fn, void *ctx);
/* Whether this thread's interrupt check answers non-zero now. */
SSEG_HIDDEN bool sseg_os_interrupted(void);

/* poll() to a deadline: the number of ready entries, -ETIMEDOUT, -EINTR
 * (interrupted), or another -errno. Sets no sentence. */
SSEG_HIDDEN int sseg_os_poll(struct pollfd *fds, nfds_t n, double deadline);
/* One fd: 0 when it has events. Sets no sentence. */
SSEG_HIDDEN int sseg_os_wait(int fd, short events, double deadline);

/* name: without the leading NUL; at most 100 bytes. Sets the sentence. */
SSEG_HIDDEN int sseg_os_listen_abstract(const char *name, int backlog, int *fd);
/* One non-blocking attempt: -ECONNREFUSED when nobody listens under that
 * name, -EAGAIN when its backlog is full. Sets the sentence. */
SSEG_HIDDEN int sseg_os_connect_abstract(const char *name, int *fd);
/* The next connection (non-blocking, close-on-exec). Sets the sentence. */
SSEG_HIDDEN int sseg_os_accept(int listen_fd, double deadline, int *fd);

/* Whole sends and receives; a receive that meets end of file returns
 * -ECONNRESET. Set the sentence. */
SSEG_HIDDEN int sseg_os_send_all(int fd, const void *buf, size_t len, double deadline);
SSEG_HIDDEN int sseg_os_recv_all(int fd, void *buf, size_t len, double deadline);
/* len bytes with one fd attached (SCM_RIGHTS). */
SSEG_HIDDEN int sseg_os_send_fd(int sock, int fd, const void *data, size_t len, double deadline);
/* len bytes and the fd attached to them: -EPROTO when none came, -EMFILE
 * when this process had no free descriptor to receive it in. */
SSEG_HIDDEN int sseg_os_recv_fd(int sock, int *fd, void *data, size_t len, double deadline);

/* SO_PEERCRED; either pointer may be NULL. pid is 0 for a peer outside
 * this PID namespace. */
SSEG_HIDDEN int sseg_os_peer_cred(int sock, pid_t *pid, uid_t *uid);

#endif
