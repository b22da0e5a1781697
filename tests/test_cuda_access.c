/* SPDX-License-Identifier: Apache-2.0 */
/* Access to a cuda segment's mapping of HOST_NUMA memory: the host, then
 * the rank's own device, each in its own cuMemSetAccess call, then every
 * other device with VMM, one call each. A host with 10 or 16 fully
 * connected GPUs shows every GPU granted on every rank's mapping; a GPU
 * without peer access to the owner's GPU is granted all the same (host
 * memory has no device to be a peer of); a GPU that gets no access (no
 * VMM, or the driver refuses it) is logged with the reason; a peer whose
 * own GPU cannot import what the owner's GPU made is told which GPUs, and
 * that memfd + host registration is the way; a peer that cannot name the
 * owner's GPU (no UUID in the blob) grants every device all the same. A
 * peer's host entry names the owner's node. */
#define _GNU_SOURCE /* memmem */
#include <pthread.h>
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

/* Pairs 0-1 and 2-3: GPUs 2 and 3 have no peer access to the owner's GPU
 * 0, and are granted the host memory on both ranks' mappings all the same;
 * a peer on 2 cannot import what GPU 0 made. */
static void partial(void)
{
	struct tu_rank r[2];

	CHECK(fake.configure("devices=4;peer=0-1,2-3") == 0);
	pair(r, 0, 1);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK(granted(&r[0]) == 0xf && granted(&r[1]) == 0xf);
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
 * a peer does not know which GPU made the memory, and needs not: it
 * grants every device. */
static void owner_unknown(void)
{
	struct tu_rank r[2];

	CHECK(fake.configure("devices=4;peer=all") == 0);
	fake.fail("cuDeviceGetUuid", 1, -1, 999);
	pair(r, 0, 1);
	CHECK(tu_run_inproc(r, 2) == 0);
	fake.fail(NULL, 0, 0, 0);
	CHECK(granted(&r[0]) == 0xf && granted(&r[1]) == 0xf);
	tu_destroy_all(r, 2);
	CHECK(tu_fake_clean(&fake));
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[8192];

static void capture(enum sseg_log_level level, const char *message, void *ctx)
{
	size_t used;

	(void)ctx;
	pthread_mutex_lock(&log_lock);
	used = strlen(log_text);
	snprintf(log_text + used, sizeof(log_text) - used, "%s: %s\n",
		 level == SSEG_LOG_WARN ? "warn" : level == SSEG_LOG_INFO ? "info" : "other",
		 message);
	pthread_mutex_unlock(&log_lock);
}

/* Lines of the captured log that hold both needles. */
static int logged(const char *a, const char *b)
{
	int n = 0;

	for (const char *line = log_text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		const char *hit = memmem(line, len, a, strlen(a));

		n += hit && memmem(line, len, b, strlen(b));
		line += len + (end != NULL);
	}
	return n;
}

/* A device that gets no access is named with the reason, on each rank:
 * GPU 3 without VMM (attribute 102), and GPU 2 refused by the driver. */
static void skipped_logged(void)
{
	struct sseg_info info;
	struct tu_rank r[2];

	CHECK(fake.configure("devices=4;peer=all;novmm=3") == 0);
	log_text[0] = '\0';
	sseg_set_log(capture, NULL);
	sseg_set_log_level(SSEG_LOG_INFO);
	pair(r, 0, 1);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK(granted(&r[0]) == 0x7 && granted(&r[1]) == 0x7);
	CHECK(logged("info: segment 'access': device 3 gets no access", "attribute 102") == 2);
	tu_destroy_all(r, 2);
	CHECK(tu_fake_clean(&fake));

	/* One rank: the host, its device 0, then 1, 2 (the fourth call), 3. */
	CHECK(fake.configure("novmm=none") == 0);
	fake.fail("cuMemSetAccess", 4, 1, 800);
	log_text[0] = '\0';
	pair(r, 0, 1);
	r[0].opts.world_size = 1;
	CHECK(tu_solo(&r[0].opts, &info) == 0);
	fake.fail(NULL, 0, 0, 0);
	CHECK(logged("warn: segment 'access': device 2 gets no access",
		     "CUDA_ERROR_NOT_PERMITTED (800)") == 1);
	CHECK(logged("gets no access", "") == 1);
	sseg_set_log(NULL, NULL);
	sseg_set_log_level(SSEG_LOG_WARN);
	CHECK(tu_fake_clean(&fake));
}

int main(void)
{
	tu_fake_load("devices=16;peer=all", &fake);
	all_granted(10);
	all_granted(16);
	partial();
	owner_unknown();
	skipped_logged();
	host_node_from_owner();
	printf("cuda_access: ok\n");
	return 0;
}
