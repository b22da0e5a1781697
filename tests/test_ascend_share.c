/* SPDX-License-Identifier: Apache-2.0 */
/* Four processes share an ascend-backend segment through the fake ACL
 * runtime: by fabric handle (A3), by the in-server handle whose trust list
 * the owner extends with each local peer's pid before that peer imports,
 * across two (simulated) hosts where only a fabric handle may go, and from
 * a container's PID namespace, where the runtime names processes by the
 * host's pids: each peer's blob carries its own, which the owner puts on
 * the trust list. */
#include <string.h>
#include <unistd.h>

#include "aclutil.h"
#include "blob.h"
#include "host_identity.h"
#include "testutil.h"

#define RANKS 4
#define SZ (8u << 20)

struct scenario {
	const char *label;
	const char *config;
	const char *hosts[RANKS];  /* simulated hosts; NULL: this one */
	const char *handle_type;   /* what every rank must report */
	const char *error;         /* or what the failing ranks must say */
	int no_fabric_env;         /* SHAREDSEG_ASCEND_FABRIC=0 */
	int tgid_offset;           /* the runtime's pid is getpid() plus this */
};

struct job {
	const struct scenario *sc;
	char name[64];
	int rank;
};

static struct sseg_local_group *group;

static void allgather(const void *mine, void *all, size_t len)
{
	CHECK_RC(sseg_local_allgather(mine, all, len, group), 0);
}

static void barrier(void)
{
	char mine = 1, all[RANKS];

	allgather(&mine, all, 1);
}

/* The owner's trust list names each local peer, by the pid the runtime
 * knows it by. */
static void check_trust_list(const struct ta_fake *fake, const unsigned char *blobs,
			     const int32_t *pids, int offset)
{
	int32_t seen[RANKS];
	struct sseg_blob owner;
	int n, found = 0;

	CHECK_RC(sseg_blob_decode(blobs, 0, &owner), 0);
	n = fake->trusted(sseg_get64(owner.handle.data), seen, RANKS);
	CHECK(n == RANKS - 1);
	for (int i = 0; i < n; i++)
		for (int r = 1; r < RANKS; r++)
			found += seen[i] == pids[r] + offset;
	CHECK(found == RANKS - 1);
}

static void check_data(sseg_t *seg, int rank)
{
	unsigned char *p = sseg_base(seg);
	struct sseg_lookup_result res;

	if (rank == 0)
		for (unsigned i = 0; i < SZ; i += 512)
			p[i] = tu_pattern(0, i);
	barrier();
	for (unsigned i = 0; i < SZ; i += 512)
		CHECK(p[i] == tu_pattern(0, i));
	p[rank * 4096 + 1] = (unsigned char)(0x40 + rank);
	barrier();
	for (int r = 0; r < RANKS; r++)
		CHECK(p[r * 4096 + 1] == 0x40 + r);
	/* The registry covers these segments: exact ranges and pins. */
	CHECK_RC(sseg_lookup(p, SZ - 12345, &res), 0);
	CHECK(res.seg == seg && res.block == -1);
	CHECK_RC(sseg_pin(seg), 0);
	CHECK_RC(sseg_destroy(seg), -EBUSY);
	CHECK_RC(sseg_unpin(seg), 0);
}

static void check_shared(const struct job *j, const struct ta_fake *fake, sseg_t *seg,
			 const unsigned char *blobs, const int32_t *pids)
{
	struct sseg_info info = { .sz = sizeof(info) };

	CHECK_RC(sseg_info(seg, &info), 0);
	CHECK(info.backend == SSEG_BACKEND_ASCEND && info.pinned);
	CHECK(!strcmp(info.handle_type, j->sc->handle_type));
	CHECK(info.mapped_size == SZ && info.page_size == (2u << 20));
	CHECK(info.device_addr == (uint64_t)(uintptr_t)info.base);
	check_data(seg, j->rank);
	if (j->rank == 0 && !strcmp(j->sc->handle_type, "acl-trustlist"))
		check_trust_list(fake, blobs, pids, j->sc->tgid_offset);
}

