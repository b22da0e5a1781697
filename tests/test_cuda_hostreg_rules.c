/* SPDX-License-Identifier: Apache-2.0 */
/* What host registration checks before and after it pins, through the
 * fake driver:
 * - attribute 99 (HOST_REGISTER_SUPPORTED) 0: refused before any call;
 * - read-only peers: READ_ONLY with attribute 113; without it, a plain
 *   registration where the device reads through the host's page tables
 *   (attribute 100), else refused with the way out (a read-write
 *   registration of their read-only mapping would fail too);
 * - every chunk's device pointer: a driver that maps each registration on
 *   its own (attribute 91 is 0) leaves no single device view;
 * - destroy waits for the device's queued work (cuCtxSynchronize on the
 *   primary context) before unregistering, and resumes when that fails. */
#include <string.h>

#include "fakeutil.h"
#include "testutil.h"

#define MIB (1ull << 20)
#define READ_ONLY 0x08u

static struct tu_fake fake;

static void ranks(struct tu_rank *r, int n, uint32_t flags, uint64_t chunk)
{
	memset(r, 0, sizeof(*r) * (size_t)n);
	for (int i = 0; i < n; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "rules",
						.size = 8 * MIB, .world_size = n, .rank = i,
						.pages = SSEG_PAGES_BASE,
						.flags = SSEG_F_HOST_REGISTER | flags,
						.register_chunk = chunk, .timeout_ms = 5000 };
}

/* The flags of the registration at p. */
static unsigned flags_at(const void *p)
{
	size_t bytes;
	unsigned flags;
	void *at;

	for (int k = 0; fake.registration(k, &at, &bytes, &flags) == 0; k++)
		if (at == p)
			return flags;
	CHECK(!"no registration there");
	return 0;
}

static void attribute_99(void)
{
	struct tu_rank r[1];
	long before = fake.calls("cuMemHostRegister");

	CHECK(fake.configure("host_register=0") == 0);
	ranks(r, 1, 0, 0);
	CHECK(tu_run_inproc(r, 1) == 1 && r[0].complete_rc == -EOPNOTSUPP);
	CHECK(strstr(r[0].error, "device 0 cannot register host memory (attribute 99 is 0)"));
	CHECK(fake.calls("cuMemHostRegister") == before);
	tu_destroy_all(r, 1);
	CHECK(fake.configure("host_register=1") == 0);
	CHECK(tu_fake_clean(&fake));
}

/* config for the device; the peer's flags, or 0 when it must be refused. */
static void readonly_peer(const char *config, unsigned peer_flags)
{
	struct tu_rank r[2];

	CHECK(fake.configure(config) == 0);
	ranks(r, 2, SSEG_F_READONLY_PEERS, 0);
	if (!peer_flags) {
		CHECK(tu_run_inproc(r, 2) >= 1 && r[1].complete_rc == -EOPNOTSUPP);
		CHECK(strstr(r[1].error, "read-only peers need read-only registration"));
		CHECK(strstr(r[1].error, "attribute 113") && strstr(r[1].error, "(100)"));
		CHECK(strstr(r[1].error, "use read-write peers, or backend=cuda"));
	} else {
		CHECK(tu_run_inproc(r, 2) == 0);
		CHECK(flags_at(sseg_base(r[0].seg)) == 3);
		CHECK(flags_at(sseg_base(r[1].seg)) == peer_flags);
	}
	tu_destroy_all(r, 2);
	CHECK(tu_fake_clean(&fake));
}

/* Two chunks the device sees apart: the segment has no device address. */
static void device_view(void)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[1];

	CHECK(fake.configure("host_pointer=0") == 0);
	ranks(r, 1, 0, 4 * MIB);
	CHECK(tu_run_inproc(r, 1) == 1);
	CHECK(strstr(r[0].error, "chunk 2 maps to device address"));
	CHECK(strstr(r[0].error, "no single device view"));
	tu_destroy_all(r, 1);
	CHECK(tu_fake_clean(&fake));
	/* One chunk: its device address, which is not the host's here. */
	ranks(r, 1, 0, 0);
	CHECK(tu_run_inproc(r, 1) == 0);
	CHECK_RC(sseg_info(r[0].seg, &info), 0);
	CHECK(info.device_addr && info.device_addr != (uint64_t)(uintptr_t)info.base);
	tu_destroy_all(r, 1);
	CHECK(fake.configure("host_pointer=1") == 0);
	CHECK(tu_fake_clean(&fake));
}

static void quiesce(void)
{
	struct tu_rank r[1];
	long before;

	ranks(r, 1, 0, 4 * MIB);
	CHECK(tu_run_inproc(r, 1) == 0);
	before = fake.calls("cuCtxSynchronize");
	fake.fail("cuCtxSynchronize", 1, 1, 999);
	CHECK_RC(sseg_destroy(r[0].seg), -EIO);
	CHECK_ERR_HAS("cuCtxSynchronize failed: CUDA_ERROR_UNKNOWN");
	CHECK(fake.live_registrations() == 2); /* nothing unregistered under the copy */
	CHECK_RC(sseg_destroy(r[0].seg), 0);
	CHECK(fake.calls("cuCtxSynchronize") - before == 2);
	CHECK(tu_fake_clean(&fake));
}

int main(void)
{
	tu_fake_load("devices=1;numa=0", &fake);
	attribute_99();
	readonly_peer("ro_register=1;pageable_host_pt=0", 3 | READ_ONLY);
	readonly_peer("ro_register=0;pageable_host_pt=1", 3);
	readonly_peer("ro_register=0;pageable_host_pt=0", 0);
	device_view();
	quiesce();
	printf("cuda_hostreg_rules: ok\n");
	return 0;
}
