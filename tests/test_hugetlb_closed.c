/* SPDX-License-Identifier: Apache-2.0 */
/* HugeTLB fails closed: a pool one page too small is refused before
 * anything is allocated, the message gives free and needed counts, and no
 * fd, mapping or huge page is left behind. */
#include <string.h>

#include "os/host.h"
#include "os/hugepage.h"
#include "testutil.h"

int main(void)
{
	struct sseg_hugetlb_pool before, after;
	unsigned char blob[SSEG_BLOB_SIZE];
	char needle[96];
	sseg_t *seg = NULL;
	uint64_t avail, size;
	struct tu_maps maps;
	int fds, rc = tu_hugetlb_reserve(2);

	if (rc)
		return rc;
	CHECK_RC(sseg_os_hugetlb_pool(2u << 20, &before), 0);
	avail = before.free - before.reserved;
	size = (avail + 1) * (2u << 20);
	fds = tu_count_fds();
	maps = tu_maps();
	{
		SSEG_OPTS(o, .name = "closed", .size = size, .world_size = 1,
			  .pages = SSEG_PAGES_HUGETLB_2M);

		CHECK_RC(sseg_create(&o, &seg, blob), -ENOMEM);
	}
	snprintf(needle, sizeof(needle), "has %llu free pages, %llu needed",
		 (unsigned long long)avail, (unsigned long long)avail + 1);
	CHECK_ERR_HAS(needle);
	CHECK_ERR_HAS("nr_hugepages");
	CHECK(seg == NULL);
	CHECK(tu_count_fds() == fds);
	CHECK(tu_maps_same(maps, tu_maps()));
	CHECK_RC(sseg_os_hugetlb_pool(2u << 20, &after), 0);
	CHECK(after.free == before.free && after.reserved == before.reserved);
	printf("hugetlb_closed: ok\n");
	return 0;
}
