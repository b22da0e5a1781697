/* SPDX-License-Identifier: Apache-2.0 */
/* The owner's fd channel. The owner serves every pending connection at once
 * (os/accept.c), each with its own bound for the hello: a silent, slow or
 * foreign connection costs nothing, the real peers are never blamed for it,
 * and refusals are logged at most once per cause and interval. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "background_link.h"
#include "fdchannel.h"
#include "frame.h"
#include "os/accept.h"
#include "os/sock.h"
#include "segment_types.h"

/* A peer's hello: the frame's head and the token. */
#define HELLO_LEN (SSEG_FRAME_HEAD + SSEG_TOKEN_LEN)
/* A member says hello as soon as it connects. */
#define HELLO_S 1.0
#define REFUSAL_LOG_S 10.0

static struct sseg_ratelimit refused_token, refused_rank;

void sseg_channel_init(struct sseg_channel *ch)
{
	memset(ch, 0, sizeof(*ch));
	ch->fd = -1;
}

int sseg_channel_listen(struct sseg *seg)
{
	struct sseg_channel *ch = &seg->channel;
	uint64_t nonce;
	int rc;

	rc = sseg_os_random(ch->token, sizeof(ch->token));
	if (!rc)
		rc = sseg_os_random(&nonce, sizeof(nonce));
	if (rc)
		return rc;
	snprintf(ch->sock_name, sizeof(ch->sock_name), "sharedseg-fd-%d-%016" PRIx64,
		 (int)getpid(), nonce);
	rc = sseg_os_listen_abstract(ch->sock_name, SOMAXCONN, &ch->fd);
	if (rc)
		return sseg_err_wrap(rc, "owner could not open its fd channel");
	seg->held |= SSEG_HELD_CHANNEL;
	return 0;
}

static void close_listener(struct sseg_channel *ch, struct sseg *seg)
{
	if (seg->held & SSEG_HELD_CHANNEL) {
		close(ch->fd);
		ch->fd = -1;
		seg->held &= ~SSEG_HELD_CHANNEL;
	}
}

void sseg_channel_describe(const struct sseg *seg, struct sseg_blob_handle *h)
{
	h->pages = seg->pages;
	h->page_size = seg->page_size;
	h->mapped_size = seg->mapped_size;
	snprintf(h->sock, sizeof(h->sock), "%s", seg->channel.sock_name);
	memcpy(h->token, seg->channel.token, sizeof(h->token));
}

/* The ranks that collect from this owner over its channel: its own, on its
 * host (ranks on other hosts import a fabric handle straight from the blob). */
static bool local_peer(const struct sseg *seg, const struct sseg_blob *blobs, int r)
{
	return r != seg->opts.rank && blobs[r].decl.owner_rank == (uint64_t)seg->opts.rank &&
	       sseg_blob_same_host(&blobs[r], &blobs[seg->opts.rank]);
}

