/* SPDX-License-Identifier: Apache-2.0 */
/* What `sharedseg bench` prints: min and median of every figure, the rates,
 * the ratios, the page kind each was measured on, and the driver command
 * that measures it alone. */
#include <string.h>

#include "summary.h"

/* Every rate the bench prints is in GB/s (10^9 bytes a second), as the
 * driver's bandwidth rows are: one unit for population and reading. */
static double rate_gb_s(uint64_t bytes, double s)
{
	return s > 0 ? (double)bytes / 1e9 / s : 0.0;
}

/* Seconds in one of the figure's units (the driver's time rows say "s" or "ms"). */
static double unit_s(const struct bench_figure *f)
{
	return !strcmp(f->unit, "ms") ? 1e-3 : 1.0;
}

/* A time figure in ms, with the rate of bytes in it when bytes. */
static void time_line(const char *what, const struct bench_figure *f, uint64_t bytes)
{
	double u = unit_s(f);

	printf("    %-26s %-12s %9.2f ms / %9.2f ms", what, f->pages, f->min * u * 1e3,
	       f->median * u * 1e3);
	if (bytes)
		printf("   %6.2f / %6.2f GB/s", rate_gb_s(bytes, f->min * u),
		       rate_gb_s(bytes, f->median * u));
	printf("\n");
}

/* A bandwidth figure (the driver's GB/s: the median is a median rate, the
 * best is the max the driver keeps, not its min). */
static void rate_line(const char *what, const struct bench_figure *f)
{
	printf("    %-26s %-12s %6.2f GB/s (median)\n", what, f->pages, f->median);
}

static double ratio(double a, double b)
{
	return b > 0 ? a / b : 0.0;
}

static void commands(const struct bench_figure *const *figs, int n)
{
	for (int i = 0; i < n; i++)
		if (i == 0 || strcmp(figs[i]->command, figs[i - 1]->command))
			printf("      %s\n", figs[i]->command);
}

void bench_print_text(const struct bench_config *b, const struct bench_results *r)
{
	char sz[32];

	cli_format_size(b->size, sz, sizeof(sz));
	printf("sharedseg bench: %s, pages %s (asked %s), %d repetitions; min / median\n", sz,
	       sseg_pages_name(b->pages), sseg_pages_name(b->pages_asked), b->reps);
	printf("\n(a) owner population: a one-rank segment, its owner populating it\n");
	time_line("sharedseg, 1 thread", &r->pop1, b->size);
	time_line("sharedseg, 2 threads", &r->pop2, b->size);
	time_line("private buffer", &r->private_pop, b->size);
	printf("    ratio sharedseg/private (population rate, median): 1 thread %.2f, "
	       "2 threads %.2f\n", ratio(r->private_pop.median, r->pop1.median),
	       ratio(r->private_pop.median, r->pop2.median));
	commands((const struct bench_figure *const[]){ &r->pop1, &r->pop2, &r->private_pop }, 3);
	printf("\n(b) peer attach: rank 1 of 2, populate=lazy\n");
	time_line("peer attach", &r->attach, 0);
	commands((const struct bench_figure *const[]){ &r->attach }, 1);
	printf("\n(c) sequential read by a peer (after one untimed pass)\n");
	rate_line("peer's shared mapping", &r->shared_read);
	rate_line("private buffer", &r->private_read);
	printf("    ratio shared/private (read bandwidth, median): %.2f\n",
	       ratio(r->shared_read.median, r->private_read.median));
	commands((const struct bench_figure *const[]){ &r->shared_read }, 1);
}

/* A time figure (time: true) in seconds, with rates of bytes; else the
 * driver's median GB/s. */
static void json_figure(struct sseg_json *j, const char *key, const struct bench_figure *f,
			bool time, uint64_t bytes)
{
	double u = unit_s(f);

	sseg_json_begin(j, key, '{');
	sseg_json_str(j, "pages", f->pages);
	if (time) {
		sseg_json_double(j, "min_s", f->min * u);
		sseg_json_double(j, "median_s", f->median * u);
		if (bytes) {
			sseg_json_double(j, "max_gb_s", rate_gb_s(bytes, f->min * u));
			sseg_json_double(j, "median_gb_s", rate_gb_s(bytes, f->median * u));
		}
	} else {
		sseg_json_double(j, "median_gb_s", f->median);
	}
	sseg_json_str(j, "command", f->command);
	sseg_json_end(j, '}');
}

void bench_print_json(const struct bench_config *b, const struct bench_results *r)
{
	struct sseg_json j;

	sseg_json_init(&j, stdout, SSEG_JSON_PRETTY);
	sseg_json_begin(&j, NULL, '{');
	sseg_json_int(&j, "schema", 3);
	sseg_json_u64(&j, "size", b->size);
	sseg_json_str(&j, "pages", sseg_pages_name(b->pages));
	sseg_json_str(&j, "pages_requested", sseg_pages_name(b->pages_asked));
	sseg_json_int(&j, "reps", b->reps);
	sseg_json_begin(&j, "population", '{');
	json_figure(&j, "sharedseg_1_thread", &r->pop1, true, b->size);
	json_figure(&j, "sharedseg_2_threads", &r->pop2, true, b->size);
	json_figure(&j, "private_buffer", &r->private_pop, true, b->size);
	sseg_json_double(&j, "ratio_1_thread", ratio(r->private_pop.median, r->pop1.median));
	sseg_json_double(&j, "ratio_2_threads", ratio(r->private_pop.median, r->pop2.median));
	sseg_json_end(&j, '}');
	json_figure(&j, "peer_attach", &r->attach, true, 0);
	sseg_json_begin(&j, "read", '{');
	json_figure(&j, "shared", &r->shared_read, false, 0);
	json_figure(&j, "private", &r->private_read, false, 0);
	sseg_json_double(&j, "ratio", ratio(r->shared_read.median, r->private_read.median));
	sseg_json_end(&j, '}');
	sseg_json_end(&j, '}');
	sseg_json_finish(&j);
}
