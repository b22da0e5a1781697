/* SPDX-License-Identifier: Apache-2.0 */
/* One case: a mechanism, a group size, a segment size, a page kind, and
 * what is measured. */
#ifndef BENCH_CASE_H
#define BENCH_CASE_H

#include <stdbool.h>
#include <stdint.h>

#include "mech.h"
#include "rows.h"

#define GATHER_BLOCKS 3

enum bench_touch {
	TOUCH_ALL = 0, /* every rank maps every page: memory and page tables */
	TOUCH_READER,  /* only the first peer's timed read */
	TOUCH_NONE,    /* setup times only */
};

struct bench_case {
	const struct mech_ops *mech;
	int ranks;
	uint64_t size;
	enum sseg_pages pages;
	enum sseg_populate populate;
	int threads;
	int reps;
	int warmup;
	enum bench_touch touch;
	bool bandwidth; /* read, copy and gather: peer, owner, private */
	bool read_during; /* the reader reads the segment once as soon as it is usable */
	uint64_t blocks[GATHER_BLOCKS];
	int timeout_ms;
};

/* Runs the case and prints its rows: 0, 1 on failure, 2 when the machine
 * cannot run it (the reason on stderr). */
int case_run(const struct bench_case *bc);
/* memset and memcpy on populated private buffers of the case's kind */
int limits_run(const struct bench_case *bc);
/* first touch of fresh private memory, freed just before or 3 s before */
int retouch_run(const struct bench_case *bc);
/* a memfd's 4 KiB pages made resident each way, and a peer's first read after */
int alternatives_run(const struct bench_case *bc);
/* the host pool: lookups beside a server's round trip, copies beside
 * memcpy, what a killed process held given back (pool.c) */
int pool_run(const struct bench_case *bc);

#endif
