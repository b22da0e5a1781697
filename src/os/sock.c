/* SPDX-License-Identifier: Apache-2.0 */
/* Abstract unix sockets and fd passing. Abstract names live in the network
 * namespace, not the filesystem, so nothing is left behind after SIGKILL.
 * Every wait is bounded by a deadline: a peer that never shows up is an
 * error, not a hang. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "os/sock.h"

#define NAME_MAX_BYTES 100
/* How often a wait asks the interrupt check. */
#define SLICE_MS 50

static __thread sseg_interrupt_fn interrupt_fn;
static __thread void *interrupt_ctx;

void sseg_os_set_interrupt(sseg_interrupt_fn fn, void *ctx)
{
	interrupt_fn = fn;
	interrupt_ctx = ctx;
}

int sseg_os_remaining_ms(double deadline)
{
	double left = deadline - sseg_now();

	return left <= 0 ? 0 : (int)(left * 1000.0) + 1;
}

bool sseg_os_interrupted(void)
{
	return interrupt_fn && interrupt_fn(interrupt_ctx);
}

int sseg_os_poll(struct pollfd *fds, nfds_t n, double deadline)
{
	for (;;) {
		int left = sseg_os_remaining_ms(deadline);
		int slice = interrupt_fn && left > SLICE_MS ? SLICE_MS : left;
		int ready = poll(fds, n, slice);

		if (ready > 0)
			return ready;
		if (ready < 0 && errno != EINTR)
			return -errno;
		if (sseg_os_interrupted())
			return -EINTR;
		if (ready == 0 && left == slice)
			return -ETIMEDOUT;
	}
}

int sseg_os_wait(int fd, short events, double deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int rc = sseg_os_poll(&pfd, 1, deadline);

	return rc > 0 ? 0 : rc;
}

static int abstract_addr(const char *name, struct sockaddr_un *addr, socklen_t *addrlen)
{
	size_t len = strlen(name);

	if (len == 0 || len > NAME_MAX_BYTES || len + 1 > sizeof(addr->sun_path))
		return sseg_err(-ENAMETOOLONG, "socket name \"%s\" has %zu bytes, expected 1..%d",
				name, len, NAME_MAX_BYTES);
	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	/* sun_path[0] = 0 makes it abstract; the length, not a NUL, ends it. */
	memcpy(addr->sun_path + 1, name, len);
	*addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
	return 0;
}

static int new_socket(const char *name, struct sockaddr_un *addr, socklen_t *addrlen,
		      int *fd)
{
	int rc = abstract_addr(name, addr, addrlen);

	if (rc)
		return rc;
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (*fd < 0)
		return sseg_err(-errno, "cannot create a unix socket: %s", strerror(errno));
	return 0;
}

int sseg_os_listen_abstract(const char *name, int backlog, int *fd)
{
	struct sockaddr_un addr;
	socklen_t addrlen = 0;
	int rc, s, err;

	rc = new_socket(name, &addr, &addrlen, &s);
	if (rc)
		return rc;
	if (bind(s, (struct sockaddr *)&addr, addrlen)) {
		err = errno;
		rc = sseg_err(-err, "cannot bind the abstract socket @%s: %s%s", name,
			      strerror(err),
			      err == EADDRINUSE ? " (another process listens under this name)" : "");
		goto close_socket;
	}
	if (listen(s, backlog)) {
		rc = sseg_err(-errno, "cannot listen on @%s: %s", name, strerror(errno));
		goto close_socket;
	}
	*fd = s;
	return 0;
close_socket:
	close(s);
	return rc;
}

int sseg_os_connect_abstract(const char *name, int *fd)
{
	struct sockaddr_un addr;
	socklen_t addrlen = 0;
	int rc, s;

	rc = sseg_fault("connect");
	if (rc)
		return sseg_err(rc, "cannot connect to @%s: injected fault", name);
	rc = new_socket(name, &addr, &addrlen, &s);
	if (rc)
		return rc;
	/* Non-blocking: a listener whose backlog is full answers EAGAIN at
	 * once instead of holding the caller past its deadline. */
	if (connect(s, (struct sockaddr *)&addr, addrlen)) {
		if (errno == EAGAIN)
			rc = sseg_err(-EAGAIN, "cannot connect to @%s: its accept backlog is full",
				      name);
		else
			rc = sseg_err(-errno, "cannot connect to @%s: %s", name, strerror(errno));
		goto close_socket;
	}
	*fd = s;
	return 0;
close_socket:
	close(s);
	return rc;
}

int sseg_os_accept(int listen_fd, double deadline, int *fd)
{
	int rc, s;

	for (;;) {
		rc = sseg_os_wait(listen_fd, POLLIN, deadline);
		if (rc == -ETIMEDOUT)
			return sseg_err(rc, "no connection came in time");
		if (rc == -EINTR)
			return sseg_err(rc, "interrupted while waiting for a connection");
		if (rc)
			return sseg_err(rc, "poll failed: %s", strerror(-rc));
		s = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (s >= 0)
			break;
		/* A connection that went away between poll and accept. */
		if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
			return sseg_err(-errno, "accept failed: %s", strerror(errno));
	}
	*fd = s;
	return 0;
}

