/* SPDX-License-Identifier: Apache-2.0 */
/* Access to a cuda segment's mapping: the host, then the rank's own device,
 * each in its own cuMemSetAccess call, then every other device that
 * cuDeviceCanAccessPeer says can reach the owner's GPU, one call each. A
 * host with 10 or 16 fully connected GPUs shows every GPU granted on every
 * rank's mapping; pairs without peer access are left out instead of
 * failing the whole grant; a peer whose GPU cannot reach the owner's is
 * told which GPUs, and that memfd + host registration is the way; and a
 * peer that cannot find the owner's GPU (no UUID in the blob) grants only
 * its own device and the host. A peer's host entry names the owner's node. */
#include <string.h>

#include "fakeutil.h"
#include "testutil.h"

#define SZ (4u << 20)

static struct tu_fake fake;

static void pair(struct tu_rank *r, int owner_device, int peer_device)
{
	memset(r, 0, sizeof(*r) * 2);
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "access",
						.size = SZ, .world_size = 2, .rank = i,
						.backend = SSEG_BACKEND_CUDA,
						.device = i ? peer_device : owner_device,
						.timeout_ms = 5000 };
}

static unsigned granted(const struct tu_rank *r)
{
	unsigned devices = 0;

	CHECK(fake.granted(sseg_base(r->seg), &devices, NULL) == 0);
	return devices;
}

static int host_node(const struct tu_rank *r)
{
	unsigned devices = 0;
	int node = -2;

	CHECK(fake.granted(sseg_base(r->seg), &devices, &node) == 0);
	return node;
}

/* The owner's GPU sits on node 1, the peer's on node 0: the peer's host
 * entry names the memory's node, from the owner's blob. */
static void host_node_from_owner(void)
{
	struct tu_rank r[2];

	CHECK(fake.configure("devices=2;peer=all;numa=0,1") == 0);
	pair(r, 1, 0);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK(host_node(&r[0]) == 1 && host_node(&r[1]) == 1);
	tu_destroy_all(r, 2);
	CHECK(fake.configure("numa=0") == 0);
	CHECK(tu_fake_clean(&fake));
}

/* Every device of a fully connected host, on both ranks' mappings, with
 * one call for the host and one per device. */
static void all_granted(int devices)
{
	char config[64];
	struct tu_rank r[2];
	unsigned all = (unsigned)((1ull << devices) - 1);
	long before;

	snprintf(config, sizeof(config), "devices=%d;peer=all", devices);
	CHECK(fake.configure(config) == 0);
	pair(r, 0, devices - 1);
	before = fake.calls("cuMemSetAccess");
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK(fake.calls("cuMemSetAccess") - before == 2 * (1 + devices));
	CHECK(granted(&r[0]) == all && granted(&r[1]) == all);
	((unsigned char *)sseg_base(r[0].seg))[7] = 7;
	CHECK(((unsigned char *)sseg_base(r[1].seg))[7] == 7);
	tu_destroy_all(r, 2);
	CHECK(tu_fake_clean(&fake));
}

/* Pairs 0-1 and 2-3: the owner on 0 grants 0 and 1 only, and so does its
 * peer on 1; a peer on 2 cannot import what belongs to GPU 0. */
static void partial(void)
{
	struct tu_rank r[2];

	CHECK(fake.configure("devices=4;peer=0-1,2-3") == 0);
	pair(r, 0, 1);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK(granted(&r[0]) == 0x3 && granted(&r[1]) == 0x3);
	tu_destroy_all(r, 2);
	CHECK(tu_fake_clean(&fake));

	pair(r, 0, 2);
	CHECK(tu_run_inproc(r, 2) == 2);
	CHECK(strstr(r[1].error, "cuMemImportFromShareableHandle(POSIX fd) failed: "
				 "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED (217)"));
	CHECK(strstr(r[1].error, "device 2 (GPU-"));
	CHECK(strstr(r[1].error, "owner's GPU GPU-"));
	CHECK(strstr(r[1].error, "backend=memfd with SSEG_F_HOST_REGISTER"));
	tu_destroy_all(r, 2);
	CHECK(tu_fake_clean(&fake));
}

/* Without the owner's UUID (a driver before 11.4 has no cuDeviceGetUuid)
 * a peer does not know which GPU the memory belongs to: it grants the
 * host and its own device, which its import proved can reach it. */
static void owner_unknown(void)
{
	struct tu_rank r[2];

	CHECK(fake.configure("devices=4;peer=all") == 0);
	fake.fail("cuDeviceGetUuid", 1, -1, 999);
	pair(r, 0, 1);
	CHECK(tu_run_inproc(r, 2) == 0);
	fake.fail(NULL, 0, 0, 0);
	CHECK(granted(&r[0]) == 0xf && granted(&r[1]) == 0x2);
	tu_destroy_all(r, 2);
	CHECK(tu_fake_clean(&fake));
}

int main(void)
{
	tu_fake_load("devices=16;peer=all", &fake);
	all_granted(10);
	all_granted(16);
	partial();
	owner_unknown();
	host_node_from_owner();
	printf("cuda_access: ok\n");
	return 0;
}
