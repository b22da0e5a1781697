/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in single-host all-gather: ranks meet on a unix socket named
 * after the group, in this user's runtime directory; rank 0 (the hub) collects every rank's
 * bytes and sends the whole array back. Every wait is bounded, and a
 * failure the hub sees is sent to every rank, so all of them fail with the
 * same sentence instead of some of them waiting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "internal.h"
#include "os/accept.h"
#include "os/named.h"
#include "os/sock.h"

#define CONNECT_RETRY_MS 10
/* Non-hub ranks wait this much longer than the hub, so that they hear the
 * hub's verdict (which rank is missing) instead of timing out first. */
#define PEER_GRACE_S 1.0
/* A member says hello at once: a connection silent this long is dropped. */
#define HELLO_S 1.0
/* How long the hub tries to tell a rank why the group failed. */
#define ABORT_S 0.1

/* The hub's side of one rank's connection. */
struct peer {
	int fd;
	size_t got; /* bytes of the current message received */
	uint8_t hdr[SSEG_FRAME_HEAD];
};

struct sseg_local_group {
	char name[SSEG_NAME_MAX + 1];
	int rank;
	int world_size;
	int timeout_ms;
	bool broken;         /* an earlier failure closed the connections */
	int hub_fd;          /* non-hub: the connection to the hub */
	struct peer *peers;  /* hub: indexed by rank; [0] unused */
	struct pollfd *pfds; /* hub: scratch for gather */
	int *pfd_rank;
};

/* ---- messages ---- */

static const char *hub_tag(int rank)
{
	return rank == 0 ? " (hub)" : "";
}

static int io_fail(const struct sseg_local_group *g, int rc, int rank, const char *doing)
{
	if (rc == -ECONNRESET || rc == -EPIPE)
		return sseg_err(-ECONNRESET, "rank %d%s of local group '%s' closed the connection",
				rank, hub_tag(rank), g->name);
	if (rc == -ETIMEDOUT)
		return sseg_err(-ETIMEDOUT, "local group '%s': rank %d%s did not %s within %d ms",
				g->name, rank, hub_tag(rank), doing, g->timeout_ms);
	return sseg_err(rc, "local group '%s': %s rank %d%s failed: %s", g->name, doing, rank,
			hub_tag(rank), strerror(-rc));
}

/* "rank 3" or "ranks 2, 3": the ranks whose connection is missing or whose
 * message has fewer than need bytes. */
static void list_missing(const struct sseg_local_group *g, size_t need, char *buf, size_t len)
{
	size_t used = 0;
	int n = 0;

	for (int r = 1; r < g->world_size; r++)
		n += g->peers[r].fd < 0 || g->peers[r].got < need;
	used = (size_t)snprintf(buf, len, "rank%s", n > 1 ? "s" : "");
	for (int r = 1, i = 0; r < g->world_size && used < len; r++) {
		if (g->peers[r].fd >= 0 && g->peers[r].got >= need)
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s%d", i++ ? ", " : " ", r);
	}
}

/* ---- group lifetime ---- */

static void close_peers(struct sseg_local_group *g)
{
	for (int r = 1; g->peers && r < g->world_size; r++) {
		if (g->peers[r].fd >= 0)
			close(g->peers[r].fd);
		g->peers[r].fd = -1;
	}
	if (g->hub_fd >= 0)
		close(g->hub_fd);
	g->hub_fd = -1;
}

void sseg_local_group_close(struct sseg_local_group *group)
{
	if (!group)
		return;
	close_peers(group);
	free(group->peers);
	free(group->pfds);
	free(group->pfd_rank);
	free(group);
}

/* Passes the current failure to every connected rank and closes the group. */
static int hub_abort(struct sseg_local_group *g, int err)
{
	char why[SSEG_ERR_MAX];

	snprintf(why, sizeof(why), "%s", sseg_last_error());
	for (int r = 1; r < g->world_size; r++)
		if (g->peers[r].fd >= 0)
			sseg_frame_send_failure(g->peers[r].fd, SSEG_FRAME_GROUP_STATUS, err, why,
						sseg_now() + ABORT_S);
	close_peers(g);
	g->broken = true;
	return err;
}

static int peer_fail(struct sseg_local_group *g, int err)
{
	close_peers(g);
	g->broken = true;
	return err;
}

static int group_alloc(const char *name, int rank, int world_size, int timeout_ms,
		       struct sseg_local_group **group)
{
	struct sseg_local_group *g = calloc(1, sizeof(*g));
	size_t n = (size_t)world_size;