static int rank_main(void *arg)
{
	const struct job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = SZ - 12345, .world_size = RANKS, .rank = j->rank,
		  .backend = SSEG_BACKEND_ASCEND, .device = j->rank % 2, .timeout_ms = 10000);
	unsigned char blob[SSEG_BLOB_SIZE], blobs[RANKS * SSEG_BLOB_SIZE];
	int32_t pid = (int32_t)getpid(), pids[RANKS];
	int rc, rcs[RANKS], failed = 0;
	struct ta_fake fake;
	sseg_t *seg = NULL;

	if (j->sc->no_fabric_env)
		setenv("SHAREDSEG_ASCEND_FABRIC", "0", 1);
	ta_fake_load(j->sc->config, &fake);
	sseg_test_host(j->sc->hosts[j->rank]);
	CHECK_RC(sseg_local_group_open(j->name, j->rank, RANKS, 10000, &group), 0);
	allgather(&pid, pids, sizeof(pid));
	rc = sseg_create(&o, &seg, blob);
	allgather(blob, blobs, SSEG_BLOB_SIZE);
	if (!rc)
		rc = sseg_complete(seg, blobs);
	if (rc && j->sc->error && !strstr(sseg_last_error(), j->sc->error) &&
	    !strstr(sseg_last_error(), "rank 0"))
		CHECK(!"the failure names neither the cause nor the owner");
	allgather(&rc, rcs, sizeof(rc));
	for (int r = 0; r < RANKS; r++)
		failed += rcs[r] != 0;
	CHECK(j->sc->error ? failed > 0 : failed == 0);
	if (!failed)
		check_shared(j, &fake, seg, blobs, pids);
	barrier();
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(group);
	CHECK(ta_fake_clean(&fake));
	if (!failed)
		/* Its own, the backend probe's (every rank) and the owner's
		 * fabric probe's. */
		CHECK(fake.calls("aclrtFreePhysical") ==
		      (j->rank == 0 && !j->sc->no_fabric_env ? 3 : 2));
	return 0;
}

static void run(const struct scenario *sc)
{
	struct job jobs[RANKS];
	pid_t pids[RANKS];
	char name[64];

	tu_name(name, sizeof(name), "ascend");
	for (int r = 0; r < RANKS; r++) {
		jobs[r] = (struct job){ .sc = sc, .rank = r };
		snprintf(jobs[r].name, sizeof(jobs[r].name), "%s", name);
		pids[r] = tu_fork(rank_main, &jobs[r]);
	}
	for (int r = 0; r < RANKS; r++) {
		int st = tu_wait(pids[r], 30000);

		if (st) {
			fprintf(stderr, "%s: rank %d exited with %d\n", sc->label, r, st);
			exit(1);
		}
	}
	fprintf(stderr, "%s: ok\n", sc->label);
}

int main(void)
{
	static const struct scenario scenarios[] = {
		{ .label = "fabric", .config = "devices=2;fabric=1", .handle_type = "acl-fabric" },
		{ .label = "trust list", .config = "devices=2;fabric=0",
		  .handle_type = "acl-trustlist" },
		{ .label = "trust list by choice", .config = "devices=2;fabric=1",
		  .handle_type = "acl-trustlist", .no_fabric_env = 1 },
		{ .label = "fabric across hosts", .config = "devices=2;fabric=1",
		  .hosts = { "host-a", "host-a", "host-b", "host-b" }, .handle_type = "acl-fabric" },
		{ .label = "in-server handle across hosts", .config = "devices=2;fabric=0",
		  .hosts = { "host-a", "host-a", "host-b", "host-b" },
		  .error = "only a fabric handle crosses hosts" },
		{ .label = "container, trust list", .config = "devices=2;fabric=0;bare_tgid_offset=1000",
		  .handle_type = "acl-trustlist", .tgid_offset = 1000 },
		{ .label = "container, fabric", .config = "devices=2;fabric=1;bare_tgid_offset=1000",
		  .handle_type = "acl-fabric" },
	};

	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		run(&scenarios[i]);
	printf("ascend_share: ok\n");
	return 0;
}
