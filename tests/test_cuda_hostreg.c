/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration of memfd segments through the fake driver: chunks of at
 * most register_chunk bytes cut at entry boundaries (three here), the
 * device address exposed, and every chunk unregistered by destroy. Cuts
 * fall on page boundaries where the layout has one within reach, even for
 * entries aligned below 4 KiB (gVisor refuses a registration that does not
 * start on a page: register_aligned=1). A chunk the driver refuses as an
 * invalid value is halved once; a second refusal is the error. */
#include <string.h>

#include "fakeutil.h"
#include "testutil.h"

#define MIB (1ull << 20)

/* Entries of 12345 bytes at a 64-byte stride (12352): only every 64th
 * entry starts on a page. */
static void aligned_cuts(struct tu_fake *fake)
{
	struct sseg_block_desc block = { .name = "kv", .count = 1000, .bytes = 12345 };
	struct sseg_layout *layout;
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[1];
	size_t bytes = 0;
	unsigned flags;
	void *p;
	int n = 0;

	CHECK(fake->configure("register_aligned=1") == 0);
	CHECK_RC(sseg_layout_create(&block, 1, SSEG_LAYOUT_GROUPED, 64, &layout), 0);
	memset(r, 0, sizeof(r));
	r[0].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "hostreg-odd",
					.world_size = 1, .layout = layout, .pages = SSEG_PAGES_BASE,
					.flags = SSEG_F_HOST_REGISTER, .register_chunk = 2 * MIB };
	CHECK(tu_run_inproc(r, 1) == 0);
	CHECK_RC(sseg_info(r[0].seg, &info), 0);
	for (; fake->registration(n, &p, &bytes, &flags) == 0; n++) {
		uint64_t off = (uint64_t)((unsigned char *)p - (unsigned char *)info.base);

		CHECK(off % 4096 == 0 && (off % 12352 == 0 || off >= 1000 * 12352ull));
		CHECK(bytes <= 2 * MIB);
	}
	CHECK(n == info.registered_chunks && n >= 6);
	tu_destroy_all(r, 1);
	sseg_layout_destroy(layout);
	CHECK(fake->configure("register_aligned=0") == 0);
	CHECK(tu_fake_clean(fake));
}

/* A one-rank registered segment: complete's result must be expect, and
 * its error must name each needle. */
static void solo_register(uint64_t chunk, int expect, const char *const *needles,
			  struct sseg_info *info)
{
	SSEG_OPTS(o, .name = "hostreg-half", .size = 16 * MIB, .world_size = 1,
		  .pages = SSEG_PAGES_BASE, .flags = SSEG_F_HOST_REGISTER, .register_chunk = chunk);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), expect);
	for (; needles && *needles; needles++)
		CHECK_ERR_HAS(*needles);
	info->sz = sizeof(*info);
	CHECK_RC(sseg_info(seg, info), 0);
	CHECK_RC(sseg_destroy(seg), 0);
}

/* 8 MiB chunks where the driver pins at most 5 MiB at once: halved to 4;
 * at most 3 MiB: the halved chunk is refused too, and that is the error. */
static void halving(struct tu_fake *fake)
{
	static const char *const refused[] = {
		"chunk 1 of 4 (4194304 bytes at offset 0, the chunk halved once already)",
		"CUDA_ERROR_INVALID_VALUE", NULL,
	};
	struct sseg_info info;

	CHECK(fake->configure("max_register=5242880") == 0);
	solo_register(8 * MIB, 0, NULL, &info);
	CHECK(info.registered_chunks == 4);
	CHECK(fake->calls("cuMemHostRegister") == 5); /* one refused, four of half the size */
	CHECK(fake->configure("max_register=3145728") == 0);
	solo_register(8 * MIB, -EINVAL, refused, &info);
	CHECK(fake->configure("max_register=549755813887") == 0);
	CHECK(tu_fake_clean(fake));
}

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
	aligned_cuts(&fake);
	fake.reset();
	halving(&fake);
	printf("cuda_hostreg: ok\n");
	return 0;
}