	if (!g)
		return sseg_err(-ENOMEM, "no memory for local group '%s'", name);
	snprintf(g->name, sizeof(g->name), "%s", name);
	g->rank = rank;
	g->world_size = world_size;
	g->timeout_ms = timeout_ms ? timeout_ms : SSEG_DEFAULT_TIMEOUT_MS;
	g->hub_fd = -1;
	*group = g;
	if (rank != 0 || world_size == 1)
		return 0;
	g->peers = calloc(n, sizeof(*g->peers));
	g->pfds = calloc(n, sizeof(*g->pfds));
	g->pfd_rank = calloc(n, sizeof(*g->pfd_rank));
	if (!g->peers || !g->pfds || !g->pfd_rank)
		return sseg_err(-ENOMEM, "no memory for local group '%s' of %d ranks", name,
				world_size);
	for (int r = 0; r < world_size; r++)
		g->peers[r].fd = -1;
	return 0;
}

/* The rendezvous: a socket file in this user's runtime directory, so that
 * no other user can take the name or reach it. A name of file-name bytes
 * is used as it is; any other, by its hash. */
#define GROUP_PREFIX "group-"

static void group_file(const struct sseg_local_group *g, char *file, size_t len)
{
	size_t n = strlen(g->name);

	for (size_t i = 0; i < n; i++) {
		char c = g->name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-')) {
			snprintf(file, len, GROUP_PREFIX "=%016llx%016llx",
				 (unsigned long long)sseg_hash64(g->name, n, 0),
				 (unsigned long long)sseg_hash64(g->name, n, 0x5eed));
			return;
		}
	}
	snprintf(file, len, GROUP_PREFIX "%s", g->name);
}

/* What a wait that timed out may have missed: ranks of one group meet
 * under their user's name, so another user's ranks are never seen (and
 * may be a group of their own: this is said, not judged). */
static void other_user_hint(const struct sseg_local_group *g, char *buf, size_t len)
{
	char file[SSEG_NAME_MAX + 48];
	uid_t uid;

	buf[0] = '\0';
	group_file(g, file, sizeof(file));
	if (!sseg_os_named_other_user(file, geteuid(), &uid))
		snprintf(buf, len, "; uid %u has a local group of this name open, and this rank "
			 "runs as uid %u: ranks of one group must run as one user",
			 (unsigned)uid, (unsigned)geteuid());
}

/* ---- joining: the hub's side ---- */

static int hub_listen(const struct sseg_local_group *g, struct sseg_os_named *listener)
{
	char file[SSEG_NAME_MAX + 48];
	pid_t pid = 0;
	int rc;

	group_file(g, file, sizeof(file));
	rc = sseg_os_listen_named(file, SOMAXCONN, listener, &pid);
	if (rc == -EADDRINUSE)
		return sseg_err(rc, "local group '%s' is already in use on this host: pid %d of this "
				"user holds it", g->name, (int)pid);
	if (rc)
		return sseg_err_wrap(rc, "local group '%s'", g->name);
	return 0;
}

/* Checks one newcomer's hello; 0 with the connection stored under its rank. */
static int hub_admit(struct sseg_local_group *g, int fd, const struct sseg_frame *hello)
{
	int rc = 0;

	int rank = hello->arg <= INT32_MAX ? (int)hello->arg : -1;

	if ((int)hello->aux != g->world_size)
		rc = sseg_err(-EINVAL, "local group '%s': rank %d declared world size %u, rank 0 (hub) %d",
			      g->name, rank, hello->aux, g->world_size);
	else if (rank < 1 || rank >= g->world_size)
		rc = sseg_err(-EINVAL, "local group '%s': a process joined as rank %d, outside 1..%d",
			      g->name, rank, g->world_size - 1);
	else if (g->peers[rank].fd >= 0)
		rc = sseg_err(-EINVAL, "local group '%s': two processes joined as rank %d", g->name,
			      rank);
	if (rc) {
		sseg_frame_send_failure(fd, SSEG_FRAME_GROUP_STATUS, rc, sseg_last_error(),
					sseg_now() + ABORT_S);
		close(fd);
		return rc;
	}
	g->peers[rank].fd = fd;
	return 0;
}

/* The next member: every pending connection is served at once, so silent
 * or foreign ones cost nothing (os/accept.c); one that is not speaking
 * this protocol is dropped without failing the group. */
