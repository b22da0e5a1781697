/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: accepting members on a listening socket (accept.c). Every
 * pending connection is served concurrently, each with its own bound for
 * its first message (the hello), so silent, slow or foreign connections
 * cost nothing but a slot: they are dropped and counted, never waited on in
 * turn. */
#ifndef SSEG_OS_ACCEPT_H
#define SSEG_OS_ACCEPT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"

#define SSEG_OS_HELLO_MAX 64
#define SSEG_OS_PENDING_MAX 64

struct sseg_os_pending {
	int fd;
	double deadline;
	size_t got;
	uint8_t hello[SSEG_OS_HELLO_MAX];
};

struct sseg_os_acceptor {
	int listen_fd;
	size_t hello_len;
	uid_t uid;        /* connections from another uid are dropped unread */
	double hello_s;   /* each connection's bound for its hello */
	int npending;
	struct sseg_os_pending pending[SSEG_OS_PENDING_MAX];
	struct pollfd pfds[SSEG_OS_PENDING_MAX + 1];
	/* dropped connections, by cause */
	unsigned other_uid;
	unsigned silent;  /* no whole hello within hello_s, or pushed out when full */
	unsigned closed;  /* closed before a whole hello */
};

SSEG_HIDDEN void sseg_os_acceptor_init(struct sseg_os_acceptor *a, int listen_fd,
				       size_t hello_len, uid_t uid, double hello_s);
/* 0: *fd is a connection from uid whose hello_len bytes are in hello (the
 * caller judges them and owns fd). -ETIMEDOUT at the deadline, -EINTR when
 * interrupted, another -errno when the listening socket failed. Sets no
 * sentence. */
SSEG_HIDDEN int sseg_os_acceptor_next(struct sseg_os_acceptor *a, double deadline, int *fd,
				      void *hello);
/* Closes the connections still pending. */
SSEG_HIDDEN void sseg_os_acceptor_fini(struct sseg_os_acceptor *a);
/* "2 from another user, 1 silent, 0 closed early"; "" when none. */
SSEG_HIDDEN void sseg_os_acceptor_dropped(const struct sseg_os_acceptor *a, char *buf,
					  size_t len);

#endif
