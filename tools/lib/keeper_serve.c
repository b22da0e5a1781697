/* SPDX-License-Identifier: Apache-2.0 */
/* The keeper (sseg_keeper_run): holds the memfds owners leave with it, and
 * gives each to the next owner that declares it the same way, one live
 * group at a time. It answers one connection at a time, each bounded, on a
 * socket in this user's runtime directory that no other user can reach; it
 * never maps a segment, only a tag page per segment for `sharedseg ls`;
 * what it holds is freed when it stops or is killed (the kernel closes its
 * descriptors). */
#define _GNU_SOURCE /* accept4 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "keeper_serve.h"
#include "keeper_wire.h"
#include "log.h"
#include "os/claim.h"
#include "os/memfd.h"
#include "os/named.h"
#include "os/sock.h"
#include "os/window.h"
#include "tag.h"
#include "util.h"

#define KEEPER_MAX 1024         /* segments one keeper holds */
#define KEEPER_SLICE_S 0.1      /* how often stop is asked */
#define KEEPER_PEER_S 2.0       /* one connection's bound */
#define REFUSAL_LOG_S 10.0
/* Descriptors kept free past a hold: to take the next connection and give
 * back what it holds (the owner's TAKE), whatever else is refused. */
#define KEEPER_FD_RESERVE 3

struct kept {
	struct sseg_keep_decl decl;
	int fd; /* the keeper's own open file description: never a group's */
};

struct keeper {
	const char *name;
	struct kept *held;
	int n, cap;
	int spare_fd; /* given up to take a connection at the open-file limit */
	void *tag;    /* "sseg-tag:keeper=NAME": who it is, for `sharedseg ls` */
};

static struct sseg_ratelimit refused_user, refused_frame, fd_limit;

static struct kept *find(struct keeper *k, const char *name)
{
	for (int i = 0; i < k->n; i++)
		if (!strcmp(k->held[i].decl.d.name, name))
			return &k->held[i];
	return NULL;
}

static void drop(struct keeper *k, struct kept *x, const char *why)
{
	char size[32];

	sseg_format_size(x->decl.mapped_size, size, sizeof(size));
	sseg_log(SSEG_LOG_INFO, "keeper '%s': segment '%s' (%s) freed: %s", k->name, x->decl.d.name,
		 size, why);
	close(x->fd);
	*x = k->held[--k->n];
}

static void place_tag(struct keeper *k)
{
	char tag[SSEG_TAG_MAX];

	snprintf(tag, sizeof(tag), SSEG_TAG_LABEL SSEG_KEEPER_TAG "%s", k->name);
	if (sseg_os_tag_page(tag, &k->tag))
		k->tag = NULL;
}

static int reply(int sock, uint32_t op, const struct sseg_keep_decl *d, const char *why)
{
	struct sseg_keep_msg m = { .op = op };
	uint8_t frame[SSEG_KEEP_FRAME];

	if (d)
		m.decl = *d;
	snprintf(m.why, sizeof(m.why), "%s", why ? why : "");
	sseg_keep_encode(&m, frame);
	return sseg_os_send_all(sock, frame, sizeof(frame), sseg_now() + KEEPER_PEER_S);
}

/* Whether a live group maps x: 1 yes, 0 no; where the kernel cannot tell,
 * yes (said in why), so that nothing a group may use is given or freed. */
static int mapped(const struct kept *x, char *why, size_t len)
{
	int rc = sseg_os_memfd_claimed(x->fd);

	if (rc < 0)
		snprintf(why, len, "whether a group maps it is unknown: %s", sseg_last_error());
	return rc != 0;
}

/* The kept fd, claimed for the group it goes to: a description of its own,
 * locked before the answer, so that no other owner is given it meanwhile. */
static void give(struct keeper *k, int sock, const struct kept *x)
{
	char one = 'K';
	int lent = -1;

	if (sseg_os_memfd_reopen(x->fd, &lent) || sseg_os_memfd_claim(lent)) {
		sseg_log(SSEG_LOG_WARN, "keeper '%s': segment '%s' not given: %s", k->name,
			 x->decl.d.name, sseg_last_error());
		reply(sock, SSEG_KEEP_REFUSED, NULL, sseg_last_error());
	} else if (!reply(sock, SSEG_KEEP_KEPT, &x->decl, NULL) &&
		   !sseg_os_send_fd(sock, lent, &one, 1, sseg_now() + KEEPER_PEER_S)) {
		sseg_log(SSEG_LOG_INFO, "keeper '%s': segment '%s' given to a new owner", k->name,
			 x->decl.d.name);
	}
	if (lent >= 0)
		close(lent);
}

