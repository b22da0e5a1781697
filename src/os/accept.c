/* SPDX-License-Identifier: Apache-2.0 */
/* Accepting members: one poll over the listening socket and every pending
 * connection, each pending connection with its own deadline. A member
 * sends its hello as soon as it connects, so it is usually read at once;
 * what does not say hello in time is dropped. */
#define _GNU_SOURCE /* accept4 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "os/accept.h"
#include "os/sock.h"

void sseg_os_acceptor_init(struct sseg_os_acceptor *a, int listen_fd, size_t hello_len,
			   uid_t uid, double hello_s)
{
	memset(a, 0, sizeof(*a));
	a->listen_fd = listen_fd;
	a->hello_len = hello_len < SSEG_OS_HELLO_MAX ? hello_len : SSEG_OS_HELLO_MAX;
	a->uid = uid;
	a->hello_s = hello_s;
}

static void drop(struct sseg_os_acceptor *a, int i, unsigned *cause)
{
	close(a->pending[i].fd);
	a->pending[i] = a->pending[--a->npending];
	(*cause)++;
}

/* Reads what has arrived: 1 when the hello is whole, 0 when more is to
 * come, -1 when the connection closed or failed (dropped). */
static int read_hello(struct sseg_os_acceptor *a, int i)
{
	struct sseg_os_pending *p = &a->pending[i];
	ssize_t n = recv(p->fd, p->hello + p->got, a->hello_len - p->got, MSG_DONTWAIT);

	if (n > 0)
		p->got += (size_t)n;
	else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		drop(a, i, &a->closed);
		return -1;
	}
	return p->got == a->hello_len;
}

/* Takes one new connection into the pending set; when the set is full the
 * oldest (the one nearest its deadline) makes room. Returns its index, or
 * -1 when none was taken. */
static int take_new(struct sseg_os_acceptor *a)
{
	uid_t uid;
	int fd = accept4(a->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0)
		return -1;
	/* Another user's connection is dropped unread. */
	if (sseg_os_peer_cred(fd, NULL, &uid) || uid != a->uid) {
		close(fd);
		a->other_uid++;
		return -1;
	}
	if (a->npending == SSEG_OS_PENDING_MAX) {
		int oldest = 0;

		for (int i = 1; i < a->npending; i++)
			if (a->pending[i].deadline < a->pending[oldest].deadline)
				oldest = i;
		drop(a, oldest, &a->silent);
	}
	a->pending[a->npending] = (struct sseg_os_pending){
		.fd = fd, .deadline = sseg_now() + a->hello_s, .got = 0,
	};
	return a->npending++;
}

static void expire(struct sseg_os_acceptor *a)
{
	double now = sseg_now();

	for (int i = a->npending - 1; i >= 0; i--)
		if (a->pending[i].deadline <= now)
			drop(a, i, &a->silent);
}

/* The earliest of the overall deadline and every pending one. */
static double next_wakeup(const struct sseg_os_acceptor *a, double deadline)
{
	for (int i = 0; i < a->npending; i++)
		if (a->pending[i].deadline < deadline)
			deadline = a->pending[i].deadline;
	return deadline;
}

static int hand_out(struct sseg_os_acceptor *a, int i, int *fd, void *hello)
{
	*fd = a->pending[i].fd;
	memcpy(hello, a->pending[i].hello, a->hello_len);
	a->pending[i] = a->pending[--a->npending];
	return 0;
}

/* One poll round: 1 with a whole hello at index *ready, 0 otherwise. */
static int poll_round(struct sseg_os_acceptor *a, double deadline, int *ready)
{
	int n = a->npending, rc;

	for (int i = 0; i < n; i++)
		a->pfds[i] = (struct pollfd){ .fd = a->pending[i].fd, .events = POLLIN };
	a->pfds[n] = (struct pollfd){ .fd = a->listen_fd, .events = POLLIN };
	rc = sseg_os_poll(a->pfds, (nfds_t)n + 1, next_wakeup(a, deadline));
	if (rc == -ETIMEDOUT && sseg_now() < deadline)
		rc = 0; /* a pending connection's own deadline */
	if (rc < 0)
		return rc;
	/* Last to first: dropping moves the last entry into the hole. */
	for (int i = n - 1; i >= 0; i--)
		if (a->pfds[i].revents && read_hello(a, i) == 1) {
			*ready = i;
			return 1;
		}
	if (a->pfds[n].revents & POLLIN) {
		int i = take_new(a);

		if (i >= 0 && read_hello(a, i) == 1) {
			*ready = i;
			return 1;
		}
	} else if (a->pfds[n].revents) {
		return -EIO; /* the listening socket itself failed */
	}
	return 0;
}

int sseg_os_acceptor_next(struct sseg_os_acceptor *a, double deadline, int *fd, void *hello)
{
	for (;;) {
		int ready = -1, rc;

		expire(a);
		rc = poll_round(a, deadline, &ready);
		if (rc < 0)
			return rc;
		if (rc == 1)
			return hand_out(a, ready, fd, hello);
	}
}

void sseg_os_acceptor_fini(struct sseg_os_acceptor *a)
{
	while (a->npending > 0)
		close(a->pending[--a->npending].fd);
}

void sseg_os_acceptor_dropped(const struct sseg_os_acceptor *a, char *buf, size_t len)
{
	buf[0] = '\0';
	if (a->other_uid + a->silent + a->closed == 0)
		return;
	snprintf(buf, len, "%u from another user, %u silent, %u closed before a hello",
		 a->other_uid, a->silent, a->closed);
}
