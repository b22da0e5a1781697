/* SPDX-License-Identifier: Apache-2.0 */
/* A group spread over two (simulated) hosts: each host's ranks share their
 * host owner's copy; a rank naming an owner on another host is refused. */
#include <string.h>

#include "host_identity.h"
#include "os/host.h"
#include "os/memory.h"
#include "testutil.h"

#define SZ (1u << 20)

static void ranks(struct tu_rank *r, const int *owner, const char *const *host)
{
	memset(r, 0, sizeof(*r) * 4);
	for (int i = 0; i < 4; i++) {
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "hosts",
						.size = SZ, .world_size = 4, .rank = i,
						.owner_rank = owner[i], .pages = SSEG_PAGES_BASE,
						.timeout_ms = 3000 };
		r[i].host = host[i];
	}
}

/* The owner picked from all-gathered host ids: each host's lowest rank. */
static void owners_from_ids(void)
{
	static const char *const hosts[] = { "host-b", "host-a", "host-b", "host-a", "host-c" };
	static const int expect[] = { 0, 1, 0, 1, 4 };
	unsigned char ids[5][SSEG_HOST_ID_SIZE];

	for (int r = 0; r < 5; r++) {
		sseg_test_host(hosts[r]);
		CHECK_RC(sseg_host_identity(ids[r]), 0);
	}
	sseg_test_host(NULL);
	for (int r = 0; r < 5; r++)
		CHECK(sseg_host_owner(ids, 5, r) == expect[r]);
	CHECK_RC(sseg_host_owner(ids, 5, 5), -EINVAL);
}

int main(void)
{
	owners_from_ids();
	static const char *const hosts[] = { "host-a", "host-a", "host-b", "host-b" };
	static const int owners[] = { 0, 0, 2, 2 };
	static const int cross[] = { 0, 0, 2, 0 };
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char *p[4];
	struct tu_rank r[4];

	ranks(r, owners, hosts);
	CHECK(tu_run_inproc(r, 4) == 0);
	for (int i = 0; i < 4; i++)
		p[i] = sseg_base(r[i].seg);
	p[0][0] = 0xaa;
	p[2][0] = 0xbb;
	CHECK(p[1][0] == 0xaa);
	CHECK(p[3][0] == 0xbb);
	CHECK_RC(sseg_info(r[3].seg, &info), 0);
	CHECK(info.owner_rank == 2 && !info.is_owner);
	CHECK_RC(sseg_info(r[2].seg, &info), 0);
	CHECK(info.is_owner);
	tu_destroy_all(r, 4);

	/* populate=spread: each host's ranks fault all of their host's copy. */
	{
		uint64_t shmem0, shmem1, huge;
		const uint64_t big = 64ull << 20;

		ranks(r, owners, hosts);
		for (int i = 0; i < 4; i++) {
			r[i].opts.size = big;
			r[i].opts.populate = SSEG_POPULATE_SPREAD;
		}
		CHECK_RC(sseg_os_meminfo(&shmem0, &huge), 0);
		CHECK(tu_run_inproc(r, 4) == 0);
		CHECK_RC(sseg_os_meminfo(&shmem1, &huge), 0);
		fprintf(stderr, "spread over 2 hosts: Shmem grew by %llu for 2 copies of %llu\n",
			(unsigned long long)(shmem1 - shmem0), (unsigned long long)big);
		CHECK(shmem1 - shmem0 >= 2 * big * 95 / 100);
		tu_destroy_all(r, 4);
	}

	ranks(r, cross, hosts);
	CHECK(tu_run_inproc(r, 4) == 4);
	for (int i = 0; i < 4; i++)
		CHECK(strstr(r[i].error, "rank 3 names rank 0 as its owner, but they run on "
					 "different hosts"));
	tu_destroy_all(r, 4);
	printf("hosts: ok\n");
	return 0;
}