static int hub_accept_one(struct sseg_local_group *g, struct sseg_os_acceptor *a,
			  double deadline)
{
	uint8_t hdr[SSEG_FRAME_HEAD];
	struct sseg_frame hello;
	int fd, rc;

	rc = sseg_os_acceptor_next(a, deadline, &fd, hdr);
	if (rc)
		return rc;
	if (sseg_frame_decode(hdr, SSEG_FRAME_GROUP_HELLO, &hello)) {
		close(fd);
		return 0;
	}
	return hub_admit(g, fd, &hello) ? -EINVAL : 0;
}

static int joined(const struct sseg_local_group *g)
{
	int n = 0;

	for (int r = 1; r < g->world_size; r++)
		n += g->peers[r].fd >= 0;
	return n;
}

static int hub_join(struct sseg_local_group *g)
{
	double deadline = sseg_os_deadline(g->timeout_ms);
	struct sseg_os_acceptor *a;
	struct sseg_os_named listener;
	char missing[256], dropped[128], hint[160];
	int rc;

	a = malloc(sizeof(*a));
	if (!a)
		return sseg_err(-ENOMEM, "no memory for local group '%s'", g->name);
	rc = hub_listen(g, &listener);
	if (rc) {
		free(a);
		return rc;
	}
	sseg_os_acceptor_init(a, listener.fd, SSEG_FRAME_HEAD, getuid(), HELLO_S);
	while (!rc && joined(g) < g->world_size - 1)
		rc = hub_accept_one(g, a, deadline);
	sseg_os_acceptor_dropped(a, dropped, sizeof(dropped));
	sseg_os_acceptor_fini(a);
	free(a);
	sseg_os_unlisten_named(&listener);
	if (rc == -ETIMEDOUT) {
		list_missing(g, 0, missing, sizeof(missing));
		other_user_hint(g, hint, sizeof(hint));
		sseg_err(rc, "local group '%s': %s of %d did not join within %d ms%s%s%s%s", g->name,
			 missing, g->world_size, g->timeout_ms, dropped[0] ? " (connections dropped: " : "",
			 dropped, dropped[0] ? ")" : "", hint);
	} else if (rc && rc != -EINVAL) {
		sseg_err(rc, "local group '%s': accept: %s", g->name, strerror(-rc));
	}
	for (int r = 1; !rc && r < g->world_size; r++)
		if (sseg_frame_send(g->peers[r].fd,
				    &(struct sseg_frame){ .kind = SSEG_FRAME_GROUP_STATUS }, NULL, -1,
				    deadline + PEER_GRACE_S))
			rc = io_fail(g, -ECONNRESET, r, "join");
	return rc ? hub_abort(g, rc) : 0;
}

/* ---- joining: every other rank ---- */

/* The hub must be this user's before a frame is sent to it (the runtime
 * directory is this user's alone: this is the second lock on the door). */
static int check_hub(struct sseg_local_group *g, int s, const char *file)
{
	pid_t pid = 0;
	uid_t uid = 0;
	int rc = sseg_os_peer_cred(s, &pid, &uid);

	if (rc)
		return rc;
	if (uid != getuid())
		return sseg_err(-EPERM,
				"local group '%s': its rendezvous %s is held by uid %u (pid %d), "
				"not this user: refusing to send it anything",
				g->name, file, (unsigned)uid, (int)pid);
	return 0;
}

static int peer_connect(struct sseg_local_group *g, double deadline)
{
	struct timespec nap = { 0, CONNECT_RETRY_MS * 1000000L };
	char file[SSEG_NAME_MAX + 48];
	int rc, s;

	group_file(g, file, sizeof(file));
	for (;;) {
		rc = sseg_os_connect_named(file, deadline, &s);
		if (!rc)
			break;
		if (rc != -ECONNREFUSED)
			return sseg_err_wrap(rc, "local group '%s'", g->name);
		if (sseg_now() >= deadline) {
			char hint[160];

			other_user_hint(g, hint, sizeof(hint));
			return sseg_err(-ETIMEDOUT,
					"local group '%s': rank 0 (hub) did not open it within %d ms%s",
					g->name, g->timeout_ms, hint);
		}
		nanosleep(&nap, NULL);
	}
	rc = check_hub(g, s, file);
	if (rc) {
		close(s);
		return rc;
	}
	g->hub_fd = s;
	return 0;
}

/* Reads the hub's status frame: 0 with *len set, or the failure it
 * reports, whose sentence becomes this rank's. */
