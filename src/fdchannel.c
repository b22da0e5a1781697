/* The owner's fd channel: an abstract unix socket opened in create, named in
 * the owner's blob. Each local peer connects in complete, proves membership
 * with the owner's random token, receives the fd (SCM_RIGHTS), maps it and
 * acks; the owner's complete returns once every local peer has acked, which
 * is also the barrier that keeps the owner from tearing down too early. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "segment.h"

#define HELLO_MAGIC 0x4f4c4548u /* "HELO" */
#define REPLY_MAGIC 0x44484546u /* "FEHD" */
#define ACK_MAGIC 0x4b434153u   /* "SACK" */
#define HELLO_LEN (8 + SSEG_TOKEN_LEN)

static int remaining_ms(double deadline)
{
	double left = deadline - sseg_now();

	return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

int sseg_channel_listen(struct sseg *seg)
{
	uint64_t nonce;
	int rc;

	rc = os_random(seg->token, sizeof(seg->token));
	if (!rc)
		rc = os_random(&nonce, sizeof(nonce));
	if (rc)
		return rc;
	snprintf(seg->sock_name, sizeof(seg->sock_name), "sharedseg-fd-%d-%016" PRIx64,
		 (int)getpid(), nonce);
	rc = os_listen_abstract(seg->sock_name, SOMAXCONN, &seg->channel_fd);
	if (rc)
		return sseg_err_wrap(rc, "owner could not open its fd channel");
	seg->held |= SSEG_HELD_CHANNEL;
	return 0;
}

/* The ranks that collect from this owner over its channel: its own, on its
 * host (fabric peers elsewhere import straight from the blob). */
static bool local_peer(const struct sseg *seg, const struct sseg_blob *blobs, int r)
{
	return r != seg->opts.rank && blobs[r].owner_rank == (uint32_t)seg->opts.rank &&
	       sseg_blob_same_host(&blobs[r], &blobs[seg->opts.rank]);
}

static bool token_equal(const uint8_t *a, const uint8_t *b)
{
	uint8_t diff = 0;

	for (int i = 0; i < SSEG_TOKEN_LEN; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

/* Reads one hello; returns the rank it claims, or -1 for a connection that
 * is not one of the owner's expected peers (refused without failing). */
static int read_hello(struct sseg *seg, const struct sseg_blob *blobs, int conn, int timeout_ms)
{
	uint8_t hello[HELLO_LEN];
	uid_t uid;
	uint32_t rank;

	/* Who it is before what it says: another user's connection is
	 * dropped unread, and a member says hello at once (it connects only
	 * to send it), so a silent connection costs at most a second. */
	if (os_peer_uid(conn, &uid) || uid != seg->host.uid) {
		sseg_log(SSEG_LOG_WARN, "segment '%s': refused a connection from another uid",
			 seg->name);
		return -1;
	}
	if (os_read_full(conn, hello, sizeof(hello), timeout_ms < 1000 ? timeout_ms : 1000))
		return -1;
	rank = sseg_get32(hello + 4);
	if (sseg_get32(hello) != HELLO_MAGIC || !token_equal(hello + 8, seg->token)) {
		sseg_log(SSEG_LOG_WARN, "segment '%s': refused a connection with a wrong token",
			 seg->name);
		return -1;
	}
	if (rank >= (uint32_t)seg->opts.world_size || !local_peer(seg, blobs, (int)rank) ||
	    seg->peer_fds[rank] >= 0) {
		sseg_log(SSEG_LOG_WARN, "segment '%s': refused a connection claiming rank %u",
			 seg->name, rank);
		return -1;
	}
	return (int)rank;
}

static int missing_peers(const struct sseg *seg, const struct sseg_blob *blobs, char *buf,
			 size_t len)
{
	size_t used = 0;
	int n = 0;

	buf[0] = '\0';
	for (int r = 0; r < seg->opts.world_size; r++) {
		if (!local_peer(seg, blobs, r) || seg->peer_fds[r] >= 0)
			continue;
		if (used < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%d", n ? ", " : "", r);
		n++;
	}
	return n;
}

static int serve_peers(struct sseg *seg, const struct sseg_blob *blobs, int fd,
		       uint64_t mapped_size)
{
	int world = seg->opts.world_size, expected = 0, served = 0;
	double deadline = sseg_now() + sseg_timeout_ms(seg) / 1000.0;
	uint8_t reply[16];
	char missing[256];

	seg->peer_fds = malloc(sizeof(int) * (size_t)world);
	if (!seg->peer_fds)
		return sseg_err(-ENOMEM, "out of memory");
	for (int r = 0; r < world; r++) {
		seg->peer_fds[r] = -1;
		expected += local_peer(seg, blobs, r);
	}
	seg->held |= SSEG_HELD_PEERS;
	sseg_put32(reply, REPLY_MAGIC);
	sseg_put32(reply + 4, 0);
	sseg_put64(reply + 8, mapped_size);
	while (served < expected) {
		int conn, rank, rc;

		rc = os_accept(seg->channel_fd, remaining_ms(deadline), &conn);
		if (rc == -ETIMEDOUT || (!rc && remaining_ms(deadline) == 0)) {
			if (!rc)
				close(conn);
			missing_peers(seg, blobs, missing, sizeof(missing));
			return sseg_err(-ETIMEDOUT,
					"owner rank %d: rank(s) %s did not collect the segment within "
					"%d ms (exited, or never called sseg_complete)",
					seg->opts.rank, missing, sseg_timeout_ms(seg));
		}
		if (rc)
			return rc;
		rank = read_hello(seg, blobs, conn, remaining_ms(deadline));
		if (rank < 0) {
			close(conn);
			continue;
		}
		/* fd < 0: the peers import by handle and only need the barrier. */
		rc = fd >= 0 ? os_send_fd(conn, fd, reply, sizeof(reply))
			     : os_write_full(conn, reply, sizeof(reply), remaining_ms(deadline));
		if (rc) {
			close(conn);
			return sseg_err_wrap(rc, "owner rank %d could not hand the segment to rank %d",
					     seg->opts.rank, rank);
		}
		seg->peer_fds[rank] = conn;
		served++;
	}
	return 0;
}

/* On failure the listener closes at once: peers still on their way get a
 * refused or reset connection now, not a wait for their own timeout. */
int sseg_channel_serve(struct sseg *seg, const struct sseg_blob *blobs, int fd,
		       uint64_t mapped_size)
{
	int rc = serve_peers(seg, blobs, fd, mapped_size);

	if (rc)
		sseg_channel_release(seg);
	return rc;
}

int sseg_channel_collect_acks(struct sseg *seg, const struct sseg_blob *blobs)
{
	double deadline = sseg_now() + sseg_timeout_ms(seg) / 1000.0;
	int first_err = 0;

	for (int r = 0; r < seg->opts.world_size; r++) {
		uint8_t ack[8];
		int rc;

		if (seg->peer_fds[r] < 0)
			continue;
		rc = os_read_full(seg->peer_fds[r], ack, sizeof(ack), remaining_ms(deadline));
		if (!rc && sseg_get32(ack) != ACK_MAGIC)
			rc = -EPROTO;
		if (!rc && (int32_t)sseg_get32(ack + 4) != 0) {
			int status = sseg_errno_or((int32_t)sseg_get32(ack + 4), -EPROTO);

			rc = sseg_err(status, "rank %d could not map the segment it received: %s", r,
				      strerror(-status));
		}
		else if (rc)
			rc = sseg_err(rc,
				      "rank %d closed the fd channel before confirming its mapping "
				      "(%s)",
				      r, strerror(-rc));
		if (rc && !first_err)
			first_err = rc;
	}
	sseg_channel_release(seg);
	return first_err;
}

/* A full backlog (EAGAIN) is retried until the deadline, never waited on
 * without one. */
static int connect_owner(struct sseg *seg, const struct sseg_blob *owner, int *sock)
{
	double deadline = sseg_now() + sseg_timeout_ms(seg) / 1000.0;
	struct timespec nap = { 0, 2 * 1000 * 1000 };
	int rc;

	while ((rc = os_connect_abstract(owner->handle.sock, sock)) == -EAGAIN &&
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

	if (os_peer_uid(sock, &uid) || uid != seg->host.uid)
		return sseg_err(-EPERM,
				"the socket of owner rank %u is held by another user: refusing to "
				"send it the token",
				owner->rank);
	if (owner->host.pidns == seg->host.pidns && !os_peer_pid(sock, &pid) &&
	    pid != (pid_t)owner->pid)
		return sseg_err(-EPERM,
				"the socket of owner rank %u (pid %u) is held by pid %d: the owner "
				"is gone and another process took its name",
				owner->rank, owner->pid, (int)pid);
	return 0;
}

int sseg_channel_fetch(struct sseg *seg, const struct sseg_blob *owner, int *fd, int *owner_sock)
{
	uint8_t hello[HELLO_LEN], reply[16];
	int sock, rc;

	rc = connect_owner(seg, owner, &sock);
	if (rc == -ECONNREFUSED || rc == -ENOENT)
		return sseg_err(-ECONNREFUSED,
				"owner rank %u (pid %u) is not listening on its fd channel: it exited "
				"or failed before handing the segment over",
				owner->rank, owner->pid);
	if (rc)
		return sseg_err_wrap(rc, "could not reach owner rank %u", owner->rank);
	rc = check_listener(seg, owner, sock);
	if (rc) {
		close(sock);
		return rc;
	}
	sseg_put32(hello, HELLO_MAGIC);
	sseg_put32(hello + 4, (uint32_t)seg->opts.rank);
	memcpy(hello + 8, owner->handle.token, SSEG_TOKEN_LEN);
	rc = os_write_full(sock, hello, sizeof(hello), sseg_timeout_ms(seg));
	if (!rc)
		rc = fd ? os_recv_fd(sock, fd, reply, sizeof(reply), sseg_timeout_ms(seg))
			: os_read_full(sock, reply, sizeof(reply), sseg_timeout_ms(seg));
	if (rc == -ECONNRESET || rc == -EPIPE)
		rc = sseg_err(-ECONNRESET,
			      "owner rank %u (pid %u) closed the fd channel before handing the "
			      "segment over (did it exit?)",
			      owner->rank, owner->pid);
	else if (rc == -ETIMEDOUT)
		rc = sseg_err(-ETIMEDOUT,
			      "owner rank %u (pid %u) did not hand the segment over within %d ms",
			      owner->rank, owner->pid, sseg_timeout_ms(seg));
	else if (!rc && sseg_get32(reply) != REPLY_MAGIC) {
		if (fd)
			close(*fd);
		rc = sseg_err(-EPROTO, "owner rank %u answered on its fd channel with bad bytes",
			      owner->rank);
	}
	if (rc) {
		close(sock);
		return rc;
	}
	*owner_sock = sock;
	return 0;
}

int sseg_channel_ack(int owner_sock, int status, int timeout_ms)
{
	uint8_t ack[8];
	int rc;

	sseg_put32(ack, ACK_MAGIC);
	sseg_put32(ack + 4, (uint32_t)status);
	rc = os_write_full(owner_sock, ack, sizeof(ack), timeout_ms);
	close(owner_sock);
	return rc;
}

int sseg_channel_release(struct sseg *seg)
{
	if (seg->held & SSEG_HELD_PEERS) {
		for (int r = 0; r < seg->opts.world_size; r++)
			if (seg->peer_fds[r] >= 0)
				close(seg->peer_fds[r]);
		free(seg->peer_fds);
		seg->peer_fds = NULL;
		seg->held &= ~SSEG_HELD_PEERS;
	}
	if (seg->held & SSEG_HELD_CHANNEL) {
		close(seg->channel_fd);
		seg->channel_fd = -1;
		seg->held &= ~SSEG_HELD_CHANNEL;
	}
	return 0;
}

void sseg_channel_describe(const struct sseg *seg, struct sseg_blob_handle *h)
{
	h->pages = seg->pages;
	h->page_size = seg->page_size;
	h->mapped_size = seg->mapped_size;
	snprintf(h->sock, sizeof(h->sock), "%s", seg->sock_name);
	memcpy(h->token, seg->token, sizeof(h->token));
}

int sseg_channel_hand_over(struct sseg *seg, const struct sseg_blob *blobs, int fd)
{
	int rc = sseg_channel_serve(seg, blobs, fd, seg->mapped_size);

	return rc ? rc : sseg_channel_collect_acks(seg, blobs);
}
