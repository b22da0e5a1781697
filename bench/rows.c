/* SPDX-License-Identifier: Apache-2.0 */
/* Result rows as JSON lines. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"

/* The row being written: rows go to stdout one at a time, through the
 * library's JSON writer (src/json.c), or to take as structs. */
static struct sseg_json row;
static void (*take)(const struct row_taken *row, void *ctx);
static void *take_ctx;
static struct row_taken taken;

void rows_take(void (*fn)(const struct row_taken *row, void *ctx), void *ctx)
{
	take = fn;
	take_ctx = ctx;
}

const char *row_taken_str(const struct row_taken *r, const char *key)
{
	for (int i = 0; i < r->nstrs; i++)
		if (!strcmp(r->strs[i].key, key))
			return r->strs[i].value;
	return "";
}

void row_str(const char *key, const char *value)
{
	value = value ? value : "";
	if (!take)
		sseg_json_str(&row, key, value);
	else if (taken.nstrs < ROW_MAX_STRS)
		taken.strs[taken.nstrs++] = (struct row_extra){ key, value };
}

void row_num(const char *key, double value)
{
	if (!take)
		sseg_json_double(&row, key, value);
}

void row_u64(const char *key, uint64_t value)
{
	if (!take)
		sseg_json_u64(&row, key, value);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void stats_of(const double *samples, int n, double *min, double *median, double *max)
{
	double sorted[ROW_MAX_REPS];

	*min = *median = *max = NAN;
	if (n <= 0 || n > ROW_MAX_REPS)
		return;
	memcpy(sorted, samples, (size_t)n * sizeof(*sorted));
	qsort(sorted, (size_t)n, sizeof(*sorted), cmp_double);
	*min = sorted[0];
	*max = sorted[n - 1];
	*median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

double median_of(const double *samples, int n)
{
	double min, median, max;

	stats_of(samples, n, &min, &median, &max);
	return median;
}

void row_begin(const struct row *r, const double *samples, int n)
{
	double min, median, max;

	stats_of(samples, n, &min, &median, &max);
	if (take) {
		taken = (struct row_taken){ .row = *r, .min = min, .median = median, .max = max,
					    .reps = n };
		return;
	}
	sseg_json_init(&row, stdout, SSEG_JSON_LINE);
	sseg_json_begin(&row, NULL, '{');
	sseg_json_int(&row, "schema", 1);
	row_str("bench", r->bench);
	row_str("mechanism", r->mechanism);
	row_u64("ranks", (uint64_t)r->ranks);
	row_u64("size", r->size);
	row_str("pages_requested", r->pages_requested);
	row_str("pages_obtained", r->pages_obtained);
	row_str("unit", r->unit);
	row_num("min", min);
	row_num("median", median);
	row_num("max", max);
	row_u64("reps", (uint64_t)n);
}

void row_end(void)
{
	if (take) {
		take(&taken, take_ctx);
		return;
	}
	sseg_json_end(&row, '}');
	sseg_json_finish(&row);
	fflush(row.out); /* a row is read as it comes, and cases fork */
}
