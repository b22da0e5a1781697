/* SPDX-License-Identifier: Apache-2.0 */
/* What can back new memory. The host's MemAvailable, and the memory cgroup
 * this process is charged to: a container's limit is often far below the
 * host's memory, and faulting past it gets the process OOM-killed instead
 * of an error. Both cgroup versions are read; in v1 only the "memory"
 * controller's hierarchy counts. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "os/file.h"
#include "os/hugetlb_use.h"
#include "os/memory.h"

/* Limits at or above this mean "none" (v1 writes 2^63 rounded down to a page). */
#define NO_LIMIT (1ull << 62)

int sseg_os_meminfo_keys(const char *path, const struct sseg_os_meminfo_key *keys, int n)
{
	unsigned long long v;
	char line[256], key[64], unit[4] = "";
	int found = 0;
	FILE *f = fopen(path, "re");

	if (!f)
		return sseg_err(-errno, "cannot open %s: %s", path, strerror(errno));
	for (int i = 0; i < n; i++)
		*keys[i].value = UINT64_MAX;
	while (found < n && fgets(line, sizeof(line), f)) {
		unit[0] = '\0';
		if (sscanf(line, "%63[^:]: %llu %3s", key, &v, unit) < 2)
			continue;
		for (int i = 0; i < n; i++)
			if (*keys[i].value == UINT64_MAX && !strcmp(key, keys[i].key)) {
				*keys[i].value = strcmp(unit, "kB") ? (uint64_t)v : (uint64_t)v << 10;
				found++;
			}
	}
	fclose(f);
	for (int i = 0; i < n; i++)
		if (*keys[i].value == UINT64_MAX) {
			*keys[i].value = 0;
			return sseg_err(-ENOENT, "%s has no %s line", path, keys[i].key);
		}
	return 0;
}

/* "max" (v2) or a number; 0 for no limit. */
static uint64_t read_limit(const char *path)
{
	char text[64], *end;
	unsigned long long v;

	if (sseg_os_read_text(path, text, sizeof(text)))
		return 0;
	if (!strcmp(text, "max"))
		return 0;
	v = strtoull(text, &end, 10);
	return end == text || v >= NO_LIMIT ? 0 : v;
}

/* Walks from the cgroup up to the root of its tree: the tightest limit. */
static void tightest(const char *root, const char *rel, const char *limit_file,
		     const char *usage_file, struct sseg_os_memory *m)
{
	char dir[PATH_MAX], path[PATH_MAX + 32];

	snprintf(dir, sizeof(dir), "%s%s", root, rel);
	for (;;) {
		uint64_t limit;
		char *slash;

		snprintf(path, sizeof(path), "%s/%s", dir, limit_file);
		limit = read_limit(path);
		if (limit && (!m->cgroup_limit || limit < m->cgroup_limit)) {
			m->cgroup_limit = limit;
			snprintf(path, sizeof(path), "%s/%s", dir, usage_file);
			if (sseg_os_read_u64(path, &m->cgroup_usage))
				m->cgroup_usage = 0;
			snprintf(m->cgroup, sizeof(m->cgroup), "%s", dir);
		}
		if (strlen(dir) <= strlen(root))
			break;
		slash = strrchr(dir, '/');
		if (!slash || slash < dir + strlen(root))
			break;
		*slash = '\0';
	}
}

/* Each line of /proc/self/cgroup: "ID:CONTROLLERS:PATH". v2 is "0::PATH". */
static void cgroup_limits(const char *proc_cgroup, const char *root, struct sseg_os_memory *m)
{
	char base[PATH_MAX];
	const char *line = proc_cgroup;

	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		char entry[PATH_MAX], *ctrl, *rel;

		snprintf(entry, sizeof(entry), "%.*s", (int)n, line);
		line = nl ? nl + 1 : NULL;
		ctrl = strchr(entry, ':');
		rel = ctrl ? strchr(ctrl + 1, ':') : NULL;
		if (!rel)
			continue;
		*rel++ = '\0';
		ctrl++;
		if (!strcmp(ctrl, "")) {
			snprintf(base, sizeof(base), "%s/unified", root);
			tightest(base, rel, "memory.max", "memory.current", m);
			tightest(root, rel, "memory.max", "memory.current", m);
		} else if (strstr(ctrl, "memory")) {
			snprintf(base, sizeof(base), "%s/memory", root);
			tightest(base, rel, "memory.limit_in_bytes", "memory.usage_in_bytes", m);
		}
	}
}

int sseg_os_memory_at(const char *proc_cgroup, const char *root, const char *meminfo,
		      struct sseg_os_memory *m)
{
	char text[4096];
	int rc;

	memset(m, 0, sizeof(*m));
	rc = sseg_os_meminfo_keys(meminfo,
				  &(struct sseg_os_meminfo_key){ "MemAvailable", &m->available }, 1);
	if (rc)
		return rc;
	if (!sseg_os_read_text(proc_cgroup, text, sizeof(text)))
		cgroup_limits(text, root, m);
	sseg_err_clear();
	return 0;
}

int sseg_os_memory(struct sseg_os_memory *m)
{
	return sseg_os_memory_at("/proc/self/cgroup", "/sys/fs/cgroup", "/proc/meminfo", m);
}

int sseg_os_meminfo(uint64_t *shmem, uint64_t *hugetlb)
{
	int rc = sseg_os_meminfo_keys("/proc/meminfo",
				      &(struct sseg_os_meminfo_key){ "Shmem", shmem }, 1);

	if (rc)
		return rc;
	rc = sseg_os_hugetlb_in_use(SSEG_OS_HUGETLB_DIR, hugetlb);
	if (rc)
		return sseg_err(rc, "cannot read the HugeTLB pools in " SSEG_OS_HUGETLB_DIR ": %s",
				strerror(-rc));
	return 0;
}
