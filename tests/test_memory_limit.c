/* SPDX-License-Identifier: Apache-2.0 */
/* A populated segment that memory cannot back is refused before anything is
 * allocated, with the numbers, instead of the owner being OOM-killed while
 * populating: past MemAvailable, past the memory cgroup's room (v1 here;
 * v2 read from a tree built in a temporary directory), and on the
 * first-touch fallback of kernels without MADV_POPULATE_WRITE. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault.h"
#include "os/memory.h"
#include "testutil.h"

#define MiB (1ull << 20)

static int solo(uint64_t size, enum sseg_populate populate, sseg_t **seg)
{
	SSEG_OPTS(o, .name = "memlimit", .size = size, .world_size = 1,
		  .pages = SSEG_PAGES_BASE, .populate = populate);
	unsigned char blob[SSEG_BLOB_SIZE];

	return sseg_create(&o, seg, blob);
}

/* The accepted maximum, 2^46 bytes: refused at once, nothing mapped. */
static void past_available(void)
{
	struct tu_maps before = tu_maps();
	sseg_t *seg = NULL;

	CHECK_RC(solo(1ull << 46, SSEG_POPULATE_OWNER, &seg), -ENOMEM);
	CHECK_ERR_HAS("more than the");
	CHECK_ERR_HAS("available on this host (MemAvailable)");
	CHECK(!seg);
	CHECK(tu_maps_same(before, tu_maps()));
	/* Spread and background populate the whole segment too; lazy is the
	 * caller's risk. */
	CHECK_RC(solo(1ull << 46, SSEG_POPULATE_SPREAD, &seg), -ENOMEM);
	CHECK(!seg);
	CHECK_RC(solo(1ull << 46, SSEG_POPULATE_BACKGROUND, &seg), -ENOMEM);
	CHECK_RC(solo(1ull << 46, SSEG_POPULATE_LAZY, &seg), 0);
	CHECK_RC(sseg_destroy(seg), 0);
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* cgroup v2 (and v1) as the kernel shows them, in a temporary tree: the
 * tightest limit over the cgroup's ancestors counts. */
static void parsed_trees(void)
{
	char root[] = "/tmp/sseg-cgroup-XXXXXX", dir[512], cmd[600];
	struct sseg_os_memory m;

	CHECK(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/unified/pod/ctr", root);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s %s/memory/a/b", dir, root);
	CHECK(system(cmd) == 0);
	write_file(root, "meminfo", "MemTotal: 100 kB\nMemAvailable:    2048 kB\n");
	write_file(root, "cgroup", "4:memory:/a/b\n0::/pod/ctr\n");
	write_file(dir, "memory.max", "max\n");
	write_file(dir, "memory.current", "5\n");
	snprintf(dir, sizeof(dir), "%s/unified/pod", root);
	write_file(dir, "memory.max", "1048576\n");
	write_file(dir, "memory.current", "4096\n");
	snprintf(dir, sizeof(dir), "%s/memory/a", root);
	write_file(dir, "memory.limit_in_bytes", "9223372036854771712\n");
	snprintf(dir, sizeof(dir), "%s/cgroup", root);
	snprintf(cmd, sizeof(cmd), "%s/meminfo", root);
	CHECK_RC(sseg_os_memory_at(dir, root, cmd, &m), 0);
	CHECK(m.available == 2048 * 1024);
	CHECK(m.cgroup_limit == 1048576 && m.cgroup_usage == 4096);
	CHECK(strstr(m.cgroup, "/unified/pod") && !strstr(m.cgroup, "ctr"));
	/* v1's no-limit value is no limit; a tighter v1 limit wins. */
	snprintf(dir, sizeof(dir), "%s/memory/a/b", root);
	write_file(dir, "memory.limit_in_bytes", "65536\n");
	write_file(dir, "memory.usage_in_bytes", "100\n");
	snprintf(dir, sizeof(dir), "%s/cgroup", root);
	CHECK_RC(sseg_os_memory_at(dir, root, cmd, &m), 0);
	CHECK(m.cgroup_limit == 65536 && m.cgroup_usage == 100);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	CHECK(system(cmd) == 0);
}

/* This process's memory cgroup (v1), and a child group of it named tag. */
static int v1_child_group(const char *tag, char *dir, size_t len)
{
	char text[4096], *line;
	FILE *f = fopen("/proc/self/cgroup", "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		char *path = strstr(line, ":memory:");

		if (path) {
			snprintf(dir, len, "/sys/fs/cgroup/memory%s/sseg-test-%d-%s", path + 8,
				 (int)getpid(), tag);
			return 0;
		}
	}
	return -1;
}

/* A child memory cgroup limited to limit bytes, in dir; TU_SKIP when this
 * machine has none to make. */
static int limited_group(const char *tag, uint64_t limit, char *dir, size_t len)
{
	char text[32];

	if (getuid() != 0 || v1_child_group(tag, dir, len) || mkdir(dir, 0755)) {
		fprintf(stderr, "memory_limit: no v1 memory cgroup to make a child in (%s)\n",
			strerror(errno));
		return TU_SKIP;
	}
	snprintf(text, sizeof(text), "%llu\n", (unsigned long long)limit);
	write_file(dir, "memory.limit_in_bytes", text);
	return 0;
}

struct in_group {
	const char *dir;
	int (*fn)(void *arg);
	void *arg;
};

static int join_then_run(void *arg)
{
	const struct in_group *g = arg;

	write_file(g->dir, "cgroup.procs", "0\n"); /* 0: the writer itself */
	return g->fn(g->arg);
}

/* fn(arg) in a child that joined a new cgroup of limit bytes: its status. */
static int in_group_of(const char *tag, uint64_t limit, int (*fn)(void *arg), void *arg)
{
	char dir[512];
	struct in_group g = { dir, fn, arg };
	int status = limited_group(tag, limit, dir, sizeof(dir));

	if (status)
		return status;
	status = tu_wait(tu_fork(join_then_run, &g), 60000);
	CHECK(rmdir(dir) == 0);
	return status;
}

static int refused_in_group(void *arg)
{
	sseg_t *seg = NULL;

	(void)arg;
	CHECK_RC(solo(256 * MiB, SSEG_POPULATE_OWNER, &seg), -ENOMEM);
	CHECK_ERR_HAS("more than this process's memory cgroup allows: limit 64 MiB");
	CHECK(!seg);
	/* Background population is checked up front the same way. */
	CHECK_RC(solo(256 * MiB, SSEG_POPULATE_BACKGROUND, &seg), -ENOMEM);
	CHECK_ERR_HAS("more than this process's memory cgroup allows: limit 64 MiB");
	CHECK(!seg);
	/* What fits is created and populated. */
	CHECK_RC(solo(16 * MiB, SSEG_POPULATE_OWNER, &seg), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
}

/* ---- holding the owner's background work at its first populate ---- */

static int held_up[2], held_go[2], populate_calls;

static void hold_first_populate(const char *site)
{
	char c = 'h';

	if (strcmp(site, "populate") || ++populate_calls != 1)
		return;
	CHECK(write(held_up[1], &c, 1) == 1 && read(held_go[0], &c, 1) == 1);
}

static int copy_gather(const void *mine, void *all, size_t len, void *ctx);

/* Memory taken between create and complete: create's check passed, the
 * work's first step is refused with -ENOMEM (the kernel would OOM-kill
 * the owner populating it, in MADV_POPULATE_WRITE). */
static int background_step_refused(void *arg)
{
	SSEG_OPTS(o, .name = "memlimit-bg", .size = 96 * MiB, .world_size = 1,
		  .pages = SSEG_PAGES_BASE, .populate = SSEG_POPULATE_BACKGROUND,
		  .populate_threads = 1);
	unsigned char blob[SSEG_BLOB_SIZE];
	uint64_t resident = 1;
	sseg_t *seg = NULL;
	char *hog;

	(void)arg;
	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	hog = malloc(64 * MiB);
	CHECK(hog);
	memset(hog, 1, 64 * MiB);
	CHECK_RC(sseg_complete(seg, blob), 0);
	CHECK_RC(sseg_populate_wait(seg, 60000), -ENOMEM);
	CHECK_ERR_HAS("the background population's next step (67108864 bytes at offset 0) needs "
		      "64 MiB, more than this process's memory cgroup allows: limit 128 MiB");
	CHECK_RC(sseg_populate_progress(seg, &resident, NULL), 0);
	CHECK(resident == 0);
	free(hog);
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
}

/* A peer in a tighter cgroup than the owner's: it would be charged for
 * every page it touches before the owner's work, so its create refuses,
 * and the owner's complete names it. */
static int tight_peer(void *arg)
{
	SSEG_OPTS(o, .name = arg, .size = 128 * MiB, .world_size = 2, .rank = 1,
		  .pages = SSEG_PAGES_BASE, .populate = SSEG_POPULATE_BACKGROUND);
	struct sseg_local_group *g;
	unsigned char *p;
	sseg_t *seg = NULL;
	int rc;

	CHECK_RC(sseg_local_group_open(arg, 1, 2, 30000, &g), 0);
	rc = sseg_open(&o, sseg_local_allgather, g, &seg);
	if (!rc) { /* what an engine does next: writes, charged here */
		p = sseg_base(seg);
		for (uint64_t off = 0; off < 128 * MiB; off += 4096)
			p[off] = 1;
	}
	CHECK_RC(rc, -ENOMEM);
	CHECK_ERR_HAS("rank 1, whose first touch of a page not yet populated is charged to it "
		      "(populate=background; populate=owner charges the owner), needs 128 MiB, "
		      "more than this process's memory cgroup allows: limit 64 MiB");
	sseg_local_group_close(g);
	return 0;
}

static int peer_in_tight_group(void)
{
	char dir[512], name[64];
	struct in_group in = { dir, tight_peer, name };
	SSEG_OPTS(o, .name = name, .size = 128 * MiB, .world_size = 2, .rank = 0,
		  .pages = SSEG_PAGES_BASE, .populate = SSEG_POPULATE_BACKGROUND);
	struct sseg_local_group *g;
	sseg_t *seg = NULL;
	int status, rc;
	pid_t peer;

	tu_name(name, sizeof(name), "memlimit-peer");
	status = limited_group("peer", 64 * MiB, dir, sizeof(dir));
	if (status)
		return status;
	peer = tu_fork(join_then_run, &in);
	/* Held, so that the peer, if it maps, touches first. */
	CHECK(pipe(held_up) == 0 && pipe(held_go) == 0);
	populate_calls = 0;
	sseg_test_fault_hook(hold_first_populate);
	CHECK_RC(sseg_local_group_open(name, 0, 2, 30000, &g), 0);
	rc = sseg_open(&o, sseg_local_allgather, g, &seg);
	status = tu_wait(peer, 60000);
	if (!rc) {
		char c = 'g';

		CHECK(read(held_up[0], &c, 1) == 1 && write(held_go[1], &c, 1) == 1);
		CHECK_RC(sseg_destroy(seg), 0);
	}
	sseg_test_fault_hook(NULL);
	CHECK_RC(rc, -ENOMEM);
	CHECK_ERR_HAS("rank 1, whose first touch");
	sseg_local_group_close(g);
	CHECK(rmdir(dir) == 0);
	return status;
}

/* Real memory cgroups: a populated segment past the limit is refused with
 * the limit and the usage (without the check the owner would be
 * OOM-killed populating it); background population checks again before
 * each step, and a peer that may be charged checks its own limit. */
static int cgroup_limit(void)
{
	int status = in_group_of("refused", 64 * MiB, refused_in_group, NULL);

	if (!status)
		status = in_group_of("step", 128 * MiB, background_step_refused, NULL);
	if (!status)
		status = peer_in_tight_group();
	return status;
}

static int copy_gather(const void *mine, void *all, size_t len, void *ctx)
{
	(void)ctx;
	memcpy(all, mine, len);
	return 0;
}

/* A kernel without MADV_POPULATE_WRITE: the owner allocates the memfd's
 * pages before touching them, so running out is an error, not a kill. */
static void touch_fallback(void)
{
	SSEG_OPTS(o, .name = "memlimit-touch", .size = 32 * MiB, .world_size = 1,
		  .pages = SSEG_PAGES_BASE);
	sseg_t *seg = NULL;
	const uint8_t *p;

	sseg_test_fault("madv_populate", 0, -1, -EINVAL);
	CHECK_RC(sseg_open(&o, copy_gather, NULL, &seg), 0);
	p = sseg_base(seg);
	for (uint64_t off = 0; off < 32 * MiB; off += 4096)
		CHECK(p[off] == 0);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_test_fault("fallocate", 0, 1, -ENOSPC);
	CHECK_RC(solo(32 * MiB, SSEG_POPULATE_OWNER, &seg), -ENOMEM);
	CHECK_ERR_HAS("allocating the memfd's 33554432 bytes failed: out of memory");
	CHECK(!seg);
	sseg_test_fault(NULL, 0, 0, 0);
}

int main(void)
{
	int rc;

	past_available();
	touch_fallback();
	parsed_trees();
	rc = cgroup_limit();
	if (rc && rc != TU_SKIP) {
		fprintf(stderr, "memory_limit: a cgroup case ended with status %d%s\n", rc,
			rc == 128 + SIGKILL ? " (killed: the OOM killer's signal)" : "");
		return 1;
	}
	printf("memory_limit: ok%s\n", rc == TU_SKIP ? " (cgroup part skipped)" : "");
	return 0;
}
