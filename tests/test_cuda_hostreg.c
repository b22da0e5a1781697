/* Host registration of memfd segments through the fake driver: chunks of at
 * most register_chunk bytes cut at entry boundaries (three here), the
 * device address exposed, and every chunk unregistered by destroy. */
#include <string.h>

#include "fakeutil.h"
#include "testutil.h"

#define MIB (1ull << 20)

int main(void)
{
	/* 5 entries of 3 MiB (4 KiB-aligned stride 3 MiB): 15 MiB of layout,
	 * chunks of at most 7 MiB must end where an entry starts: 6, 12, 15 MiB
	 * (the mapping rounds to 16 MiB, the last chunk takes the tail). */
	struct sseg_block_desc blocks[] = { { .name = "kv", .count = 5, .bytes = 3 * MIB } };
	struct sseg_info info = { .sz = sizeof(info) };
	struct sseg_layout *layout;
	struct tu_rank r[2];
	struct tu_fake fake;

	tu_fake_load("devices=1;numa=0", &fake);
	CHECK_RC(sseg_layout_create(blocks, 1, SSEG_LAYOUT_GROUPED, 0, &layout), 0);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "hostreg",
						.world_size = 2, .rank = i, .layout = layout,
						.pages = SSEG_PAGES_BASE, .flags = SSEG_F_HOST_REGISTER,
						.register_chunk = 7 * MIB };
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK(fake.live_registrations() == 6); /* 3 chunks in each rank's mapping */
	for (int i = 0; i < 2; i++) {
		unsigned char *base = sseg_base(r[i].seg);
		static const uint64_t starts[] = { 0, 6 * MIB, 12 * MIB };
		static const uint64_t ends[] = { 6 * MIB, 12 * MIB, 15 * MIB };

		CHECK_RC(sseg_info(r[i].seg, &info), 0);
		CHECK(info.registered_chunks == 3);
		CHECK(info.device_addr == (uint64_t)(uintptr_t)base);
		for (int c = 0; c < 3; c++) {
			size_t bytes = 0;
			unsigned flags = 0;
			void *p = NULL;
			int found = 0;

			for (int k = 0; fake.registration(k, &p, &bytes, &flags) == 0; k++)
				if (p == base + starts[c]) {
					found = 1;
					break;
				}
			CHECK(found);
			/* The last chunk also covers the tail past the layout. */
			CHECK(bytes == (c == 2 ? info.mapped_size : ends[c]) - starts[c]);
			CHECK(flags == 3); /* portable | devicemap */
		}
	}
	tu_destroy_all(r, 2);
	CHECK(tu_fake_clean(&fake));

	/* An entry bigger than a chunk cannot be registered whole. */
	memset(r, 0, sizeof(r));
	r[0].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "hostreg-big",
					.world_size = 1, .layout = layout, .pages = SSEG_PAGES_BASE,
					.flags = SSEG_F_HOST_REGISTER, .register_chunk = 2 * MIB };
	CHECK(tu_run_inproc(r, 1) == 1);
	CHECK(strstr(r[0].error, "larger than the registration chunk"));
	tu_destroy_all(r, 1);
	CHECK(tu_fake_clean(&fake));
	sseg_layout_destroy(layout);
	printf("cuda_hostreg: ok\n");
	return 0;
}
