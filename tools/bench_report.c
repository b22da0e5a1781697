/* SPDX-License-Identifier: Apache-2.0 */
/* What `sharedseg bench` prints: min and median of every measurement, the
 * rates, the ratios, and the page kind each number was measured on. */
#include "bench.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static double rate_gib_s(uint64_t bytes, double s)
{
	return s > 0 ? (double)bytes / GIB / s : 0.0;
}

static void text_line(const char *what, const char *kind, const double *samples, int n,
		      uint64_t bytes)
{
	struct bench_stat st;

	bench_stat_of(samples, n, &st);
	printf("    %-30s %-12s %9.2f ms / %9.2f ms", what, kind, st.min_s * 1e3,
	       st.median_s * 1e3);
	if (bytes)
		printf("   %6.2f / %6.2f GiB/s", rate_gib_s(bytes, st.min_s),
		       rate_gib_s(bytes, st.median_s));
	printf("\n");
}

/* a's median time over b's: the rate of b over the rate of a */
static double median_ratio(const double *a, const double *b, int n)
{
	struct bench_stat sa, sb;

	bench_stat_of(a, n, &sa);
	bench_stat_of(b, n, &sb);
	return sb.median_s > 0 ? sa.median_s / sb.median_s : 0.0;
}

void bench_print_text(const struct bench_config *b, const struct bench_results *r)
{
	const char *peer_kind = sseg_pages_name(r->reads.pages);
	char sz[32];

	cli_format_size(b->size, sz, sizeof(sz));
	printf("sharedseg bench: %s, pages %s (asked %s), %d repetitions; min / median\n", sz,
	       sseg_pages_name(b->pages), sseg_pages_name(b->pages_asked), b->reps);
	printf("\n(a) owner population: create + populate of one rank's segment\n");
	text_line("sseg_create, 1 thread", r->pop1_kind, r->pop1, b->reps, b->size);
	text_line("sseg_create, 2 threads", r->pop2_kind, r->pop2, b->reps, b->size);
	text_line("bare memfd + POPULATE_WRITE", r->bare_kind, r->bare, b->reps, b->size);
	printf("    ratio sseg/bare (population rate, median): 1 thread %.2f, 2 threads %.2f\n",
	       median_ratio(r->bare, r->pop1, b->reps), median_ratio(r->bare, r->pop2, b->reps));
	printf("\n(b) peer attach: sseg_complete of rank 1 of 2, populate=lazy\n");
	text_line("peer sseg_complete", sseg_pages_name(r->attach.pages), r->complete, b->reps,
		  0);
	printf("\n(c) sequential read, sum of 64-bit words (after one untimed pass)\n");
	text_line("peer's shared mapping", peer_kind, r->shared_read, b->reps, b->size);
	text_line("private memfd mapping", r->reads.private_pages, r->private_read, b->reps,
		  b->size);
	printf("    ratio shared/private (read bandwidth, median): %.2f\n",
	       median_ratio(r->private_read, r->shared_read, b->reps));
}

static void json_stat(struct sseg_json *j, const char *key, const char *kind, const double *samples,
		      int n, uint64_t bytes)
{
	struct bench_stat st;

	bench_stat_of(samples, n, &st);
	sseg_json_begin(j, key, '{');
	sseg_json_str(j, "pages", kind);
	sseg_json_double(j, "min_s", st.min_s);
	sseg_json_double(j, "median_s", st.median_s);
	if (bytes) {
		sseg_json_double(j, "max_gib_s", rate_gib_s(bytes, st.min_s));
		sseg_json_double(j, "median_gib_s", rate_gib_s(bytes, st.median_s));
	}
	sseg_json_end(j, '}');
}

void bench_print_json(const struct bench_config *b, const struct bench_results *r)
{
	struct sseg_json j;

	sseg_json_init(&j, stdout, SSEG_JSON_PRETTY);
	sseg_json_begin(&j, NULL, '{');
	sseg_json_int(&j, "schema", 1);
	sseg_json_u64(&j, "size", b->size);
	sseg_json_str(&j, "pages", sseg_pages_name(b->pages));
	sseg_json_str(&j, "pages_requested", sseg_pages_name(b->pages_asked));
	sseg_json_int(&j, "reps", b->reps);
	sseg_json_begin(&j, "population", '{');
	json_stat(&j, "sseg_1_thread", r->pop1_kind, r->pop1, b->reps, b->size);
	json_stat(&j, "sseg_2_threads", r->pop2_kind, r->pop2, b->reps, b->size);
	json_stat(&j, "bare_memfd", r->bare_kind, r->bare, b->reps, b->size);
	sseg_json_double(&j, "ratio_1_thread", median_ratio(r->bare, r->pop1, b->reps));
	sseg_json_double(&j, "ratio_2_threads", median_ratio(r->bare, r->pop2, b->reps));
	sseg_json_end(&j, '}');
	json_stat(&j, "peer_complete", sseg_pages_name(r->attach.pages), r->complete, b->reps, 0);
	sseg_json_begin(&j, "read", '{');
	json_stat(&j, "shared", sseg_pages_name(r->reads.pages), r->shared_read, b->reps,
		  b->size);
	json_stat(&j, "private", r->reads.private_pages, r->private_read, b->reps, b->size);
	sseg_json_double(&j, "ratio", median_ratio(r->private_read, r->shared_read, b->reps));
	sseg_json_end(&j, '}');
	sseg_json_end(&j, '}');
	sseg_json_finish(&j);
}
