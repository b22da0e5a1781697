/* SPDX-License-Identifier: Apache-2.0 */
/* A populated segment that memory cannot back is refused before anything is
 * allocated, with the numbers, instead of the owner being OOM-killed while
 * populating: past MemAvailable, past the memory cgroup's room (v1 here;
 * v2 read from a tree built in a temporary directory), and on the
 * first-touch fallback of kernels without MADV_POPULATE_WRITE. */
#include <fcntl.h>
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

/* This process's memory cgroup (v1), and a child group of it. */
static int v1_child_group(char *dir, size_t len)
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
			snprintf(dir, len, "/sys/fs/cgroup/memory%s/sseg-test-%d", path + 8,
				 (int)getpid());
			return 0;
		}
	}
	return -1;
}

/* Joins the group first, then creates. */
static int in_limited_group(void *arg)
{
	const char *dir = arg;
	char path[600];
	sseg_t *seg = NULL;
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "w");
	CHECK(f && fprintf(f, "%d\n", (int)getpid()) > 0 && fclose(f) == 0);
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

/* A real memory cgroup with a 64 MiB limit: a 256 MiB populated segment is
 * refused with the limit and the usage; without the check the owner would
 * be OOM-killed populating it. */
static int cgroup_limit(void)
{
	char dir[512], path[600];
	int status;
	FILE *f;

	if (getuid() != 0 || v1_child_group(dir, sizeof(dir)) || mkdir(dir, 0755)) {
		fprintf(stderr, "memory_limit: no v1 memory cgroup to make a child in (%s)\n",
			strerror(errno));
		return TU_SKIP;
	}
	snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", dir);
	f = fopen(path, "w");
	CHECK(f && fputs("67108864\n", f) >= 0 && fclose(f) == 0);
	status = tu_wait(tu_fork(in_limited_group, dir), 60000);
	CHECK(rmdir(dir) == 0);
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
	if (rc && rc != TU_SKIP)
		return 1;
	printf("memory_limit: ok%s\n", rc == TU_SKIP ? " (cgroup part skipped)" : "");
	return 0;
}