static int peer_status(struct sseg_local_group *g, double deadline, const char *doing,
		       uint64_t *len)
{
	uint8_t head[SSEG_FRAME_HEAD], why[SSEG_FRAME_WHY + 1];
	struct sseg_frame f;
	int rc = sseg_os_recv_all(g->hub_fd, head, sizeof(head), deadline);

	if (rc)
		return io_fail(g, rc, 0, doing);
	if (sseg_frame_decode(head, SSEG_FRAME_GROUP_STATUS, &f))
		return sseg_err_wrap(-EPROTO, "local group '%s': rank 0 (hub) sent a malformed frame",
				     g->name);
	if (!f.code) {
		*len = f.len;
		return 0;
	}
	if (f.len > SSEG_FRAME_WHY ||
	    sseg_os_recv_all(g->hub_fd, why, f.len, sseg_now() + ABORT_S))
		f.len = 0;
	why[f.len] = '\0';
	return sseg_err(f.code, "%s (reported by rank 0, the hub)",
			f.len ? (const char *)why : strerror(-f.code));
}

/* A send to the hub failed: the hub may already have said why it closed. */
static int peer_send_fail(struct sseg_local_group *g, int rc, const char *doing)
{
	uint64_t len;
	int said;

	if (rc != -ECONNRESET && rc != -EPIPE)
		return io_fail(g, rc, 0, doing);
	said = peer_status(g, sseg_now(), doing, &len);
	return said ? said : io_fail(g, rc, 0, doing);
}

static int peer_join(struct sseg_local_group *g)
{
	double deadline = sseg_os_deadline(g->timeout_ms);
	struct sseg_frame hello = { .kind = SSEG_FRAME_GROUP_HELLO, .arg = (uint32_t)g->rank,
				    .aux = (uint32_t)g->world_size };
	uint64_t len = 0;
	int rc;

	rc = peer_connect(g, deadline);
	if (rc)
		return rc;
	rc = sseg_frame_send(g->hub_fd, &hello, NULL, -1, deadline);
	if (rc)
		return peer_send_fail(g, rc, "answer");
	/* counted from now: the hub's own deadline ends before this one */
	return peer_status(g, sseg_now() + g->timeout_ms / 1000.0 + PEER_GRACE_S, "answer", &len);
}

int sseg_local_group_open(const char *name, int rank, int world_size, int timeout_ms,
			  struct sseg_local_group **group)
{
	struct sseg_local_group *g = NULL;
	size_t nlen = name ? strlen(name) : 0;
	int rc;

	if (!group)
		return sseg_err(-EINVAL, "sseg_local_group_open: group pointer is NULL");
	*group = NULL;
	if (nlen < 1 || nlen > SSEG_NAME_MAX)
		return sseg_err(-EINVAL, "local group name must be 1 to %u bytes, not %zu",
				SSEG_NAME_MAX, nlen);
	if (world_size < 1 || rank < 0 || rank >= world_size)
		return sseg_err(-EINVAL, "local group '%s': rank %d is outside a world of %d ranks",
				name, rank, world_size);
	if (timeout_ms < 0)
		return sseg_err(-EINVAL, "local group '%s': timeout %d ms is negative", name,
				timeout_ms);
	rc = group_alloc(name, rank, world_size, timeout_ms, &g);
	if (!rc && world_size > 1)
		rc = rank == 0 ? hub_join(g) : peer_join(g);
	if (rc) {
		sseg_local_group_close(g);
		return rc;
	}
	*group = g;
	return 0;
}

/* ---- one all-gather round ---- */

/* Reads what is there from rank r's connection into its frame or its slot
 * of all. 0 on progress (or nothing yet), else the failure. */
static int gather_step(struct sseg_local_group *g, int r, uint8_t *all, size_t len)
{
	struct peer *p = &g->peers[r];
	bool header = p->got < SSEG_FRAME_HEAD;
	struct sseg_frame f;
	ssize_t n;

	if (header)
		n = recv(p->fd, p->hdr + p->got, SSEG_FRAME_HEAD - p->got, MSG_DONTWAIT);
	else
		n = recv(p->fd, all + (size_t)r * len + (p->got - SSEG_FRAME_HEAD),
			 SSEG_FRAME_HEAD + len - p->got, MSG_DONTWAIT);
	if (n == 0)
		return io_fail(g, -ECONNRESET, r, "send");
	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : io_fail(g, -errno, r, "send");
	p->got += (size_t)n;
	if (!header || p->got < SSEG_FRAME_HEAD)
		return 0;
	if (sseg_frame_decode(p->hdr, SSEG_FRAME_GROUP_DATA, &f))
		return sseg_err_wrap(-EPROTO, "local group '%s': rank %d sent a malformed frame",
				     g->name, r);
	if (f.len != len)
		return sseg_err(-EINVAL,
				"local group '%s': rank %d all-gathers %llu bytes, rank 0 (hub) %zu",
				g->name, r, (unsigned long long)f.len, len);
	return 0;
}