static bool token_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t diff = 0;

	for (int i = 0; i < SSEG_TOKEN_LEN; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

/* The rank a hello claims, or -1 for a connection that is not one of the
 * owner's expected peers (refused without failing the group). */
static int judge_hello(struct sseg *seg, const struct sseg_blob *blobs, const uint8_t *hello,
		       unsigned *refused)
{
	struct sseg_frame f;
	uint32_t rank;

	if (sseg_frame_decode(hello, SSEG_FRAME_CHANNEL_HELLO, &f) || f.len != SSEG_TOKEN_LEN ||
	    !token_equal(hello + SSEG_FRAME_HEAD, seg->channel.token)) {
		sseg_log_limited(&refused_token, REFUSAL_LOG_S, SSEG_LOG_WARN,
				 "segment '%s': refused a connection with a wrong token", seg->name);
		(*refused)++;
		return -1;
	}
	rank = f.arg;
	if (rank >= (uint32_t)seg->opts.world_size || !local_peer(seg, blobs, (int)rank) ||
	    seg->channel.peer_fds[rank] >= 0) {
		sseg_log_limited(&refused_rank, REFUSAL_LOG_S, SSEG_LOG_WARN,
				 "segment '%s': refused a connection claiming rank %u", seg->name,
				 rank);
		(*refused)++;
		return -1;
	}
	return (int)rank;
}

static void missing_peers(const struct sseg *seg, const struct sseg_blob *blobs, char *buf,
			  size_t len)
{
	size_t used = 0;
	int n = 0;

	buf[0] = '\0';
	for (int r = 0; r < seg->opts.world_size; r++) {
		if (!local_peer(seg, blobs, r) || seg->channel.peer_fds[r] >= 0)
			continue;
		if (used < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%d", n ? ", " : "", r);
		n++;
	}
}

/* What went wrong when not every peer came: the missing ranks, and what
 * else knocked meanwhile, so that a stranger's doing is not blamed on them. */
static int serve_failed(struct sseg *seg, const struct sseg_blob *blobs, int rc,
			const struct sseg_os_acceptor *a, unsigned refused)
{
	char missing[256], dropped[128], also[256] = "";

	missing_peers(seg, blobs, missing, sizeof(missing));
	sseg_os_acceptor_dropped(a, dropped, sizeof(dropped));
	if (dropped[0] || refused)
		snprintf(also, sizeof(also),
			 "; meanwhile the channel dropped connections that were no member (%s%s%u "
			 "with a wrong token or rank)",
			 dropped, dropped[0] ? ", " : "", refused);
	if (rc == -EINTR)
		return sseg_err(rc, "owner rank %d: interrupted while rank(s) %s had not collected "
				"the segment", seg->opts.rank, missing);
	if (rc == -ETIMEDOUT)
		return sseg_err(rc,
				"owner rank %d: rank(s) %s did not collect the segment within %d ms "
				"(exited, or never called sseg_complete)%s",
				seg->opts.rank, missing, sseg_timeout_ms(seg), also);
	return sseg_err(rc, "owner rank %d: its fd channel failed while rank(s) %s had not "
			"collected the segment: %s", seg->opts.rank, missing, strerror(-rc));
}

static int send_reply(struct sseg *seg, int conn, int fd, int rank, double deadline)
{
	struct sseg_frame f = { .kind = SSEG_FRAME_CHANNEL_FD, .len = 8 };
	uint8_t size[8];
	int rc;

	sseg_put64(size, seg->mapped_size);
	rc = sseg_frame_send(conn, &f, size, fd, deadline);
	if (rc)
		return sseg_err_wrap(rc, "owner rank %d could not hand the segment to rank %d",
				     seg->opts.rank, rank);
	return 0;
}

static int expected_peers(struct sseg *seg, const struct sseg_blob *blobs)
{
	int world = seg->opts.world_size, expected = 0;

	seg->channel.peer_fds = malloc(sizeof(int) * (size_t)world);
	if (!seg->channel.peer_fds)
		return sseg_err(-ENOMEM, "out of memory");
	for (int r = 0; r < world; r++) {
		seg->channel.peer_fds[r] = -1;
		expected += local_peer(seg, blobs, r);
	}
	seg->held |= SSEG_HELD_PEERS;
	return expected;
}

/* The backend's say before a peer is answered (a trust list to extend). */
static int admit_peer(struct sseg *seg, const struct sseg_blob *blobs, int rank, int conn,
		      sseg_channel_admit_fn admit)
{
	pid_t pid = 0;
	int rc;

	if (!admit)
		return 0;
	rc = sseg_os_peer_cred(conn, &pid, NULL);
	if (!rc)
		rc = admit(seg, &blobs[rank], pid);
	return rc ? sseg_err_wrap(rc, "owner rank %d could not admit rank %d", seg->opts.rank,
				  rank) : 0;
}

static int serve_peers(struct sseg *seg, const struct sseg_blob *blobs, int fd,
		       sseg_channel_admit_fn admit)
{
	double deadline = sseg_os_deadline(sseg_timeout_ms(seg));
	struct sseg_os_acceptor *a;
	unsigned refused = 0;
	int served = 0, expected, rc = 0;

	expected = expected_peers(seg, blobs);
	if (expected < 0)
		return expected;
	a = malloc(sizeof(*a));
	if (!a)
		return sseg_err(-ENOMEM, "out of memory");
	sseg_os_acceptor_init(a, seg->channel.fd, HELLO_LEN, (uid_t)seg->host.uid, HELLO_S);
	while (served < expected) {
		uint8_t hello[HELLO_LEN];
		int conn, rank;

		rc = sseg_os_acceptor_next(a, deadline, &conn, hello);
		if (rc) {
			rc = serve_failed(seg, blobs, rc, a, refused);
			break;
		}
		rank = judge_hello(seg, blobs, hello, &refused);
		if (rank < 0) {
			close(conn);
			continue;
		}
		rc = admit_peer(seg, blobs, rank, conn, admit);
		if (!rc)
			rc = send_reply(seg, conn, fd, rank, deadline);
		if (rc) {
			close(conn);
			break;
		}
		seg->channel.peer_fds[rank] = conn;
		served++;
	}
	sseg_os_acceptor_fini(a);
	free(a);
	return rc;
}

static int collect_acks(struct sseg *seg)
{
	double deadline = sseg_os_deadline(sseg_timeout_ms(seg));
	int first_err = 0;

	for (int r = 0; r < seg->opts.world_size; r++) {
		char why[SSEG_FRAME_WHY + 1], who[64];
		struct sseg_frame ack;
		int rc;

		if (seg->channel.peer_fds[r] < 0)
			continue;
		rc = sseg_frame_recv(seg->channel.peer_fds[r], SSEG_FRAME_CHANNEL_ACK, &ack, why,
				     SSEG_FRAME_WHY, NULL, deadline);
		if (!rc && ack.code) {
			snprintf(who, sizeof(who), "rank %d could not map the segment it received", r);
			rc = sseg_frame_failure(&ack, why, who);
		} else if (rc == -EPROTO) {
			rc = sseg_err_wrap(rc, "rank %d answered on the fd channel", r);
		} else if (rc) {
			rc = sseg_err(rc,
				      "rank %d closed the fd channel before confirming its mapping "
				      "(%s)",
				      r, strerror(-rc));
		}
		if (rc && !first_err)
			first_err = rc;
	}
	return first_err;
}

/* On failure the listener closes at once: peers still on their way get a
 * refused or reset connection now, not a wait for their own timeout. */
int sseg_channel_hand_over(struct sseg *seg, const struct sseg_blob *blobs, int fd,
			   sseg_channel_admit_fn admit)
{
	int rc = serve_peers(seg, blobs, fd, admit);

	if (!rc)
		rc = collect_acks(seg);
	if (rc || !sseg_link_wanted(seg))
		sseg_channel_release(seg);
	else
		close_listener(&seg->channel, seg);
	return rc;
}

int *sseg_channel_take_peers(struct sseg *seg, int *n)
{
	int *conns = NULL;

	*n = 0;
	if (!(seg->held & SSEG_HELD_PEERS))
		return NULL;
	/* In place: the array has a slot for every rank. */
	conns = seg->channel.peer_fds;
	for (int r = 0; r < seg->opts.world_size; r++)
		if (conns[r] >= 0)
			conns[(*n)++] = conns[r];
	seg->channel.peer_fds = NULL;
	seg->held &= ~SSEG_HELD_PEERS;
	return conns;
}

/* 0, or the failure as its sentence: the owner's log then says why. */
static int send_ack(int owner_sock, int status, int timeout_ms)
{
	if (status) {
		sseg_frame_send_failure(owner_sock, SSEG_FRAME_CHANNEL_ACK, status, sseg_last_error(),
					sseg_os_deadline(timeout_ms));
		return 0;
	}
	return sseg_frame_send(owner_sock, &(struct sseg_frame){ .kind = SSEG_FRAME_CHANNEL_ACK },
			       NULL, -1, sseg_os_deadline(timeout_ms));
}

/* A full backlog (EAGAIN) is retried until the deadline, never waited on
 * without one. */
static int connect_owner(struct sseg *seg, const struct sseg_blob *owner, int *sock)
{
	double deadline = sseg_os_deadline(sseg_timeout_ms(seg));
	struct timespec nap = { 0, 2 * 1000 * 1000 };
	int rc;

	while ((rc = sseg_os_connect_abstract(owner->handle.sock, sock)) == -EAGAIN &&
	       sseg_now() < deadline)
		nanosleep(&nap, NULL);
	return rc;
}

/* The socket name is visible to anyone and free again if the owner died:
 * the peer checks that its own user, and the owner's process where it can
 * see it, is what listens, before it sends the token. */
static int check_listener(struct sseg *seg, const struct sseg_blob *owner, int sock)
{
	uid_t uid;
	pid_t pid = 0;

	if (sseg_os_peer_cred(sock, &pid, &uid) || uid != seg->host.uid)
		return sseg_err(-EPERM,
				"the socket of owner rank %u is held by another user: refusing to "
				"send it the token",
				owner->rank);
	if (owner->host.pidns == seg->host.pidns && pid != (pid_t)owner->pid)
		return sseg_err(-EPERM,
				"the socket of owner rank %u (pid %u) is held by pid %d: the owner "
				"is gone and another process took its name",
				owner->rank, owner->pid, (int)pid);
	return 0;
}

static int fetch_failed(struct sseg *seg, const struct sseg_blob *owner, int rc)
{
	if (rc == -ECONNRESET || rc == -EPIPE)
		return sseg_err(-ECONNRESET,
				"owner rank %u (pid %u) closed the fd channel before handing the "
				"segment over (did it exit?)",
				owner->rank, owner->pid);
	if (rc == -ETIMEDOUT)
		return sseg_err(-ETIMEDOUT,
				"owner rank %u (pid %u) did not hand the segment over within %d ms",
				owner->rank, owner->pid, sseg_timeout_ms(seg));
	if (rc == -EINTR)
		return sseg_err(-EINTR, "interrupted while waiting for owner rank %u", owner->rank);
	return rc; /* the sentence names the cause (EMFILE, a missing fd) */
}

static int exchange_hello(struct sseg *seg, const struct sseg_blob *owner, int sock, int *fd)
{
	double deadline = sseg_os_deadline(sseg_timeout_ms(seg));
	struct sseg_frame hello = { .kind = SSEG_FRAME_CHANNEL_HELLO,
				    .arg = (uint32_t)seg->opts.rank, .len = SSEG_TOKEN_LEN };
	struct sseg_frame reply;
	uint8_t size[8];
	int rc, got = -1;

	rc = sseg_frame_send(sock, &hello, owner->handle.token, -1, deadline);
	if (!rc)
		rc = sseg_frame_recv(sock, SSEG_FRAME_CHANNEL_FD, &reply, size, sizeof(size),
				     fd ? &got : NULL, deadline);
	if (rc == -EPROTO)
		return sseg_err_wrap(rc, "owner rank %u answered on its fd channel", owner->rank);
	if (rc)
		return fetch_failed(seg, owner, rc);
	if (fd && got < 0)
		return sseg_err(-EPROTO, "owner rank %u answered on its fd channel without the "
				"segment's fd", owner->rank);
	if (fd)
		*fd = got;
	return 0;
}

int sseg_channel_fetch(struct sseg *seg, const struct sseg_blob *owner, int *fd, int *owner_sock)
{
	int sock, rc;

	rc = connect_owner(seg, owner, &sock);
	if (rc == -ECONNREFUSED || rc == -ENOENT)
		return sseg_err(-ECONNREFUSED,
				"owner rank %u (pid %u) is not listening on its fd channel: it exited "
				"or failed before handing the segment over",
				owner->rank, owner->pid);
	if (rc == -EAGAIN)
		return sseg_err(-EAGAIN,
				"could not reach owner rank %u (pid %u) within %d ms: the listen "
				"backlog of its fd channel stayed full (the owner is not accepting: "
				"stopped, or busy with other connections)",
				owner->rank, owner->pid, sseg_timeout_ms(seg));
	if (rc)
		return sseg_err_wrap(rc, "could not reach owner rank %u", owner->rank);
	rc = check_listener(seg, owner, sock);
	if (rc) {
		close(sock);
		return rc;
	}
	rc = exchange_hello(seg, owner, sock, fd);
	if (rc) {
		/* Tell the owner why (a full fd table, say), as a mapping
		 * failure would be told; the sentence stays ours. */
		char why[SSEG_ERR_MAX];

		snprintf(why, sizeof(why), "%s", sseg_last_error());
		send_ack(sock, rc, 100);
		close(sock);
		return sseg_err(rc, "%s", why);
	}
	*owner_sock = sock;
	return 0;
}

int sseg_channel_ack(struct sseg *seg, int owner_sock, int status)
{
	int rc = send_ack(owner_sock, status, sseg_timeout_ms(seg));

	if (!rc && !status && sseg_link_wanted(seg))
		sseg_link_keep(seg, owner_sock);
	else
		close(owner_sock);
	return rc;
}

int sseg_channel_release(struct sseg *seg)
{
	struct sseg_channel *ch = &seg->channel;

	if (seg->held & SSEG_HELD_PEERS) {
		for (int r = 0; r < seg->opts.world_size; r++)
			if (ch->peer_fds[r] >= 0)
				close(ch->peer_fds[r]);
		free(ch->peer_fds);
		ch->peer_fds = NULL;
		seg->held &= ~SSEG_HELD_PEERS;
	}
	close_listener(ch, seg);
	return 0;
}

/* A forked child must not keep the listener open (peers would connect to
 * it and wait) nor hold the peers' connections. Descriptors only: another
 * thread of the parent may have been changing the rest when it forked. */
void sseg_channel_forget(struct sseg *seg)
{
	struct sseg_channel *ch = &seg->channel;

	if ((seg->held & SSEG_HELD_PEERS) && ch->peer_fds)
		for (int r = 0; r < seg->opts.world_size; r++)
			if (ch->peer_fds[r] >= 0)
				close(ch->peer_fds[r]);
	if ((seg->held & SSEG_HELD_CHANNEL) && ch->fd >= 0)
		close(ch->fd);
	seg->held &= ~(SSEG_HELD_PEERS | SSEG_HELD_CHANNEL);
}
