/* SPDX-License-Identifier: Apache-2.0 */
/* Result rows, one JSON object a line on stdout:
 * {"schema": 1, "bench", "mechanism", "ranks", "size", "pages_requested",
 *  "pages_obtained", "unit", "min", "median", "max", "reps", extras...} */
#ifndef BENCH_ROWS_H
#define BENCH_ROWS_H

#include <stdint.h>
#include <stdio.h>

#include "json.h"

#define ROW_MAX_REPS 64
#define ROW_MAX_STRS 16 /* more string extras than any row has */

struct row {
	const char *bench;
	const char *mechanism;
	int ranks;
	uint64_t size;
	const char *pages_requested;
	const char *pages_obtained;
	const char *unit;
};

struct row_extra {
	const char *key;
	const char *value;
};

/* A row as its writer gave it, for a reader in the same process (the
 * summary): the fixed keys, the statistics and the string extras ("role",
 * "pair", ...; not the numbers). The strings are the writer's, valid
 * during the call that receives it. */
struct row_taken {
	struct row row;
	double min, median, max;
	int reps;
	int nstrs;
	struct row_extra strs[ROW_MAX_STRS];
};

/* Rows go to stdout until take is set: then each goes to take(row, ctx)
 * instead, as a struct, never written; rows_take(NULL, NULL) puts stdout
 * back. */
void rows_take(void (*take)(const struct row_taken *row, void *ctx), void *ctx);
/* An extra of the row by key, "" when it has none. */
const char *row_taken_str(const struct row_taken *row, const char *key);
/* Writes the fixed keys and the statistics of n samples; extras follow,
 * then row_end. One row at a time. */
void row_begin(const struct row *r, const double *samples, int n);
void row_str(const char *key, const char *value); /* NULL: "" */
void row_num(const char *key, double value); /* non-finite: null */
void row_u64(const char *key, uint64_t value);
void row_end(void);

void stats_of(const double *samples, int n, double *min, double *median, double *max);
double median_of(const double *samples, int n);

#endif
