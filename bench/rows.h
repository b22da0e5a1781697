/* SPDX-License-Identifier: Apache-2.0 */
/* Result rows, one JSON object a line on stdout:
 * {"schema": 1, "bench", "mechanism", "ranks", "size", "pages_requested",
 *  "pages_obtained", "unit", "min", "median", "max", "reps", extras...} */
#ifndef BENCH_ROWS_H
#define BENCH_ROWS_H

#include <stdint.h>
#include <stdio.h>

#define ROW_MAX_REPS 64

struct row {
	const char *bench;
	const char *mechanism;
	int ranks;
	uint64_t size;
	const char *pages_requested;
	const char *pages_obtained;
	const char *unit;
};

/* Writes the fixed keys and the statistics of n samples; extras follow,
 * then row_end. */
void row_begin(FILE *out, const struct row *r, const double *samples, int n);
void row_str(FILE *out, const char *key, const char *value);
void row_num(FILE *out, const char *key, double value); /* non-finite: null */
void row_u64(FILE *out, const char *key, uint64_t value);
void row_end(FILE *out);

void stats_of(const double *samples, int n, double *min, double *median, double *max);
double median_of(const double *samples, int n);

#endif
