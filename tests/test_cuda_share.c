/* SPDX-License-Identifier: Apache-2.0 */
/* Four processes of one host share a cuda-backend segment through the fake
 * driver. Peers on the owner's host always take the POSIX fd over the fd
 * channel; the owner's blob also carries a fabric handle (for other hosts)
 * where the fabric probe passed. Three fabric worlds: a working IMEX
 * channel, none at all (the attribute claims what creating then refuses),
 * and a channel this process has but no other shares (imex=0, the
 * README's demo: creating and exporting work, importing elsewhere would
 * not, and no peer here needs it). */
#include <string.h>
#include <unistd.h>

#include "fakeutil.h"
#include "testutil.h"

#define RANKS 4
#define SZ (8u << 20)

struct job {
	char name[64];
	int rank;
	const char *owner_handle; /* what the owner reports; peers report cuda-fd */
	const char *config;
};

static int barrier(struct sseg_local_group *g)
{
	char mine = 1, all[RANKS];

	return sseg_local_allgather(&mine, all, 1, g);
}

static int rank_main(void *arg)
{
	struct job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = SZ - 12345, .world_size = RANKS, .rank = j->rank,
		  .backend = SSEG_BACKEND_CUDA, .device = j->rank % 2, .timeout_ms = 10000);
	struct sseg_info info = { .sz = sizeof(info) };
	struct sseg_local_group *g;
	struct tu_fake fake;
	unsigned char *p;
	sseg_t *seg;

	tu_fake_load(j->config, &fake);
	CHECK_RC(sseg_local_group_open(j->name, j->rank, RANKS, 10000, &g), 0);
	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	CHECK_RC(sseg_info(seg, &info), 0);
	CHECK(info.backend == SSEG_BACKEND_CUDA);
	CHECK(!strcmp(info.handle_type, j->rank == 0 ? j->owner_handle : "cuda-fd"));
	CHECK(info.mapped_size == SZ && info.page_size == (2u << 20));
	CHECK(info.device_addr == (uint64_t)(uintptr_t)info.base && info.device == j->rank % 2);
	p = sseg_base(seg);
	if (j->rank == 0)
		for (unsigned i = 0; i < SZ; i += 512)
			p[i] = tu_pattern(0, i);
	CHECK_RC(barrier(g), 0);
	for (unsigned i = 0; i < SZ; i += 512)
		CHECK(p[i] == tu_pattern(0, i));
	p[j->rank * 4096 + 1] = (unsigned char)(0x40 + j->rank);
	CHECK_RC(barrier(g), 0);
	for (int r = 0; r < RANKS; r++)
		CHECK(p[r * 4096 + 1] == 0x40 + r);
	/* The registry covers VMM segments: exact ranges and pins. */
	{
		struct sseg_lookup_result res;

		CHECK_RC(sseg_lookup(p, SZ - 12345, &res), 0);
		CHECK(res.seg == seg && res.block == -1);
		CHECK_RC(sseg_pin(seg), 0);
		CHECK_RC(sseg_destroy(seg), -EBUSY);
		CHECK_RC(sseg_unpin(seg), 0);
	}
	CHECK_RC(barrier(g), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	CHECK(tu_fake_clean(&fake));
	/* Once per handle: its own, the HOST_NUMA probe's, and the owner's
	 * fabric probe's two (created and imported) where it got that far. */
	CHECK(fake.calls("cuMemRelease") ==
	      (j->rank == 0 && !strcmp(j->owner_handle, "cuda-fabric") ? 4 : 2));
	return 0;
}

static void run(const char *config, const char *owner_handle)
{
	struct job jobs[RANKS];
	pid_t pids[RANKS];
	char name[64];

	tu_name(name, sizeof(name), "cuda");
	for (int r = 0; r < RANKS; r++) {
		jobs[r] = (struct job){ .rank = r, .owner_handle = owner_handle, .config = config };
		snprintf(jobs[r].name, sizeof(jobs[r].name), "%s", name);
		pids[r] = tu_fork(rank_main, &jobs[r]);
	}
	for (int r = 0; r < RANKS; r++) {
		int st = tu_wait(pids[r], 30000);

		if (st) {
			fprintf(stderr, "%s: rank %d exited with %d\n", config, r, st);
			exit(1);
		}
	}
}

int main(void)
{
	run("devices=2;numa=0,0;fabric=1;fabric_works=1", "cuda-fabric");
	run("devices=2;numa=0,0;fabric=1;fabric_works=0", "cuda-fd");
	run("devices=2;numa=0,0;fabric=1", "cuda-fabric");
	printf("cuda_share: ok\n");
	return 0;
}
