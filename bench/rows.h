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

struct row {
	const char *bench;
	const char *mechanism;
	int ranks;
	uint64_t size;
	const char *pages_requested;
	const char *pages_obtained;
	const char *unit;
};

/* Where rows go: stdout until set, and again after rows_to(NULL) (the
 * tool's summary reads the rows of the cases it runs). */
void rows_to(FILE *out);
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
