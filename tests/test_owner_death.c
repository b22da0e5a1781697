/* SPDX-License-Identifier: Apache-2.0 */
/* The owner's death: after complete the peers keep the data (the memory
 * lives as long as the last mapping); before the hand-over the peers fail
 * with a clear error within the timeout instead of hanging. */
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define RANKS 3
#define SZ (8u << 20)

struct job {
	char name[64];
	int rank;
	int mode;    /* 0: owner dies after complete; 1: dies before; 2: stalls */
	int go[2];   /* the parent says "the owner is gone" */
	pthread_barrier_t *peers; /* the surviving peers, once the owner is gone */
};

static int barrier(struct sseg_local_group *g)
{
	char mine = 1, all[RANKS];

	return sseg_local_allgather(&mine, all, 1, g);
}

static int after_complete(struct job *j, struct sseg_local_group *g)
{
	SSEG_OPTS(o, .name = j->name, .size = SZ, .world_size = RANKS, .rank = j->rank,
		  .pages = SSEG_PAGES_BASE, .timeout_ms = 10000);
	unsigned char *p;
	sseg_t *seg;
	char byte;

	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	p = sseg_base(seg);
	if (j->rank == 0) {
		for (unsigned i = 0; i < SZ; i++)
			p[i] = tu_pattern(0, i);
		CHECK_RC(barrier(g), 0);
		raise(SIGKILL);
	}
	CHECK_RC(barrier(g), 0);
	CHECK(read(j->go[0], &byte, 1) == 1); /* the owner has been reaped */
	for (unsigned i = 0; i < SZ; i++)
		CHECK(p[i] == tu_pattern(0, i));
	/* Every peer has checked every byte before any peer writes one. */
	pthread_barrier_wait(j->peers);
	p[j->rank] = 0xee; /* still writable, still shared memory */
	pthread_barrier_wait(j->peers);
	for (int r = 1; r < RANKS; r++)
		CHECK(p[r] == 0xee); /* each peer sees the other peers' writes */
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
}

static int before_handover(struct job *j, struct sseg_local_group *g)
{
	SSEG_OPTS(o, .name = j->name, .size = SZ, .world_size = RANKS, .rank = j->rank,
		  .pages = SSEG_PAGES_BASE, .timeout_ms = 1500);
	unsigned char blob[SSEG_BLOB_SIZE], blobs[RANKS * SSEG_BLOB_SIZE];
	struct tu_maps maps = tu_maps();
	int fds = tu_count_fds();
	sseg_t *seg;
	double t0;
	int rc;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_local_allgather(blob, blobs, SSEG_BLOB_SIZE, g), 0);
	if (j->rank == 0) {
		if (j->mode == 1)
			raise(SIGKILL);
		sleep(5); /* alive but never completes */
		return 0;
	}
	t0 = tu_now();
	rc = sseg_complete(seg, blobs);
	CHECK(tu_now() - t0 < 4.5); /* its own 1.5 s, not the owner's 5 s */
	if (j->mode == 1) {
		CHECK(rc == -ECONNREFUSED || rc == -ECONNRESET);
		CHECK_ERR_HAS("owner rank 0");
	} else {
		CHECK_RC(rc, -ETIMEDOUT);
		CHECK_ERR_HAS("did not hand the segment over within 1500 ms");
	}
	/* Half-taken stages after a failed complete: destroy is all that is left. */
	CHECK_RC(sseg_complete(seg, blobs), -EINVAL);
	CHECK_ERR_HAS("destroy it and create again");
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	CHECK(tu_maps_same(maps, tu_maps()));
	CHECK(tu_count_fds() < fds); /* the group's socket is closed too */
	return 0;
}

static int rank_main(void *arg)
{
	struct job *j = arg;
	struct sseg_local_group *g;

	CHECK_RC(sseg_local_group_open(j->name, j->rank, RANKS, 10000, &g), 0);
	if (j->mode == 0)
		return after_complete(j, g);
	return before_handover(j, g);
}

/* A barrier the forked peers share, for the ranks after the owner. */
static pthread_barrier_t *peer_barrier(void)
{
	pthread_barrier_t *b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_barrierattr_t attr;

	CHECK(b != MAP_FAILED);
	CHECK(pthread_barrierattr_init(&attr) == 0);
	CHECK(pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) == 0);
	CHECK(pthread_barrier_init(b, &attr, RANKS - 1) == 0);
	pthread_barrierattr_destroy(&attr);
	return b;
}

static void run(int mode)
{
	pthread_barrier_t *peers = peer_barrier();
	struct job jobs[RANKS];
	pid_t pids[RANKS];
	char name[64];
	int go[2], st;

	CHECK(pipe(go) == 0);
	tu_name(name, sizeof(name), "death");
	for (int r = 0; r < RANKS; r++) {
		jobs[r] = (struct job){ .rank = r, .mode = mode, .go = { go[0], go[1] },
				  .peers = peers };
		snprintf(jobs[r].name, sizeof(jobs[r].name), "%s", name);
		pids[r] = tu_fork(rank_main, &jobs[r]);
	}
	st = tu_wait(pids[0], 20000);
	CHECK(st == (mode == 2 ? 0 : 128 + SIGKILL) || (mode == 2 && st == -1));
	CHECK(write(go[1], "gg", 2) == 2);
	for (int r = 1; r < RANKS; r++) {
		st = tu_wait(pids[r], 20000);
		if (st) {
			fprintf(stderr, "mode %d: rank %d exited with %d\n", mode, r, st);
			exit(1);
		}
	}
	close(go[0]);
	close(go[1]);
	pthread_barrier_destroy(peers);
	munmap(peers, sizeof(*peers));
}

int main(void)
{
	run(0);
	run(1);
	run(2);
	printf("owner_death: ok\n");
	return 0;
}