static int wait_failed(int rc, size_t done, size_t len, const char *verb)
{
	if (rc == -ETIMEDOUT)
		return sseg_err(rc, "timed out with %zu of %zu bytes %s", done, len, verb);
	if (rc == -EINTR)
		return sseg_err(rc, "interrupted with %zu of %zu bytes %s", done, len, verb);
	return sseg_err(rc, "poll failed: %s", strerror(-rc));
}

/* One loop for both directions: move what the socket takes, wait, repeat
 * until len bytes moved or the deadline passed. */
static int transfer(int fd, uint8_t *buf, size_t len, double deadline, bool writing)
{
	const char *verb = writing ? "written" : "read";
	size_t done = 0;

	while (done < len) {
		ssize_t n = writing ? send(fd, buf + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL)
				    : recv(fd, buf + done, len - done, MSG_DONTWAIT);
		int rc;

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0 && !writing)
			return sseg_err(-ECONNRESET, "connection closed after %zu of %zu bytes",
					done, len);
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return sseg_err(-errno, "%s failed after %zu of %zu bytes %s: %s",
					writing ? "write" : "read", done, len, verb, strerror(errno));
		rc = sseg_os_wait(fd, writing ? POLLOUT : POLLIN, deadline);
		if (rc)
			return wait_failed(rc, done, len, verb);
	}
	return 0;
}

int sseg_os_recv_all(int fd, void *buf, size_t len, double deadline)
{
	return transfer(fd, buf, len, deadline, false);
}

int sseg_os_send_all(int fd, const void *buf, size_t len, double deadline)
{
	/* transfer only reads from buf when writing. */
	return transfer(fd, (uint8_t *)buf, len, deadline, true);
}

int sseg_os_send_fd(int sock, int fd, const void *data, size_t len, double deadline)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *cmsg;
	ssize_t n;
	int rc;

	if (len == 0)
		return sseg_err(-EINVAL, "an fd must travel with at least one byte of data");
	rc = sseg_fault("send_fd");
	if (rc)
		return sseg_err(rc, "sending the fd failed: injected fault");
	memset(&control, 0, sizeof(control));
	cmsg = CMSG_FIRSTHDR(&msg);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	for (;;) {
		n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN))
			break;
		rc = sseg_os_wait(sock, POLLOUT, deadline);
		if (rc)
			return wait_failed(rc, 0, len, "written");
	}
	if (n < 0)
		return sseg_err(-errno, "sending the fd (SCM_RIGHTS) failed: %s", strerror(errno));
	/* Unix stream sockets send the ancillary data with the first byte; the
	 * rest of the data can follow as plain writes. */
	if ((size_t)n < len)
		return sseg_os_send_all(sock, (const uint8_t *)data + n, len - (size_t)n, deadline);
	return 0;
}

/* Takes the first fd of every SCM_RIGHTS message and closes the others, so
 * a peer cannot make us leak descriptors by sending more than one. */
static void take_fds(struct msghdr *msg, int *fd)
{
	int got = -1;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int one;

			memcpy(&one, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < 0)
				got = one;
			else
				close(one);
		}
	}
	*fd = got;
}

/* What a message without the expected fd means. The kernel sets MSG_CTRUNC
 * and drops the fd when it cannot install it here: a full fd table. */
static int missing_fd(const struct msghdr *msg, ssize_t n)
{
	if (msg->msg_flags & MSG_CTRUNC)
		return sseg_err(-EMFILE,
				"the fd sent with %zd bytes could not be received: this process has "
				"no free file descriptor (raise RLIMIT_NOFILE, ulimit -n)",
				n);
	return sseg_err(-EPROTO, "%zd bytes arrived without the expected fd", n);
}

int sseg_os_recv_fd(int sock, int *fd, void *data, size_t len, double deadline)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = data, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
	int received = -1, rc;
	ssize_t n;

	if (len == 0)
		return sseg_err(-EINVAL, "an fd travels with at least one byte of data");
	for (;;) {
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN))
			break;
		rc = sseg_os_wait(sock, POLLIN, deadline);
		if (rc == -ETIMEDOUT)
			return sseg_err(rc, "no fd arrived in time");
		if (rc)
			return wait_failed(rc, 0, len, "read");
	}
	if (n < 0)
		return sseg_err(-errno, "receiving an fd failed: %s", strerror(errno));
	if (n == 0)
		return sseg_err(-ECONNRESET, "connection closed before an fd arrived");
	take_fds(&msg, &received);
	if (received < 0)
		return missing_fd(&msg, n);
	if (msg.msg_flags & MSG_CTRUNC) {
		rc = sseg_err(-EPROTO, "the fd message carried more control data than expected");
		goto close_fd;
	}
	rc = (size_t)n < len ? sseg_os_recv_all(sock, (uint8_t *)data + n, len - (size_t)n,
						deadline) : 0;
	if (rc)
		goto close_fd;
	*fd = received;
	return 0;
close_fd:
	close(received);
	return rc;
}

int sseg_os_peer_cred(int sock, pid_t *pid, uid_t *uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		return sseg_err(-errno, "cannot read the peer's credentials (SO_PEERCRED): %s",
				strerror(errno));
	if (pid)
		*pid = cred.pid;
	if (uid)
		*uid = cred.uid;
	return 0;
}
