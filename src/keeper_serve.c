/* SPDX-License-Identifier: Apache-2.0 */
/* The keeper (sseg_keeper_run): holds the memfds owners leave with it, and
 * gives each to the next owner that declares it the same way. It answers
 * one connection at a time, each bounded; it never maps a segment, only a
 * tag page per segment for `sharedseg ls`; only its own user is served,
 * and what it holds is freed when it stops or is killed (the kernel closes
 * its descriptors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "keeper_wire.h"
#include "log.h"
#include "os/memfd.h"
#include "os/sock.h"
#include "os/window.h"
#include "tag.h"
#include "util.h"

#define KEEPER_MAX 1024         /* segments one keeper holds */
#define KEEPER_SLICE_S 0.1      /* how often stop is asked */
#define KEEPER_PEER_S 2.0       /* one connection's bound */
#define REFUSAL_LOG_S 10.0

struct kept {
	struct sseg_keep_decl decl;
	int fd;
};

struct keeper {
	const char *name;
	struct kept *held;
	int n, cap;
	void *tag; /* "sseg-tag:keeper=NAME": who it is, for `sharedseg ls` */
};

static struct sseg_ratelimit refused_user, refused_frame;

static struct kept *find(struct keeper *k, const char *name)
{
	for (int i = 0; i < k->n; i++)
		if (!strcmp(k->held[i].decl.name, name))
			return &k->held[i];
	return NULL;
}

static void drop(struct keeper *k, struct kept *x, const char *why)
{
	char size[32];

	sseg_format_size(x->decl.mapped_size, size, sizeof(size));
	sseg_log(SSEG_LOG_INFO, "keeper '%s': segment '%s' (%s) freed: %s", k->name, x->decl.name,
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

static void take(struct keeper *k, int sock, const struct sseg_keep_decl *asked)
{
	struct kept *x = find(k, asked->name);
	char why[SSEG_KEEP_WHY], one = 'K';

	if (!x) {
		reply(sock, SSEG_KEEP_NONE, NULL, NULL);
		return;
	}
	if (sseg_keep_differs(&x->decl, asked, why, sizeof(why))) {
		drop(k, x, why);
		reply(sock, SSEG_KEEP_DISCARDED, NULL, why);
		return;
	}
	if (!reply(sock, SSEG_KEEP_KEPT, &x->decl, NULL) &&
	    !sseg_os_send_fd(sock, x->fd, &one, 1, sseg_now() + KEEPER_PEER_S))
		sseg_log(SSEG_LOG_INFO, "keeper '%s': segment '%s' given to a new owner", k->name,
			 x->decl.name);
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

/* The fd is checked as a peer checks its owner's: a sealed memfd of the
 * size declared (its page size the next owner checks, as a peer would). */
static void hold(struct keeper *k, int sock, const struct sseg_keep_decl *d)
{
	struct kept *x;
	uint64_t page_size;
	char one, why[SSEG_KEEP_WHY], size[32];
	int fd, rc;

	if (sseg_os_recv_fd(sock, &fd, &one, 1, sseg_now() + KEEPER_PEER_S))
		return;
	rc = sseg_os_memfd_check(fd, d->mapped_size, &page_size);
	if (rc) {
		snprintf(why, sizeof(why), "its fd is no sealed memfd of what it declares: %s",
			 sseg_last_error());
		reply(sock, SSEG_KEEP_REFUSED, NULL, why);
		close(fd);
		return;
	}
	x = find(k, d->name);
	if (x)
		drop(k, x, "a new owner left another in its place");
	rc = room(k);
	if (rc) {
		reply(sock, SSEG_KEEP_REFUSED, NULL,
		      rc == -ENOSPC ? "the keeper holds as many segments as it can" : "out of memory");
		close(fd);
		return;
	}
	x = &k->held[k->n++];
	*x = (struct kept){ .decl = *d, .fd = fd };
	sseg_format_size(d->mapped_size, size, sizeof(size));
	sseg_log(SSEG_LOG_INFO, "keeper '%s': holds segment '%s' (%s, pages=%s)", k->name, d->name,
		 size, sseg_pages_name((enum sseg_pages)d->pages));
	reply(sock, SSEG_KEEP_HELD, d, NULL);
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
	if (sseg_keep_decode(frame, &m) || m.decl.name[0] == '\0') {
		sseg_log_limited(&refused_frame, REFUSAL_LOG_S, SSEG_LOG_WARN,
				 "keeper '%s': pid %d sent no keeper's question", k->name, (int)pid);
		return;
	}
	if (m.op == SSEG_KEEP_TAKE)
		take(k, sock, &m.decl);
	else if (m.op == SSEG_KEEP_HOLD)
		hold(k, sock, &m.decl);
	else if (m.op == SSEG_KEEP_LEND)
		lend(k, sock, m.decl.name);
}

static int open_listener(const char *keeper, int *fd)
{
	char name[128];
	pid_t pid = 0;
	uid_t uid;
	int rc;

	sseg_keep_socket(keeper, name, sizeof(name));
	rc = sseg_os_listen_abstract(name, 64, fd);
	if (rc == -EADDRINUSE && !sseg_os_abstract_holder(name, &pid, &uid))
		return sseg_err(rc, "a keeper named '%s' runs already (pid %d, uid %u)", keeper,
				(int)pid, (unsigned)uid);
	return rc;
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
	sseg_os_untag_page(k->tag);
	sseg_format_size(bytes, size, sizeof(size));
	sseg_log(SSEG_LOG_INFO, "keeper '%s' stops: %d segment%s (%s) let go", k->name, n,
		 n == 1 ? "" : "s", size);
}

int sseg_keeper_run(const char *keeper, sseg_interrupt_fn stop, void *ctx)
{
	struct keeper k = { .name = keeper };
	int listener, sock, rc;

	sseg_err_clear();
	rc = sseg_keep_check_name(keeper);
	if (!rc)
		rc = open_listener(keeper, &listener);
	if (rc)
		return rc;
	place_tag(&k);
	sseg_log(SSEG_LOG_INFO, "keeper '%s' runs (pid %d, uid %u)", keeper, (int)getpid(),
		 (unsigned)geteuid());
	while (!stopped(stop, ctx)) {
		rc = sseg_os_accept(listener, sseg_now() + KEEPER_SLICE_S, &sock);
		if (rc == -ETIMEDOUT || rc == -EINTR)
			continue;
		if (rc)
			break;
		serve(&k, sock);
		close(sock);
	}
	free_all(&k);
	close(listener);
	if (rc && rc != -ETIMEDOUT && rc != -EINTR)
		return sseg_err_wrap(rc, "keeper '%s' stopped", keeper);
	sseg_err_clear();
	return 0;
}
