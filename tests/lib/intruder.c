/* SPDX-License-Identifier: Apache-2.0 */
/* The hostile process (intruder.h). */
#define _GNU_SOURCE /* close_range */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "intruder.h"
#include "testutil.h"

#define MAX_HELD 4096
#define VERDICT_MS 3000
#define BOMB_FDS 64

int intruder_dial(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	size_t n = strlen(name);
	/* A path names a socket file; anything else, an abstract name. */
	size_t at = name[0] == '/' ? 0 : 1;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (n + at >= sizeof(a.sun_path)) {
		if (s >= 0)
			close(s);
		return -1;
	}
	memcpy(a.sun_path + at, name, n);
	if (s >= 0 && connect(s, (struct sockaddr *)&a,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + at + n))) {
		close(s);
		return -1;
	}
	return s;
}

void intruder_send(int s, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(s, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* 1: refused (closed); 0: still open, nothing came; counts a descriptor
 * that came with whatever the listener sent. */
static int verdict(int s, int wait_ms, struct intrusion_tally *t)
{
	union {
		char buf[CMSG_SPACE(BOMB_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	char data[512];
	struct pollfd pfd = { .fd = s, .events = POLLIN };

	while (poll(&pfd, 1, wait_ms) > 0) {
		struct iovec iov = { data, sizeof(data) };
		struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = control.buf,
				      .msg_controllen = sizeof(control.buf) };
		ssize_t n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC);

		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n > 0 && c; c = CMSG_NXTHDR(&msg, c))
			if (c->cmsg_type == SCM_RIGHTS)
				t->fds_received += (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (n <= 0)
			return 1; /* closed, or reset */
	}
	return 0;
}

static void judge(int s, int wait_ms, struct intrusion_tally *t)
{
	if (verdict(s, wait_ms, t))
		t->refused++;
	else
		t->unanswered++;
	close(s);
}

static void send_fd_bomb(int s, const uint8_t *bytes, size_t len)
{
	union {
		char buf[CMSG_SPACE(BOMB_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { (void *)bytes, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			      .msg_controllen = sizeof(control.buf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	int fds[BOMB_FDS];

	for (int i = 0; i < BOMB_FDS; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	(void)!sendmsg(s, &msg, MSG_NOSIGNAL);
	for (int i = 0; i < BOMB_FDS; i++)
		close(fds[i]);
}

/* Every connection sends its bytes at once; their verdicts are awaited
 * after the intruder said it is in place, while the group runs. */
static int send_all(const struct intrusion_plan *p, int *held, struct intrusion_tally *t)
{
	int n = 0;

	for (int i = 0; i < p->count && n < MAX_HELD; i++) {
		uint8_t junk[64];
		size_t len = p->len;
		int s = intruder_dial(p->sock);

		t->tried++;
		if (s < 0)
			continue;
		t->connected++;
		if (p->kind == INTRUDE_GARBAGE) {
			len = 1 + (size_t)rand() % sizeof(junk);
			for (size_t b = 0; b < len; b++)
				junk[b] = (uint8_t)rand();
			intruder_send(s, junk, len);
		} else if (p->kind == INTRUDE_FD_BOMB) {
			send_fd_bomb(s, p->bytes, p->len);
		} else {
			intruder_send(s, p->bytes, len);
		}
		held[n++] = s;
	}
	return n;
}

/* The group is let go a tenth of the way in, so that it meets in the
 * thick of the flood. */
static int flood(const struct intrusion_plan *p, struct intrusion_tally *t, int report)
{
	int ready_at = p->count / 10;

	for (int i = 0; i < p->count; i++) {
		int s;

		if (i == ready_at && write(report, "r", 1) != 1)
			return -1;
		s = intruder_dial(p->sock);
		t->tried++;
		if (s >= 0) {
			t->connected++;
			close(s);
		}
	}
	return 0;
}

/* Silent, half-hello and dripping connections stay open while the group
 * runs; the drip sends a byte to each every 50 ms until released. */
static int hold(const struct intrusion_plan *p, int *held, struct intrusion_tally *t)
{
	int n = 0;

	for (int i = 0; i < p->count && n < MAX_HELD; i++) {
		int s = intruder_dial(p->sock);

		t->tried++;
		if (s < 0)
			continue;
		t->connected++;
		if (p->kind == INTRUDE_HALF)
			intruder_send(s, p->bytes, p->len / 2);
		held[n++] = s;
	}
	return n;
}

static void drip(const struct intrusion_plan *p, const int *held, int n, int release)
{
	struct pollfd pfd = { .fd = release, .events = POLLIN };

	for (size_t at = 0; poll(&pfd, 1, 50) == 0; at++)
		for (int i = 0; i < n && at < p->len; i++)
			intruder_send(held[i], p->bytes + at, 1);
}

static bool is_held(enum intrusion kind)
{
	return kind == INTRUDE_SILENT || kind == INTRUDE_HALF || kind == INTRUDE_DRIP;
}

static int intruder_main(const struct intrusion_plan *p, int report, int release)
{
	static int held[MAX_HELD];
	struct intrusion_tally t = { 0, 0, 0, 0, 0 };
	struct rlimit lim;
	char byte = 'r';
	int n = 0;

	/* Thousands of connections held at once. */
	if (!getrlimit(RLIMIT_NOFILE, &lim) && lim.rlim_cur < lim.rlim_max) {
		lim.rlim_cur = lim.rlim_max;
		setrlimit(RLIMIT_NOFILE, &lim);
	}
	if (p->uid && (setgid(p->uid) || setuid(p->uid)))
		return 1;
	srand(12345);
	/* A flood goes on while the group meets; the rest is in place first. */
	if (is_held(p->kind))
		n = hold(p, held, &t);
	else if (p->kind == INTRUDE_FLOOD && flood(p, &t, report))
		return 1;
	else if (p->kind != INTRUDE_FLOOD)
		n = send_all(p, held, &t);
	if (p->kind != INTRUDE_FLOOD && write(report, &byte, 1) != 1)
		return 1;
	if (p->kind == INTRUDE_DRIP)
		drip(p, held, n, release);
	/* Sent bytes have their verdict now; held connections once the group
	 * is done (released), when every one must have been closed. */
	for (int i = 0; !is_held(p->kind) && i < n; i++)
		judge(held[i], VERDICT_MS, &t);
	if (read(release, &byte, 1) != 1)
		return 1;
	for (int i = 0; is_held(p->kind) && i < n; i++)
		judge(held[i], 0, &t);
	return write(report, &t, sizeof(t)) == (ssize_t)sizeof(t) ? 0 : 1;
}

void intruder_start(struct intruder *in, const struct intrusion_plan *plan)
{
	int report[2], release[2];
	char byte;

	if (pipe(report) || pipe(release))
		abort();
	fflush(stdout);
	fflush(stderr);
	in->pid = fork();
	if (in->pid < 0)
		abort();
	if (in->pid == 0) {
		/* A stranger holds nothing of the group's: not the listener or
		 * the memfd this process's threads have open. */
		if (dup2(report[1], 3) != 3 || dup2(release[0], 4) != 4 ||
		    syscall(SYS_close_range, 5, ~0u, 0)) /* glibc 2.34 wraps it; the wheels target 2.28 */
			_exit(1);
		_exit(intruder_main(plan, 3, 4));
	}
	close(report[1]);
	close(release[0]);
	in->report = report[0];
	in->release = release[1];
	if (read(in->report, &byte, 1) != 1)
		fprintf(stderr, "the intruder failed before it was in place\n");
}

int intruder_finish(struct intruder *in, struct intrusion_tally *tally)
{
	int status = 0, rc = 0;

	if (write(in->release, "g", 1) != 1 ||
	    read(in->report, tally, sizeof(*tally)) != (ssize_t)sizeof(*tally))
		rc = -1;
	close(in->release);
	close(in->report);
	if (waitpid(in->pid, &status, 0) != in->pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		rc = -1;
	return rc;
}

int intruder_find_socket(const char *prefix, char *name, size_t len)
{
	char line[512], at_prefix[128];
	/* /proc/net/unix shows an abstract name after '@', a path as it is. */
	size_t skip = prefix[0] == '/' ? 0 : 1;

	snprintf(at_prefix, sizeof(at_prefix), "%s%s", skip ? "@" : "", prefix);
	for (int tries = 0; tries < 500; tries++) {
		FILE *f = fopen("/proc/net/unix", "r");
		char *at = NULL;

		while (f && !at && fgets(line, sizeof(line), f))
			at = strstr(line, at_prefix);
		if (f)
			fclose(f);
		if (at) {
			at[strcspn(at, " \n")] = '\0';
			snprintf(name, len, "%s", at + skip);
			return 0;
		}
		tu_nap_ms(10);
	}
	return -1;
}