static void take(struct keeper *k, int sock, const struct sseg_keep_decl *asked)
{
	struct kept *x = find(k, asked->d.name);
	char why[SSEG_KEEP_WHY], differs[SSEG_KEEP_WHY];
	bool other;

	if (!x) {
		reply(sock, SSEG_KEEP_NONE, NULL, NULL);
		return;
	}
	other = sseg_keep_differs(&x->decl, asked, differs, sizeof(differs));
	snprintf(why, sizeof(why), "%s", other ? differs : "declared the same");
	if (mapped(x, why, sizeof(why))) {
		reply(sock, SSEG_KEEP_BUSY, NULL, why);
		return;
	}
	if (other) {
		drop(k, x, differs);
		reply(sock, SSEG_KEEP_DISCARDED, NULL, differs);
		return;
	}
	give(k, sock, x);
}

/* The held fd, the keeper keeping it: for a process of the same user that
 * reads or writes what the group's segment holds without being a rank of
 * it (an engine's scheduler, which records there which block is complete). */
static void lend(struct keeper *k, int sock, const char *name)
{
	struct kept *x = find(k, name);
	char one = 'L';

	if (!x)
		reply(sock, SSEG_KEEP_NONE, NULL, NULL);
	else if (!reply(sock, SSEG_KEEP_KEPT, &x->decl, NULL))
		sseg_os_send_fd(sock, x->fd, &one, 1, sseg_now() + KEEPER_PEER_S);
}

static int room(struct keeper *k)
{
	struct kept *more;

	if (k->n < k->cap)
		return 0;
	if (k->cap == KEEPER_MAX)
		return -ENOSPC;
	more = realloc(k->held, sizeof(*more) * (size_t)(k->cap ? k->cap * 2 : 16));
	if (!more)
		return -ENOMEM;
	k->held = more;
	k->cap = k->cap ? k->cap * 2 : 16;
	return 0;
}

/* Why an earlier segment of the name stays, or NULL where the new one may
 * take its place: only one its owner found unusable, and no group maps. */
static const char *keeps_earlier(const struct kept *x, uint32_t flags, char *why, size_t len)
{
	char state[SSEG_KEEP_WHY] = "";

	if (mapped(x, state, sizeof(state))) {
		snprintf(why, len, "it holds segment '%s' that a live group maps now%s%s: it keeps "
			 "that one, and this one is kept by no one", x->decl.d.name,
			 state[0] ? "; " : "", state);
		return why;
	}
	if (!(flags & SSEG_KEEP_REPLACE)) {
		snprintf(why, len, "it keeps the segment '%s' an earlier group left (an owner that "
			 "could not take it allocated anew), and this one is kept by no one",
			 x->decl.d.name);
		return why;
	}
	return NULL;
}

/* The received fd: a sealed memfd of the size declared that an owner can
 * map writable (its page size the next owner checks, as a peer would). */
static int acceptable(int fd, const struct sseg_keep_decl *d, char *why, size_t len)
{
	uint64_t page_size;

	if (!sseg_os_memfd_check(fd, d->mapped_size, &page_size) && !sseg_os_memfd_writable(fd))
		return 0;
	snprintf(why, len, "its fd is no sealed, writable memfd of what it declares: %s",
		 sseg_last_error());
	return -EPERM;
}

/* A HOLD refused: the owner is told, and the keeper's log says it too. */
static void refuse_hold(struct keeper *k, int sock, const char *name, const char *why)
{
	sseg_log(SSEG_LOG_WARN, "keeper '%s': segment '%s' not held: %s", k->name, name, why);
	reply(sock, SSEG_KEEP_REFUSED, NULL, why);
}

/* Whether one more held segment leaves room to serve: a keeper out of
 * descriptors could give back none of what it holds. */
