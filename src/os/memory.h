/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: what can back new memory (memory.c): MemAvailable and the
 * memory cgroup's limit, v1 (memory.limit_in_bytes) or v2 (memory.max),
 * the tightest over the cgroup's ancestors. */
#ifndef SSEG_OS_MEMORY_H
#define SSEG_OS_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

struct sseg_os_memory {
	uint64_t available;     /* MemAvailable */
	uint64_t cgroup_limit;  /* 0: no limit below the host's memory */
	uint64_t cgroup_usage;  /* of the cgroup whose limit is the tightest */
	char cgroup[160];       /* that cgroup's directory; "" without a limit */
};

SSEG_HIDDEN int sseg_os_memory(struct sseg_os_memory *m);
/* The same, reading /proc/self/cgroup's text and the cgroup trees under
 * root (normally /sys/fs/cgroup); meminfo is a /proc/meminfo path. */
SSEG_HIDDEN int sseg_os_memory_at(const char *proc_cgroup, const char *root,
				  const char *meminfo, struct sseg_os_memory *m);

/* One /proc/meminfo key ("Shmem", without the colon) and where its value
 * goes: bytes for a line in kB, else the number as it is (HugePages_Free). */
struct sseg_os_meminfo_key {
	const char *key;
	uint64_t *value;
};

/* The one reader of /proc/meminfo (the library's checks, the demo's and
 * the bench's figures): path (normally /proc/meminfo) read once, each
 * key's value into its place. -ENOENT, with a sentence naming the first
 * key the file lacks (its place 0). */
SSEG_HIDDEN int sseg_os_meminfo_keys(const char *path, const struct sseg_os_meminfo_key *keys,
				     int n);
/* Shmem and HugeTLB bytes in use host-wide (/proc/meminfo, the pools). */
SSEG_HIDDEN int sseg_os_meminfo(uint64_t *shmem, uint64_t *hugetlb);

#endif
