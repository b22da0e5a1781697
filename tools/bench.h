/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg bench: what its files share. */
#ifndef SSEG_CLI_BENCH_H
#define SSEG_CLI_BENCH_H

#include "cli.h"

#define BENCH_MAX_REPS 1000

struct bench_config {
	uint64_t size;
	enum sseg_pages pages_asked;
	enum sseg_pages pages; /* auto resolved to what the library picks for size */
	int reps;
	bool json;
};

/* min and median of n samples (seconds) */
struct bench_stat {
	double min_s;
	double median_s;
};

void bench_stat_of(const double *samples, int n, struct bench_stat *st);

/* ---- a bare memfd mapping: the baseline (bench_bare.c) ---- */

struct bare_map {
	int fd;
	void *reservation;
	uint64_t reservation_len;
	void *base;
	uint64_t len;
};

/* memfd_create (MFD_HUGETLB for HugeTLB), ftruncate, mmap MAP_SHARED (at a
 * 2 MiB boundary with MADV_HUGEPAGE for THP). */
int bare_create(enum sseg_pages kind, uint64_t size, struct bare_map *m);
/* MADV_POPULATE_WRITE over the whole mapping (first touch before 5.14). */
int bare_populate(struct bare_map *m);
void bare_destroy(struct bare_map *m);
/* What the kernel gave: "thp", "base", "thp (37% of bytes)", "hugetlb-2M". */
void bare_pages_label(enum sseg_pages kind, const struct bare_map *m, char *buf, size_t len);

/* Sequential sum of the 64-bit words of [base, base+len). */
uint64_t bench_sum_words(const void *base, uint64_t len);

/* ---- two ranks through the local exchange (bench_peer.c) ---- */

struct peer_run {
	enum sseg_pages pages;   /* the peer's page kind */
	uint64_t page_size;
	double complete_s;       /* the peer's sseg_complete, wall clock */
	char private_pages[48];  /* the private buffer's page kind */
	char error[512];
};

/* One owner (this process) and one peer (a child). With shared_s and
 * private_s (reps each), the owner populates and the peer times sequential
 * reads of its mapping and of a private mapping of the same kind;
 * otherwise population is lazy and only complete is timed. 0 or -1 with
 * run->error set. */
int bench_two_ranks(const struct bench_config *b, double *shared_s, double *private_s,
		    struct peer_run *run);

/* Everything bench measures, (a) to (c). */
struct bench_results {
	double pop1[BENCH_MAX_REPS], pop2[BENCH_MAX_REPS], bare[BENCH_MAX_REPS];
	char pop1_kind[48], pop2_kind[48], bare_kind[48];
	double complete[BENCH_MAX_REPS];
	struct peer_run attach;
	double shared_read[BENCH_MAX_REPS], private_read[BENCH_MAX_REPS];
	struct peer_run reads;
};

void bench_print_text(const struct bench_config *b, const struct bench_results *r);
void bench_print_json(const struct bench_config *b, const struct bench_results *r);

#endif
