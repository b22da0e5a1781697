/* SPDX-License-Identifier: Apache-2.0 */
/* Ranks forked by a subcommand, the records they send, the lines made of them. */
#ifndef SSEG_GPU_RANKS_H
#define SSEG_GPU_RANKS_H

#include <stddef.h>

#include "common.h"
#include "sharedseg.h"

/* What a rank tells the parent: its verdict, or one series of samples.
 * Smaller than PIPE_BUF, so ranks write records whole into one pipe. */
struct record {
	int rank;
	int ok;
	char error[240];
	char handle_type[16];
	int registered_chunks;
	int readonly;
	char bench[24];
	char mechanism[40];
	char pages_requested[16];
	char pages_obtained[32];
	unsigned long long size;
	int reps;
	double values[MAX_REPS];
};

typedef int (*rank_fn)(int rank, void *arg, int out);

void send_record(int out, const struct record *rec);
/* Runs fn in n processes; returns how many failed, and their records. */
int ranks_run(int n, rank_fn fn, void *arg, struct record *records, int max, int *nrec);
void group_name(char *buf, size_t len, const char *what);
int barrier(struct sseg_local_group *g);
void describe_pages(const struct sseg_info *info, char *buf, size_t len);
/* One bench line per series, in the order the series first appear. */
void print_all_series(const struct record *recs, int n, const char *unit);
void report_failures(const char *check, const struct record *recs, int n, int failed);

#endif
