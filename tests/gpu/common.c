/* SPDX-License-Identifier: Apache-2.0 */
/* Small helpers the subcommands share: pages, the clock, errno names, the page pattern. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"

enum sseg_pages pages_wanted(void)
{
	const char *env = getenv("SSEG_GPU_PAGES");
	enum sseg_pages pages = SSEG_PAGES_AUTO;

	if (env && sseg_parse_pages(env, &pages))
		pages = SSEG_PAGES_AUTO;
	return pages;
}

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *errno_name(int err)
{
	static __thread char text[24];

	switch (err) {
	case 0: return "ok";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case ENOSYS: return "ENOSYS";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EBUSY: return "EBUSY";
	case EFAULT: return "EFAULT";
	default: snprintf(text, sizeof(text), "errno %d", err); return text;
	}
}

/* Fills len bytes with a pattern that differs per page. */
void pattern(unsigned char *p, size_t len)
{
	for (size_t off = 0; off < len; off += 4096)
		p[off] = (unsigned char)((off >> 12) * 131u + 7u);
}

int pattern_holds(const unsigned char *p, size_t len)
{
	for (size_t off = 0; off < len; off += 4096)
		if (p[off] != (unsigned char)((off >> 12) * 131u + 7u))
			return 0;
	return 1;
}

/* The page size the kernel maps [p, p+len) with, from smaps. */
void pages_of(const void *p, char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	unsigned long start, end, kb;
	int inside = 0;

	snprintf(buf, len, "unknown");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2)
			inside = (uintptr_t)p >= start && (uintptr_t)p < end;
		else if (inside && sscanf(line, "KernelPageSize: %lu kB", &kb) == 1)
			snprintf(buf, len, "%s:%lu", kb == 4 ? "base" : "hugetlb", kb * 1024);
		else if (inside && sscanf(line, "ShmemPmdMapped: %lu kB", &kb) == 1 && kb)
			snprintf(buf, len, "thp:2097152");
	}
	if (f)
		fclose(f);
}
