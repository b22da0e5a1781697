/* Abstract unix sockets and fd passing. Abstract names live in the network
 * namespace, not the filesystem, so nothing is left behind after SIGKILL.
 * Every wait is bounded: a peer that never shows up is an error, not a hang. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "os/os.h"

#define NAME_MAX_BYTES 100

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
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return sseg_err(-errno, "cannot create a unix socket: %s", strerror(errno));
	return 0;
}

int os_listen_abstract(const char *name, int backlog, int *fd)
{
	struct sockaddr_un addr;
	socklen_t addrlen;
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

int os_connect_abstract(const char *name, int *fd)
{
	struct sockaddr_un addr;
	socklen_t addrlen;
	int rc, s;

	rc = sseg_fault("connect");
	if (rc)
		return sseg_err(rc, "cannot connect to @%s: injected fault", name);
	rc = new_socket(name, &addr, &addrlen, &s);
	if (rc)
		return rc;
	/* Non-blocking: a listener whose backlog is full answers EAGAIN at
	 * once instead of holding the caller past its deadline. */
	fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
	if (connect(s, (struct sockaddr *)&addr, addrlen)) {
		rc = sseg_err(-errno, "cannot connect to @%s: %s", name, strerror(errno));
		goto close_socket;
	}
	fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
	*fd = s;
	return 0;
close_socket:
	close(s);
	return rc;
}

static int remaining_ms(double deadline)
{
	double left = deadline - sseg_now();

	return left <= 0 ? 0 : (int)(left * 1000.0) + 1;
}

/* Waits until fd has events or the deadline passes: -ETIMEDOUT (no
 * message: the caller knows what it waited for) or another error. */
static int wait_for(int fd, short events, double deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	for (;;) {
		int left = remaining_ms(deadline);
		int n = poll(&pfd, 1, left);

		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return sseg_err(-errno, "poll failed: %s", strerror(errno));
		if (n == 0 && left == 0)
			return -ETIMEDOUT;
	}
}

int os_accept(int listen_fd, int timeout_ms, int *fd)
{
	double deadline = sseg_now() + timeout_ms / 1000.0;
	int rc, s;

	for (;;) {
		rc = wait_for(listen_fd, POLLIN, deadline);
		if (rc == -ETIMEDOUT)
			return sseg_err(rc, "no connection came within %d ms", timeout_ms);
		if (rc)
			return rc;
		s = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (s >= 0)
			break;
		/* A connection that went away between poll and accept. */
		if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
			return sseg_err(-errno, "accept failed: %s", strerror(errno));
	}
	*fd = s;
	return 0;
}

/* One loop for both directions: wait, move what the socket takes, repeat
 * until len bytes moved or the deadline passed. */
static int transfer(int fd, uint8_t *buf, size_t len, int timeout_ms, bool writing)
{
	double deadline = sseg_now() + timeout_ms / 1000.0;
	const char *verb = writing ? "written" : "read";
	size_t done = 0;

	while (done < len) {
		ssize_t n;
		int rc = wait_for(fd, writing ? POLLOUT : POLLIN, deadline);

		if (rc == -ETIMEDOUT)
			return sseg_err(rc, "timed out after %d ms with %zu of %zu bytes %s",
					timeout_ms, done, len, verb);
		if (rc)
			return rc;
		/* MSG_NOSIGNAL: a vanished peer is an error, not SIGPIPE. */
		n = writing ? send(fd, buf + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL)
			    : recv(fd, buf + done, len - done, MSG_DONTWAIT);
		if (n == 0 && !writing)
			return sseg_err(-ECONNRESET, "connection closed after %zu of %zu bytes",
					done, len);
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return sseg_err(-errno, "%s failed after %zu of %zu bytes %s: %s",
					writing ? "write" : "read", done, len, verb, strerror(errno));
		if (n > 0)
			done += (size_t)n;
	}
	return 0;
}

int os_read_full(int fd, void *buf, size_t len, int timeout_ms)
{
	return transfer(fd, buf, len, timeout_ms, false);
}

int os_write_full(int fd, const void *buf, size_t len, int timeout_ms)
{
	/* transfer only reads from buf when writing. */
	return transfer(fd, (uint8_t *)buf, len, timeout_ms, true);
}

int os_send_fd(int sock, int fd, const void *data, size_t len)
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
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return sseg_err(-errno, "sending the fd (SCM_RIGHTS) failed: %s", strerror(errno));
	/* Unix stream sockets send the ancillary data with the first byte; the
	 * rest of the data can follow as plain writes. */
	if ((size_t)n < len)
		return os_write_full(sock, (const uint8_t *)data + n, len - (size_t)n,
				     SSEG_DEFAULT_TIMEOUT_MS);
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

int os_recv_fd(int sock, int *fd, void *data, size_t len, int timeout_ms)
{
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { .iov_base = data, .iov_len = len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = control.buf, .msg_controllen = sizeof(control.buf) };
	double deadline = sseg_now() + timeout_ms / 1000.0;
	int received = -1, rc;
	ssize_t n;

	if (len == 0)
		return sseg_err(-EINVAL, "an fd travels with at least one byte of data");
	do {
		rc = wait_for(sock, POLLIN, deadline);
		if (rc == -ETIMEDOUT)
			return sseg_err(rc, "no fd arrived within %d ms", timeout_ms);
		if (rc)
			return rc;
		n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	} while (n < 0 && (errno == EINTR || errno == EAGAIN));
	if (n < 0)
		return sseg_err(-errno, "receiving an fd failed: %s", strerror(errno));
	if (n == 0)
		return sseg_err(-ECONNRESET, "connection closed before an fd arrived");
	take_fds(&msg, &received);
	if (received < 0)
		return sseg_err(-EPROTO, "%zd bytes arrived without the expected fd", n);
	if (msg.msg_flags & MSG_CTRUNC) {
		rc = sseg_err(-EPROTO, "the fd message carried more control data than expected");
		goto close_fd;
	}
	rc = (size_t)n < len ? os_read_full(sock, (uint8_t *)data + n, len - (size_t)n,
					     remaining_ms(deadline)) : 0;
	if (rc)
		goto close_fd;
	*fd = received;
	return 0;
close_fd:
	close(received);
	return rc;
}

static int peer_cred(int sock, struct ucred *cred)
{
	socklen_t len = sizeof(*cred);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, cred, &len))
		return sseg_err(-errno, "cannot read the peer's credentials (SO_PEERCRED): %s",
				strerror(errno));
	return 0;
}

int os_peer_uid(int sock, uid_t *uid)
{
	struct ucred cred;
	int rc = peer_cred(sock, &cred);

	if (!rc)
		*uid = cred.uid;
	return rc;
}

int os_peer_pid(int sock, pid_t *pid)
{
	struct ucred cred;
	int rc = peer_cred(sock, &cred);

	if (!rc)
		*pid = cred.pid;
	return rc;
}
