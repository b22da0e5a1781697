/* SPDX-License-Identifier: Apache-2.0 */
/* THP for shmem: with shmem_enabled=advise a thp segment gets 2 MiB pages,
 * verified in smaps, for the owner and for a peer that faults through its
 * own mapping; with never, pages=thp fails naming the knob and auto falls
 * back to base pages saying why. Knobs are restored at exit. */
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define KNOB "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
#define KNOB_2M "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/shmem_enabled"
#define SZ (16u << 20)

static void ranks(struct tu_rank *r, enum sseg_pages pages, enum sseg_populate populate)
{
	memset(r, 0, sizeof(*r) * 2);
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "thp",
						.size = SZ, .world_size = 2, .rank = i,
						.pages = pages, .populate = populate };
}

static void thp_obtained(void)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[2];
	volatile unsigned char *p;
	unsigned sum = 0;

	ranks(r, SSEG_PAGES_THP, SSEG_POPULATE_OWNER);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK_RC(sseg_info(r[0].seg, &info), 0);
	CHECK(info.pages == SSEG_PAGES_THP && info.page_size == (2u << 20));
	CHECK(info.pages_verified);
	CHECK(info.huge_bytes == SZ);
	/* The peer's own mapping is PMD-mapped once it touches the pages. */
	p = sseg_base(r[1].seg);
	for (unsigned i = 0; i < SZ; i += 4096)
		sum += p[i];
	CHECK(sum == 0);
	CHECK_RC(sseg_info(r[1].seg, &info), 0);
	CHECK(info.pages == SSEG_PAGES_THP && info.huge_bytes == SZ);
	tu_destroy_all(r, 2);

	/* Spread population: each rank faults its half through its mapping. */
	ranks(r, SSEG_PAGES_THP, SSEG_POPULATE_SPREAD);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK_RC(sseg_info(r[0].seg, &info), 0);
	CHECK(info.huge_bytes >= SZ / 2);
	p = sseg_base(r[0].seg);
	for (unsigned i = 0; i < SZ; i += 4096)
		sum += p[i];
	CHECK_RC(sseg_info(r[0].seg, &info), 0);
	CHECK(info.huge_bytes == SZ);
	tu_destroy_all(r, 2);
}

static void auto_picks_thp(void)
{
	struct sseg_probe probe = { .sz = sizeof(probe) };
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[2];

	CHECK_RC(sseg_probe(SZ, &probe), 0);
	CHECK(probe.thp_shmem_usable);
	for (int i = 0; i < probe.npools; i++)
		if (probe.pools[i].page_size == (2u << 20) && probe.pools[i].free >= SZ >> 21) {
			printf("HugeTLB pool can back it: auto picks HugeTLB, not checked here\n");
			return;
		}
	CHECK(probe.auto_pages == SSEG_PAGES_THP);
	ranks(r, SSEG_PAGES_AUTO, SSEG_POPULATE_OWNER);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK_RC(sseg_info(r[1].seg, &info), 0);
	CHECK(info.pages == SSEG_PAGES_THP);
	tu_destroy_all(r, 2);
}

static void knob_off(void)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[2];

	CHECK_RC(tu_knob_set(KNOB, "never"), 0);
	ranks(r, SSEG_PAGES_THP, SSEG_POPULATE_OWNER);
	CHECK(tu_run_inproc(r, 2) == 2);
	CHECK(r[0].create_rc == -EOPNOTSUPP);
	CHECK(strstr(r[0].error, "shmem_enabled"));
	CHECK(strstr(r[1].error, "rank 0 failed in sseg_create"));
	tu_destroy_all(r, 2);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_MEMFD, SSEG_PAGES_THP), -EOPNOTSUPP);
	CHECK_ERR_HAS("shmem_enabled");

	ranks(r, SSEG_PAGES_AUTO, SSEG_POPULATE_OWNER);
	r[0].opts.size = r[1].opts.size = 1ull << 40; /* no pool backs 1 TiB */
	r[0].opts.populate = r[1].opts.populate = SSEG_POPULATE_LAZY;
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK_RC(sseg_info(r[0].seg, &info), 0);
	CHECK(info.pages == SSEG_PAGES_BASE);
	CHECK(strstr(info.pages_reason, "shmem_enabled"));
	tu_destroy_all(r, 2);
}

int main(void)
{
	tu_lock_machine();
	if (access(KNOB, W_OK)) {
		fprintf(stderr, "%s is not writable: THP for shmem cannot be set up\n", KNOB);
		return TU_SKIP;
	}
	CHECK_RC(tu_knob_set(KNOB, "advise"), 0);
	if (access(KNOB_2M, W_OK) == 0)
		CHECK_RC(tu_knob_set(KNOB_2M, "inherit"), 0);
	thp_obtained();
	auto_picks_thp();
	knob_off();
	printf("thp: ok\n");
	return 0;
}
