/* SPDX-License-Identifier: Apache-2.0 */
/* pages=base gets 4 KiB pages, even when shmem_enabled would hand out THP
 * to anyone who asks. */
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define KNOB "/sys/kernel/mm/transparent_hugepage/shmem_enabled"
#define SZ (8u << 20)

static void check_base(void)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[2];

	memset(r, 0, sizeof(r));
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "base",
						.size = SZ, .world_size = 2, .rank = i,
						.pages = SSEG_PAGES_BASE };
	CHECK(tu_run_inproc(r, 2) == 0);
	for (int i = 0; i < 2; i++) {
		memset(sseg_base(r[i].seg), i + 1, SZ);
		CHECK_RC(sseg_info(r[i].seg, &info), 0);
		CHECK(info.pages == SSEG_PAGES_BASE && info.page_size == 4096);
		CHECK(info.huge_bytes == 0 && info.pages_verified);
	}
	tu_destroy_all(r, 2);
}

int main(void)
{
	tu_lock_machine();
	check_base();
	if (access(KNOB, W_OK) == 0) {
		CHECK_RC(tu_knob_set(KNOB, "always"), 0);
		check_base();
	}
	printf("base_pages: ok\n");
	return 0;
}