/* Collects every rank's bytes, in whatever order they come. */
static int hub_gather(struct sseg_local_group *g, uint8_t *all, size_t len, double deadline)
{
	char missing[256];

	for (int r = 1; r < g->world_size; r++)
		g->peers[r].got = 0;
	for (;;) {
		nfds_t n = 0;
		int ready;

		for (int r = 1; r < g->world_size; r++) {
			if (g->peers[r].got == SSEG_FRAME_HEAD + len)
				continue;
			g->pfds[n] = (struct pollfd){ .fd = g->peers[r].fd, .events = POLLIN };
			g->pfd_rank[n++] = r;
		}
		if (!n)
			return 0;
		ready = sseg_os_poll(g->pfds, n, deadline);
		if (ready < 0 && ready != -ETIMEDOUT)
			return sseg_err(ready, "local group '%s': poll: %s", g->name, strerror(-ready));
		if (ready == -ETIMEDOUT) {
			list_missing(g, SSEG_FRAME_HEAD + len, missing, sizeof(missing));
			return sseg_err(-ETIMEDOUT, "local group '%s': %s of %d did not send within %d ms",
					g->name, missing, g->world_size, g->timeout_ms);
		}
		for (nfds_t i = 0; i < n; i++) {
			int rc = g->pfds[i].revents ? gather_step(g, g->pfd_rank[i], all, len) : 0;

			if (rc)
				return rc;
		}
	}
}

static int hub_round(struct sseg_local_group *g, const void *mine, uint8_t *all, size_t len)
{
	double deadline = sseg_os_deadline(g->timeout_ms);
	size_t total = len * (size_t)g->world_size;
	int rc;

	if (len)
		memmove(all, mine, len);
	rc = hub_gather(g, all, len, deadline);
	for (int r = 1; !rc && r < g->world_size; r++) {
		rc = sseg_frame_send(g->peers[r].fd,
				     &(struct sseg_frame){ .kind = SSEG_FRAME_GROUP_STATUS,
							   .len = (uint32_t)total },
				     all, -1, deadline);
		if (rc)
			rc = io_fail(g, rc, r, "receive");
	}
	return rc ? hub_abort(g, rc) : 0;
}

static int peer_round(struct sseg_local_group *g, const void *mine, uint8_t *all, size_t len)
{
	double deadline = sseg_os_deadline(g->timeout_ms);
	size_t total = len * (size_t)g->world_size;
	uint64_t got = 0;
	int rc;

	rc = sseg_frame_send(g->hub_fd,
			     &(struct sseg_frame){ .kind = SSEG_FRAME_GROUP_DATA, .len = (uint32_t)len },
			     mine, -1, deadline);
	if (rc)
		return peer_fail(g, peer_send_fail(g, rc, "receive"));
	rc = peer_status(g, deadline + PEER_GRACE_S, "answer", &got);
	if (!rc && got != total)
		rc = sseg_err(-EPROTO, "local group '%s': rank 0 (hub) sent %llu bytes, expected %zu",
			      g->name, (unsigned long long)got, total);
	if (!rc) {
		rc = sseg_os_recv_all(g->hub_fd, all, total, deadline + PEER_GRACE_S);
		if (rc)
			rc = io_fail(g, rc, 0, "answer");
	}
	return rc ? peer_fail(g, rc) : 0;
}

int sseg_local_allgather(const void *mine, void *all, size_t len, void *ctx)
{
	struct sseg_local_group *g = ctx;
	size_t total;

	if (!g)
		return sseg_err(-EINVAL, "sseg_local_allgather: the group (ctx) is NULL");
	if (g->broken)
		return sseg_err(-ENOTCONN, "local group '%s' failed earlier and cannot be used",
				g->name);
	if (__builtin_mul_overflow(len, (size_t)g->world_size, &total) || total > UINT32_MAX)
		return sseg_err(-EOVERFLOW, "local group '%s': %zu bytes from %d ranks is too much "
				"(at most 4 GiB in all, a frame's body)",
				g->name, len, g->world_size);
	if (len && (!mine || !all))
		return sseg_err(-EINVAL, "local group '%s': all-gather buffers are NULL", g->name);
	if (g->world_size == 1) {
		if (len)
			memmove(all, mine, len);
		return 0;
	}
	return g->rank == 0 ? hub_round(g, mine, all, len) : peer_round(g, mine, all, len);
}