static bool room_for_one_more(const struct keeper *k, char *why, size_t len)
{
	struct rlimit rl = { 0, 0 };
	DIR *dir = opendir("/proc/self/fd");
	long open_fds = -1; /* the directory's own */
	struct dirent *e;

	if (!dir || getrlimit(RLIMIT_NOFILE, &rl)) {
		if (dir)
			closedir(dir);
		return true; /* cannot tell: the limit answers for itself */
	}
	while ((e = readdir(dir)))
		open_fds += e->d_name[0] != '.';
	closedir(dir);
	if (rl.rlim_cur == RLIM_INFINITY || open_fds + KEEPER_FD_RESERVE < (long)rl.rlim_cur)
		return true;
	snprintf(why, len, "the keeper is at its limit of open files (RLIMIT_NOFILE %llu, %d "
		 "segments held) and keeps room to give back what it holds: raise ulimit -n",
		 (unsigned long long)rl.rlim_cur, k->n);
	return false;
}

static void hold_fd(struct keeper *k, int sock, const struct sseg_keep_msg *m, int fd)
{
	const struct sseg_keep_decl *d = &m->decl;
	struct kept *x = find(k, d->d.name);
	char why[SSEG_KEEP_WHY], size[32];
	int own, rc;

	if (acceptable(fd, d, why, sizeof(why)) ||
	    (x && keeps_earlier(x, m->flags, why, sizeof(why)))) {
		refuse_hold(k, sock, d->d.name, why);
		return;
	}
	if (!room_for_one_more(k, why, sizeof(why))) {
		refuse_hold(k, sock, d->d.name, why);
		return;
	}
	/* Its own description: the group's lock is on the group's, and only a
	 * lock on another description tells the keeper that a group maps it. */
	if (sseg_os_memfd_reopen(fd, &own)) {
		refuse_hold(k, sock, d->d.name, sseg_last_error());
		return;
	}
	if (x)
		drop(k, x, m->why[0] ? m->why : "its owner found it unusable");
	rc = room(k);
	if (rc) {
		refuse_hold(k, sock, d->d.name,
			    rc == -ENOSPC ? "the keeper holds as many segments as it can"
					  : "out of memory");
		close(own);
		return;
	}
	k->held[k->n++] = (struct kept){ .decl = *d, .fd = own };
	sseg_format_size(d->mapped_size, size, sizeof(size));
	sseg_log(SSEG_LOG_INFO, "keeper '%s': holds segment '%s' (%s, pages=%s)", k->name, d->d.name,
		 size, sseg_pages_name((enum sseg_pages)d->pages));
	reply(sock, SSEG_KEEP_HELD, d, NULL);
}

static void hold(struct keeper *k, int sock, const struct sseg_keep_msg *m)
{
	char one;
	int fd, rc;

	rc = sseg_os_recv_fd(sock, &fd, &one, 1, sseg_now() + KEEPER_PEER_S);
	if (rc == -EMFILE)
		refuse_hold(k, sock, m->decl.d.name, sseg_last_error());
	if (rc)
		return;
	hold_fd(k, sock, m, fd);
	close(fd);
}

static void serve(struct keeper *k, int sock)
{
	uint8_t frame[SSEG_KEEP_FRAME];
	struct sseg_keep_msg m;
	uid_t uid;
	pid_t pid;

	if (sseg_os_peer_cred(sock, &pid, &uid))
		return;
	if (uid != geteuid()) {
		sseg_log_limited(&refused_user, REFUSAL_LOG_S, SSEG_LOG_WARN,
				 "keeper '%s': refused pid %d of uid %u (it serves uid %u only)",
				 k->name, (int)pid, (unsigned)uid, (unsigned)geteuid());
		return;
	}
	if (sseg_os_recv_all(sock, frame, sizeof(frame), sseg_now() + KEEPER_PEER_S))
		return;
	if (sseg_keep_decode(frame, &m) || m.decl.d.name[0] == '\0') {
		sseg_log_limited(&refused_frame, REFUSAL_LOG_S, SSEG_LOG_WARN,
				 "keeper '%s': pid %d sent no keeper's question", k->name, (int)pid);
		return;
	}
	if (m.op == SSEG_KEEP_TAKE)
		take(k, sock, &m.decl);
	else if (m.op == SSEG_KEEP_HOLD)
		hold(k, sock, &m);
	else if (m.op == SSEG_KEEP_LEND)
		lend(k, sock, m.decl.d.name);
}

