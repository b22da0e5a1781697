/* SPDX-License-Identifier: Apache-2.0 */
/* NUMA placement with raw syscalls (no libnuma, which would be one more
 * runtime dependency for four system calls). A policy set with mbind on a
 * shared memfd mapping is the object's policy: it places pages whichever
 * process faults them. */
#define _GNU_SOURCE /* Linux interfaces beyond POSIX */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "os/file.h"
#include "os/host.h"
#include "os/numa.h"

#define MPOL_BIND_MODE 2
#define MPOL_INTERLEAVE_MODE 3
/* The kernel drops the last bit of maxnode (a historical off-by-one every
 * caller, libnuma included, compensates for): 65 means 64 nodes. */
#define MAXNODE_BITS 65
#define WHERE_SAMPLES 64

/* "0-1,3" -> bits 0, 1, 3; nodes past 63 do not fit the mask. */
static int parse_node_list(const char *text, uint64_t *mask)
{
	const char *p = text;

	*mask = 0;
	while (*p) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;

		if (end == p)
			return -EINVAL;
		p = end;
		if (*p == '-') {
			hi = strtoul(p + 1, &end, 10);
			if (end == p + 1 || hi < lo)
				return -EINVAL;
			p = end;
		}
		for (unsigned long n = lo; n <= hi && n < 64; n++)
			*mask |= 1ull << n;
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -EINVAL;
		else
			break;
	}
	return 0;
}

int sseg_os_numa_nodes(uint64_t *mask)
{
	const char *path = "/sys/devices/system/node/has_memory";
	char text[256];

	/* No file: a kernel without NUMA, where all memory is node 0. */
	if (sseg_os_read_text(path, text, sizeof(text)) || parse_node_list(text, mask) || !*mask)
		*mask = 1;
	sseg_err_clear();
	return 0;
}

static void format_nodes(uint64_t mask, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (int n = 0; n < 64 && used < len; n++) {
		int last = n;

		if (!(mask & (1ull << n)))
			continue;
		while (last < 63 && (mask & (1ull << (last + 1))))
			last++;
		if (last == n)
			used += (size_t)snprintf(buf + used, len - used, "%s%d", used ? "," : "", n);
		else
			used += (size_t)snprintf(buf + used, len - used, "%s%d-%d",
						 used ? "," : "", n, last);
		n = last;
	}
}

static int check_nodes(uint64_t want)
{
	char list[128];
	uint64_t have;

	sseg_os_numa_nodes(&have);
	if (want && (want & ~have) == 0)
		return 0;
	format_nodes(have, list, sizeof(list));
	if (!want)
		return sseg_err(-EINVAL, "no NUMA node given; nodes with memory: %s", list);
	return sseg_err(-EINVAL, "NUMA node %d has no memory; nodes with memory: %s",
			__builtin_ctzll(want & ~have), list);
}

static int mbind_mask(void *addr, uint64_t len, int mode, uint64_t mask, const char *what)
{
	unsigned long nodes[2] = { (unsigned long)mask, 0 };

	if (syscall(SYS_mbind, addr, (unsigned long)len, mode, nodes, MAXNODE_BITS, 0))
		return sseg_err(-errno, "mbind(%s) of %" PRIu64 " bytes at %p failed: %s%s", what,
				len, addr, strerror(errno),
				errno == ENOSYS ? " (kernel built without NUMA)" : "");
	return 0;
}

int sseg_os_numa_bind(void *addr, uint64_t len, int node)
{
	char what[32];
	int rc;

	if (node < 0 || node > 63)
		return sseg_err(-EINVAL, "NUMA node %d is out of range 0..63", node);
	rc = check_nodes(1ull << node);
	if (rc)
		return rc;
	snprintf(what, sizeof(what), "MPOL_BIND to node %d", node);
	return mbind_mask(addr, len, MPOL_BIND_MODE, 1ull << node, what);
}

int sseg_os_numa_interleave(void *addr, uint64_t len, uint64_t mask)
{
	int rc = check_nodes(mask);

	if (rc)
		return rc;
	return mbind_mask(addr, len, MPOL_INTERLEAVE_MODE, mask, "MPOL_INTERLEAVE");
}

int sseg_os_numa_where(const void *addr, uint64_t len, uint64_t page_size, uint64_t *mask)
{
	void *pages[WHERE_SAMPLES];
	int status[WHERE_SAMPLES];
	uint64_t npages;
	unsigned long count;

	*mask = 0;
	if (!sseg_is_pow2(page_size))
		return sseg_err(-EINVAL, "page size %" PRIu64 " is not a power of two", page_size);
	npages = (len + page_size - 1) / page_size;
	count = npages < WHERE_SAMPLES ? (unsigned long)npages : WHERE_SAMPLES;
	for (unsigned long i = 0; i < count; i++)
		pages[i] = (uint8_t *)addr + (i * npages / count) * page_size;
	/* nodes == NULL makes move_pages a query: status gets each page's node. */
	if (count && syscall(SYS_move_pages, 0, count, pages, NULL, status, 0))
		return sseg_err(-errno, "move_pages query of %lu pages failed: %s", count,
				strerror(errno));
	for (unsigned long i = 0; i < count; i++)
		if (status[i] >= 0 && status[i] < 64)
			*mask |= 1ull << status[i];
	return 0;
}
