/* HugeTLB: a small pool is reserved for the test (and given back at exit);
 * two ranks share one copy on 2 MiB pages, verified through hugetlbfs and
 * smaps, and the host-wide HugeTLB use grows by one copy only. */
#include <string.h>

#include "os/host.h"
#include "os/memory.h"
#include "os/hugepage.h"
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
	printf("hugetlb: ok\n");
	return 0;
}
