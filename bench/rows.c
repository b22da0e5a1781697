/* SPDX-License-Identifier: Apache-2.0 */
/* Result rows as JSON lines. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"

static void put_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

void row_str(FILE *out, const char *key, const char *value)
{
	fputs(", ", out);
	put_string(out, key);
	fputs(": ", out);
	put_string(out, value ? value : "");
}

void row_num(FILE *out, const char *key, double value)
{
	fputs(", ", out);
	put_string(out, key);
	if (isfinite(value))
		fprintf(out, ": %.9g", value);
	else
		fputs(": null", out);
}

void row_u64(FILE *out, const char *key, uint64_t value)
{
	fputs(", ", out);
	put_string(out, key);
	fprintf(out, ": %llu", (unsigned long long)value);
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

void row_begin(FILE *out, const struct row *r, const double *samples, int n)
{
	double min, median, max;

	stats_of(samples, n, &min, &median, &max);
	fputs("{\"schema\": 1", out);
	row_str(out, "bench", r->bench);
	row_str(out, "mechanism", r->mechanism);
	row_u64(out, "ranks", (uint64_t)r->ranks);
	row_u64(out, "size", r->size);
	row_str(out, "pages_requested", r->pages_requested);
	row_str(out, "pages_obtained", r->pages_obtained);
	row_str(out, "unit", r->unit);
	row_num(out, "min", min);
	row_num(out, "median", median);
	row_num(out, "max", max);
	row_u64(out, "reps", (uint64_t)n);
}

void row_end(FILE *out)
{
	fputs("}\n", out);
	fflush(out);
}
