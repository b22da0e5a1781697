/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration of memfd segments through the ACL runtime (the fake):
 * chunks cut at entry boundaries registered on each rank's device, the
 * device address aclrtHostRegister hands out exposed (not the host one),
 * every chunk unregistered by destroy; AUTO picks the ascend driver where
 * CUDA is absent; a read-only mapping and a product without
 * aclrtHostRegister are refused with the reason. */
#include <stdlib.h>
#include <string.h>

#include "aclutil.h"
#include "testutil.h"

#define MIB (1ull << 20)
#define DEVICE_OFFSET (1ull << 56) /* where the fake puts the device's view */

static struct ta_fake fake;
static struct sseg_layout *layout;

static void ranks(struct tu_rank *r, int n, const char *name, enum sseg_backend driver,
		  uint32_t flags)
{
	memset(r, 0, sizeof(*r) * (size_t)n);
	for (int i = 0; i < n; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = name,
						.world_size = n, .rank = i, .layout = layout,
						.pages = SSEG_PAGES_BASE, .device = i,
						.flags = SSEG_F_HOST_REGISTER | flags,
						.device_backend = driver, .register_chunk = 7 * MIB };
}

/* 5 entries of 3 MiB; chunks of at most 7 MiB end where an entry starts:
 * 0-6, 6-12 and 12-16 MiB (the last takes the tail past the layout). */
static void check_chunks(const struct tu_rank *r)
{
	static const uint64_t starts[] = { 0, 6 * MIB, 12 * MIB };
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char *base = sseg_base(r->seg);

	CHECK_RC(sseg_info(r->seg, &info), 0);
	CHECK(info.registered_chunks == 3 && info.device == r->opts.rank);
	CHECK(info.device_addr == (uint64_t)(uintptr_t)base + DEVICE_OFFSET);
	for (int c = 0; c < 3; c++) {
		size_t bytes = 0, want = (c == 2 ? info.mapped_size : starts[c + 1]) - starts[c];
		void *p = NULL;
		int device = -1, found = 0;

		for (int k = 0; fake.registration(k, &p, &bytes, &device) == 0; k++)
			if (p == base + starts[c]) {
				found = 1;
				break;
			}
		CHECK(found && bytes == want && device == r->opts.rank);
	}
}

static void registered(enum sseg_backend driver)
{
	struct tu_rank r[2];

	ranks(r, 2, driver == SSEG_BACKEND_AUTO ? "acl-reg-auto" : "acl-reg", driver, 0);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK(fake.live_registrations() == 6); /* 3 chunks in each rank's mapping */
	for (int i = 0; i < 2; i++)
		check_chunks(&r[i]);
	tu_destroy_all(r, 2);
	CHECK(ta_fake_clean(&fake));
}

static void refused(const char *name, uint32_t flags, const char *why)
{
	struct tu_rank r[2];

	ranks(r, 2, name, SSEG_BACKEND_ASCEND, flags);
	CHECK(tu_run_inproc(r, 2) > 0);
	CHECK(strstr(r[1].error, why));
	tu_destroy_all(r, 2);
	CHECK(ta_fake_clean(&fake));
}

int main(void)
{
	struct sseg_block_desc blocks[] = { { .name = "kv", .count = 5, .bytes = 3 * MIB } };
	struct sseg_probe_backend facts = { .sz = sizeof(facts) };

	/* No CUDA driver here, whatever the machine has: AUTO must find ACL. */
	setenv("SHAREDSEG_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
	ta_fake_load("devices=2", &fake);
	CHECK_RC(sseg_probe_backend(SSEG_BACKEND_ASCEND, &facts), 0);
	CHECK(facts.host_register == 1);
	CHECK_RC(sseg_layout_create(blocks, 1, SSEG_LAYOUT_GROUPED, 0, &layout), 0);
	registered(SSEG_BACKEND_ASCEND);
	registered(SSEG_BACKEND_AUTO);
	refused("acl-reg-ro", SSEG_F_READONLY_PEERS, "ACL_HOST_REGISTER_READONLY is reserved");
	CHECK_RC(fake.configure("host_register=0"), 0);
	refused("acl-reg-none", 0, "aclrtHostRegister failed: ACL_ERROR_RT_FEATURE_NOT_SUPPORT");
	sseg_layout_destroy(layout);
	printf("ascend_hostreg: ok\n");
	return 0;
}
