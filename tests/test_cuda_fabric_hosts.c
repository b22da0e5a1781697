/* SPDX-License-Identifier: Apache-2.0 */
/* One NVLink domain over two (simulated) hosts: a CUDA fabric handle lets
 * ranks on host B map host A's owner's allocation, while host A's own peer
 * still collects the POSIX fd over the fd channel (fabric is for other
 * hosts only). The fabric probe runs under a context: asking the probe
 * first (as `sharedseg probe` does, with no context current) must not
 * teach the library that fabric fails. An fd-handle segment refuses the
 * same group: an fd never leaves its host. And a host B whose processes do
 * not share the owner's IMEX channel gets an error that says so. */
#include <string.h>
#include <unistd.h>

#include "fakeutil.h"
#include "host_identity.h"
#include "testutil.h"

#define SZ (4u << 20)

static const char *const hosts[] = { "host-a", "host-a", "host-b", "host-b" };
static const char *const seen_as[] = { "cuda-fabric", "cuda-fd", "cuda-fabric", "cuda-fabric" };

static struct sseg_opts opts(const char *name, int rank, int device)
{
	return (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = name, .size = SZ,
				   .world_size = 4, .rank = rank, .backend = SSEG_BACKEND_CUDA,
				   .device = device, .timeout_ms = 5000 };
}

static void ranks(struct tu_rank *r, int device)
{
	memset(r, 0, sizeof(*r) * 4);
	for (int i = 0; i < 4; i++) {
		r[i].opts = opts("fabric", i, device);
		r[i].host = hosts[i];
	}
}

/* The probe first, from a thread with no context: fabric works. */
static void probe_first(void)
{
	struct sseg_probe_device dev = { .sz = sizeof(dev) };

	CHECK_RC(sseg_probe_device(SSEG_BACKEND_CUDA, 0, &dev), 0);
	CHECK(dev.fabric_claimed == 1 && dev.fabric_works == 1 && dev.host_vmm_works == 1);
}

static void in_process(struct tu_fake *fake)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_rank r[4];
	unsigned char *p[4];

	ranks(r, 0);
	CHECK(tu_run_inproc(r, 4) == 0);
	for (int i = 0; i < 4; i++) {
		p[i] = sseg_base(r[i].seg);
		CHECK_RC(sseg_info(r[i].seg, &info), 0);
		CHECK(!strcmp(info.handle_type, seen_as[i]) && info.owner_rank == 0);
	}
	p[3][100] = 0x33;
	CHECK(p[0][100] == 0x33 && p[1][100] == 0x33 && p[2][100] == 0x33);
	tu_destroy_all(r, 4);
	CHECK(tu_fake_clean(fake));

	/* Device 1 is probed after fabric stopped working: fd handles, which
	 * cannot reach host B. */
	CHECK(fake->configure("fabric_works=0") == 0);
	ranks(r, 1);
	CHECK(tu_run_inproc(r, 4) == 4);
	CHECK(strstr(r[2].error, "only a fabric handle crosses hosts"));
	tu_destroy_all(r, 4);
	CHECK(tu_fake_clean(fake));
}

/* ---- processes: host B does not share the owner's IMEX channel ---- */

struct job {
	char name[64];
	int rank;
};

static int rank_main(void *arg)
{
	struct job *j = arg;
	struct sseg_opts o = opts(j->name, j->rank, 0);
	struct sseg_local_group *g;
	struct tu_fake fake;
	sseg_t *seg = NULL;
	int rc;

	tu_fake_load("devices=2;numa=0,0;fabric=1;imex=0", &fake);
	sseg_test_host(hosts[j->rank]);
	CHECK_RC(sseg_local_group_open(j->name, j->rank, 4, 10000, &g), 0);
	rc = sseg_open(&o, sseg_local_allgather, g, &seg);
	if (j->rank >= 2) {
		CHECK(rc < 0);
		CHECK_ERR_HAS("cuMemImportFromShareableHandle(fabric) failed: "
			      "CUDA_ERROR_NOT_PERMITTED");
		CHECK_ERR_HAS("IMEX channel");
	} else {
		CHECK(rc < 0); /* every rank learns that host B failed */
	}
	sseg_destroy(seg);
	sseg_local_group_close(g);
	CHECK(tu_fake_clean(&fake));
	return 0;
}

static void no_shared_channel(void)
{
	struct job jobs[4];
	pid_t pids[4];
	char name[64];

	tu_name(name, sizeof(name), "imex");
	for (int r = 0; r < 4; r++) {
		jobs[r] = (struct job){ .rank = r };
		snprintf(jobs[r].name, sizeof(jobs[r].name), "%s", name);
		pids[r] = tu_fork(rank_main, &jobs[r]);
	}
	for (int r = 0; r < 4; r++)
		CHECK(tu_wait(pids[r], 30000) == 0);
}

int main(void)
{
	struct tu_fake fake;

	no_shared_channel(); /* forked before this process loads the driver */
	tu_fake_load("devices=2;numa=0,0;fabric=1;fabric_works=1", &fake);
	probe_first();
	in_process(&fake);
	printf("cuda_fabric_hosts: ok\n");
	return 0;
}
