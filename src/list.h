/* SPDX-License-Identifier: Apache-2.0 */
/* What `sharedseg ls` sees (list.c): the segments live on this host, from
 * /proc. sseg_list_json is the public form; the scan is here for tests. */
#ifndef SSEG_LIST_H
#define SSEG_LIST_H

#include "internal.h"

#define SSEG_LIST_MAX_HOLDERS 256

/* One process that maps a segment or holds its memfd. */
struct sseg_holder {
	int pid;
	int rank;            /* from its window's tag; -1 unknown */
	uint64_t mapped;     /* bytes of its mappings of the memfd */
	uint64_t map_start, map_end;
	uint64_t resident;   /* Rss + HugeTLB pages of those mappings */
	uint64_t thp;        /* ShmemPmdMapped */
	uint64_t page_size;  /* KernelPageSize */
	bool readonly;
	bool fd;             /* holds the memfd as a descriptor */
};

/* One memfd, by (device, inode); or one segment of driver memory, by the
 * name, size and group its ranks' tags give (dev and ino 0). */
struct sseg_listed {
	char name[SSEG_NAME_MAX + 1];
	char backend[16];    /* "memfd", or a tag's backend= */
	char pages[16];      /* a tag's pages=; "" for a memfd (seen from its mappings) */
	uint64_t page_size;  /* a tag's page= */
	uint64_t dev, ino;
	uint64_t size;       /* from a descriptor's fstat; 0 when none */
	uint64_t allocated;  /* its allocated blocks */
	uint64_t numa_nodes;
	int world, owner_rank;
	int nholders;
	struct sseg_holder holders[SSEG_LIST_MAX_HOLDERS];
};

struct sseg_list {
	int n, cap;
	struct sseg_listed *segs;
};

SSEG_HIDDEN int sseg_list_scan(struct sseg_list *l);
SSEG_HIDDEN void sseg_list_free(struct sseg_list *l);

#endif
