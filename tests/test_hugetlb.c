/* SPDX-License-Identifier: Apache-2.0 */
/* HugeTLB: a small pool is reserved for the test (and given back at exit);
 * two ranks share one copy on 2 MiB pages, verified through hugetlbfs and
 * smaps, and the host-wide HugeTLB use grows by one copy only. A pool
 * drained after the check is named in the error. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fault.h"
#include "os/host.h"
#include "os/memory.h"
#include "os/hugepage.h"
#include "os/memfd.h"
#include "testutil.h"

#define SZ (8u << 20)

int main(void)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[3];
	uint64_t shmem0, huge0, shmem1, huge1;
	unsigned char *a, *c;
	int rc = tu_hugetlb_reserve(SZ >> 21);

	if (rc)
		return rc;
	CHECK_RC(sseg_os_meminfo(&shmem0, &huge0), 0);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 3; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "hugetlb",
						.size = SZ, .world_size = 3, .rank = i,
						.pages = SSEG_PAGES_HUGETLB_2M };
	CHECK(tu_run_inproc(r, 3) == 0);
	CHECK_RC(sseg_os_meminfo(&shmem1, &huge1), 0);
	CHECK(huge1 - huge0 == SZ);
	for (int i = 0; i < 3; i++) {
		CHECK_RC(sseg_info(r[i].seg, &info), 0);
		CHECK(info.pages == SSEG_PAGES_HUGETLB_2M && info.page_size == (2u << 20));
		CHECK(info.pages_verified);
	}
	a = sseg_base(r[0].seg);
	c = sseg_base(r[2].seg);
	for (unsigned i = 0; i < SZ; i += 4096)
		a[i] = tu_pattern(0, i);
	for (unsigned i = 0; i < SZ; i += 4096)
		CHECK(c[i] == tu_pattern(0, i));
	CHECK_RC(sseg_info(r[2].seg, &info), 0);
	CHECK(info.huge_bytes == SZ);
	tu_destroy_all(r, 3);
	CHECK_RC(sseg_os_meminfo(&shmem1, &huge1), 0);
	CHECK(huge1 == huge0);

	/* The pool drained between the check and the mapping (where HugeTLB
	 * pages are reserved): the error names the pool, not just ENOMEM. */
	{
		SSEG_OPTS(o, .name = "hugetlb-drained", .size = SZ, .world_size = 1,
			  .pages = SSEG_PAGES_HUGETLB_2M);
		unsigned char blob[SSEG_BLOB_SIZE];
		sseg_t *seg = NULL;

		sseg_test_fault("window_map", 0, 1, -ENOMEM);
		CHECK_RC(sseg_create(&o, &seg, blob), -ENOMEM);
		sseg_test_fault(NULL, 0, 0, 0);
		CHECK_ERR_HAS("pages=hugetlb-2M: the 2 MiB HugeTLB pool could not reserve 4 pages");
		CHECK(seg == NULL);
	}

	/* auto takes HugeTLB when the pool can back the whole span. */
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "hugetlb-auto",
						.size = SZ, .world_size = 2, .rank = i };
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK_RC(sseg_info(r[1].seg, &info), 0);
	CHECK(info.pages == SSEG_PAGES_HUGETLB_2M);
	CHECK_RC(sseg_info(r[0].seg, &info), 0);
	CHECK(strstr(info.pages_reason, "HugeTLB 2 MiB pool"));
	tu_destroy_all(r, 2);

	/* A pool with pages but none free: sseg_check_support and create give the
	 * same answer (supported used to look at the total alone). */
	{
		struct sseg_hugetlb_pool pool;
		unsigned char blob[SSEG_BLOB_SIZE];
		sseg_t *seg = NULL;
		uint64_t take;
		int fd;
		void *p;

		CHECK_RC(sseg_check_support(SSEG_BACKEND_MEMFD, SSEG_PAGES_HUGETLB_2M), 0);
		CHECK_RC(sseg_os_hugetlb_pool(2u << 20, &pool), 0);
		take = (pool.free - pool.reserved) * (2u << 20);
		CHECK(pool.total > 0 && take > 0);
		CHECK_RC(sseg_os_memfd_create("drain", take, 2u << 20, &fd), 0);
		p = mmap(NULL, take, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
		CHECK(p != MAP_FAILED);
		CHECK_RC(sseg_check_support(SSEG_BACKEND_MEMFD, SSEG_PAGES_HUGETLB_2M), -ENOMEM);
		CHECK_ERR_HAS("HugeTLB pool has 0 free pages, 1 needed");
		{
			SSEG_OPTS(o, .name = "drained", .size = 2u << 20, .world_size = 1,
				  .pages = SSEG_PAGES_HUGETLB_2M);

			CHECK_RC(sseg_create(&o, &seg, blob), -ENOMEM);
			CHECK_ERR_HAS("HugeTLB pool has 0 free pages, 1 needed");
		}
		munmap(p, take);
		close(fd);
		CHECK_RC(sseg_check_support(SSEG_BACKEND_MEMFD, SSEG_PAGES_HUGETLB_2M), 0);
	}
	printf("hugetlb: ok\n");
	return 0;
}
