/* SPDX-License-Identifier: Apache-2.0 */
/* What each rank sends the parent after a repetition, and the pieces of a
 * repetition the rank side and the parent side share. */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stdint.h>

#include "case.h"
#include "hostmem.h"
#include "room.h"

/* CPU time and minor faults over a phase (getrusage of the process, its
 * population threads included). */
struct usage {
	double user_s;
	double sys_s;
	double minflt;
	double preempted; /* involuntary context switches: another task took the CPU */
};

void usage_now(struct usage *u);
/* *u = now - *u */
void usage_since(struct usage *u);

enum { BW_SEGMENT = 0, BW_PRIVATE = 1 };

/* The bandwidth phase of one rank: its mapping of the segment against a
 * private buffer of the same kind, alternated. The first peer measures
 * sequential reads and copies and the gather, the owner the gather. */
struct bw_samples {
	int32_t reps;
	int32_t sequential;
	char private_pages[16];
	double read[2][ROW_MAX_REPS];
	double copy[2][ROW_MAX_REPS];
	double gather[2][GATHER_BLOCKS][ROW_MAX_REPS];
};

struct rank_report {
	int32_t ok;
	int32_t opened;
	char error[320];
	double t_start, t_ready;
	double t_resident;    /* every page resident (populate=background: its wait) */
	double during_read_s; /* --read-during: the reader's read as soon as usable */
	double create_s, attach_s;
	struct usage create;
	double read_s;
	double second_read_s; /* the same rank's next read, its page tables in place */
	struct usage read;
	double smaps_s; /* the reader's: one full read of its smaps */
	int32_t vmas;
	/* the reader's first read of a private buffer of the same kind it has
	 * just populated: the first read's pair, in the same process */
	double private_read_s;
	char private_pages[16];
	char pages[16];
	double huge_fraction;
	double page_tables; /* this rank's VmPTE rise, open to touched */
	struct bw_samples bw;
};

/* The rank that reads first: the first peer, or the owner alone. */
static inline int reader_rank(const struct bench_case *bc)
{
	return bc->ranks > 1 ? 1 : 0;
}

/* The phases of a repetition, on both sides: the ranks work, then every
 * member steps; after a phase with a sample the parent reads the host's
 * memory and every member steps once more. */
enum sample { SAMPLE_NONE, SAMPLE_BEFORE, SAMPLE_READY, SAMPLE_HELD };

/* bandwidth.c: one rank's part (sequential: the reads and copies too) */
int bw_measure(const struct bench_case *bc, const void *shared, bool sequential,
	       struct bw_samples *bw, char *error, int error_len);
/* The staging ring gathered blocks land in: a batch of loads. */
#define BW_RING_BYTES (64ull << 20)
/* The largest block a gather over bc's segment takes: it reads half the
 * segment, into the ring. */
uint64_t bw_largest_block(const struct bench_case *bc);
/* What the bandwidth phase holds beside the segment: its largest part, the
 * first peer's (a private buffer, the copies' destination, the ring). */
void bw_need(const struct bench_case *bc, struct room_need *n);
/* One rank's rows; role: "peer" or "owner"; pages: what the segment got. */
void bw_print(const struct bench_case *bc, const char *pages, const char *role,
	      const struct bw_samples *bw);

/* results.c: the parent's rows from every repetition's reports */
struct results;
struct results *results_new(const struct bench_case *bc);
/* one repetition: the ranks' reports and the three host samples */
void results_add(struct results *res, const struct rank_report *reports,
		 const struct hostmem *before, const struct hostmem *ready,
		 const struct hostmem *held);
void results_print(const struct results *res);
void results_free(struct results *res);

#endif
