/* SPDX-License-Identifier: Apache-2.0 */
/* The fd channel admits only members: a connection with a wrong token (or
 * claiming a rank that is not a local peer) gets no fd, and the real group
 * completes regardless. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "blob.h"
#include "frame.h"
#include "os/sock.h"
#include "testutil.h"


struct owner_job {
	sseg_t *seg;
	unsigned char *blobs;
	int rc;
};

static void *owner_complete(void *arg)
{
	struct owner_job *j = arg;

	j->rc = sseg_complete(j->seg, j->blobs);
	return NULL;
}

/* Connects like a peer; returns the result of waiting for an fd. */
static int intrude(const char *sock, uint32_t rank, const uint8_t *token)
{
	uint8_t hello[SSEG_FRAME_HEAD + SSEG_TOKEN_LEN], reply[SSEG_FRAME_HEAD];
	int s, fd = -1, rc;

	CHECK_RC(sseg_os_connect_abstract(sock, &s), 0);
	/* The channel's hello, as a peer sends it (src/frame.h). */
	sseg_frame_encode(hello, &(struct sseg_frame){ .kind = SSEG_FRAME_CHANNEL_HELLO,
						       .arg = rank, .len = SSEG_TOKEN_LEN });
	memcpy(hello + SSEG_FRAME_HEAD, token, SSEG_TOKEN_LEN);
	CHECK_RC(sseg_os_send_all(s, hello, sizeof(hello), sseg_os_deadline(1000)), 0);
	rc = sseg_os_recv_fd(s, &fd, reply, sizeof(reply), sseg_os_deadline(3000));
	if (fd >= 0)
		close(fd);
	close(s);
	return rc;
}

/* A peer checks who holds the owner's socket before sending the token: a
 * listener that is not the owner's process is refused. */
static void impostor(void)
{
	struct tu_rank r[2];
	struct owner_job job;
	struct sseg_blob owner;
	unsigned char *blobs;
	pthread_t tid;

	memset(r, 0, sizeof(r));
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "impostor",
						.size = 1 << 20, .world_size = 2, .rank = i,
						.pages = SSEG_PAGES_BASE, .timeout_ms = 1000 };
	blobs = tu_create_inproc(r, 2);
	job = (struct owner_job){ r[0].seg, blobs, 1 };
	CHECK(pthread_create(&tid, NULL, owner_complete, &job) == 0);
	/* Rank 1's view: rank 0's blob names another pid than the listener's. */
	{
		unsigned char view[2 * SSEG_BLOB_SIZE];

		memcpy(view, blobs, sizeof(view));
		CHECK_RC(sseg_blob_decode(view, 0, &owner), 0);
		owner.pid = 1;
		sseg_blob_encode(&owner, view);
		CHECK_RC(sseg_complete(r[1].seg, view), -EPERM);
		CHECK_ERR_HAS("is held by pid");
	}
	pthread_join(tid, NULL);
	CHECK(job.rc == -ETIMEDOUT);
	free(blobs);
	tu_destroy_all(r, 2);
}

int main(void)
{
	impostor();
	struct tu_rank r[3];
	struct owner_job job;
	struct sseg_blob owner;
	uint8_t wrong[SSEG_TOKEN_LEN];
	unsigned char *blobs;
	pthread_t tid;
	int rc, silent;

	memset(r, 0, sizeof(r));
	for (int i = 0; i < 3; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "token",
						.size = 1 << 20, .world_size = 3, .rank = i,
						.pages = SSEG_PAGES_BASE, .timeout_ms = 10000 };
	blobs = tu_create_inproc(r, 3);
	CHECK_RC(sseg_blob_decode(blobs, 0, &owner), 0);
	job = (struct owner_job){ r[0].seg, blobs, 1 };
	CHECK(pthread_create(&tid, NULL, owner_complete, &job) == 0);

	/* A connection that never speaks costs the owner at most a second. */
	CHECK_RC(sseg_os_connect_abstract(owner.handle.sock, &silent), 0);
	memcpy(wrong, owner.handle.token, sizeof(wrong));
	wrong[7] ^= 1;
	rc = intrude(owner.handle.sock, 1, wrong);
	CHECK(rc == -ECONNRESET);
	/* The right token but claiming the owner's own rank. */
	rc = intrude(owner.handle.sock, 0, owner.handle.token);
	CHECK(rc == -ECONNRESET);
	/* The real peers are still served. */
	CHECK_RC(sseg_complete(r[1].seg, blobs), 0);
	CHECK_RC(sseg_complete(r[2].seg, blobs), 0);
	pthread_join(tid, NULL);
	CHECK(job.rc == 0);
	{
		char byte;

		CHECK(read(silent, &byte, 1) == 0); /* the owner dropped it */
		close(silent);
	}
	/* Both peers and the owner map one copy. */
	((unsigned char *)sseg_base(r[2].seg))[0] = 9;
	CHECK(((unsigned char *)sseg_base(r[0].seg))[0] == 9);
	free(blobs);
	tu_destroy_all(r, 3);
	printf("token: ok\n");
	return 0;
}