/* A connection at the open-file limit: the spare descriptor is given up to
 * take it, so that it is closed (its owner hears the keeper is gone, at
 * once) instead of waiting in the backlog, and said. */
static void at_fd_limit(struct keeper *k, int listener)
{
	struct rlimit rl = { 0, 0 };
	int sock;

	getrlimit(RLIMIT_NOFILE, &rl);
	sseg_log_limited(&fd_limit, REFUSAL_LOG_S, SSEG_LOG_WARN,
			 "keeper '%s': at its limit of open files (RLIMIT_NOFILE %llu, %d segments "
			 "held): a connection was refused; raise ulimit -n", k->name,
			 (unsigned long long)rl.rlim_cur, k->n);
	if (k->spare_fd >= 0) {
		close(k->spare_fd);
		sock = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
		if (sock >= 0)
			close(sock);
	}
	k->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* Every connection waiting now, in turn; -errno when the listener failed. */
static int serve_waiting(struct keeper *k, int listener)
{
	for (;;) {
		int sock = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (sock < 0 && (errno == EMFILE || errno == ENFILE)) {
			at_fd_limit(k, listener);
			return 0;
		}
		if (sock < 0)
			return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED ? 0 : -errno;
		serve(k, sock);
		close(sock);
	}
}

/* Each segment is one descriptor: as many as the hard limit allows. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int open_listener(const char *keeper, struct sseg_os_named *listener)
{
	char file[SSEG_NAME_MAX + 8];
	pid_t pid = 0;
	int rc;

	sseg_keep_socket(keeper, file, sizeof(file));
	rc = sseg_os_listen_named(file, SOMAXCONN, listener, &pid);
	if (rc == -EADDRINUSE)
		return sseg_err(rc, "a keeper named '%s' runs already for this user (pid %d)",
				keeper, (int)pid);
	return rc ? sseg_err_wrap(rc, "keeper '%s'", keeper) : 0;
}

static bool stopped(sseg_interrupt_fn stop, void *ctx)
{
	return stop && stop(ctx);
}

static void free_all(struct keeper *k)
{
	uint64_t bytes = 0;
	char size[32];
	int n = k->n;

	while (k->n) {
		bytes += k->held[k->n - 1].decl.mapped_size;
		close(k->held[k->n - 1].fd);
		k->n--;
	}
	free(k->held);
	if (k->spare_fd >= 0)
		close(k->spare_fd);
	sseg_os_untag_page(k->tag);
	sseg_format_size(bytes, size, sizeof(size));
	sseg_log(SSEG_LOG_INFO, "keeper '%s' stops: %d segment%s (%s) let go", k->name, n,
		 n == 1 ? "" : "s", size);
}

int sseg_keeper_run(const char *keeper, sseg_interrupt_fn stop, void *ctx)
{
	struct keeper k = { .name = keeper, .spare_fd = -1 };
	struct sseg_os_named listener;
	int rc;

	sseg_err_clear();
	rc = sseg_keep_check_name(keeper);
	if (!rc)
		rc = open_listener(keeper, &listener);
	if (rc)
		return rc;
	raise_fd_limit();
	k.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	place_tag(&k);
	sseg_log(SSEG_LOG_INFO, "keeper '%s' runs (pid %d, uid %u, socket %s)", keeper,
		 (int)getpid(), (unsigned)geteuid(), listener.path);
	while (!rc && !stopped(stop, ctx)) {
		/* Idle, it waits without a word: no sentence for a quiet slice. */
		rc = sseg_os_wait(listener.fd, POLLIN, sseg_now() + KEEPER_SLICE_S);
		if (rc == -ETIMEDOUT || rc == -EINTR)
			rc = 0;
		else if (!rc)
			rc = serve_waiting(&k, listener.fd);
	}
	free_all(&k);
	sseg_os_unlisten_named(&listener);
	if (rc)
		return sseg_err(rc, "keeper '%s' stopped: its socket failed: %s", keeper,
				strerror(-rc));
	sseg_err_clear();
	return 0;
}
