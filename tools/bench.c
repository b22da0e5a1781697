/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg bench: measured side by side in one run, on one page kind:
 * (a) the owner's population rate against a bare memfd populated with
 *     MADV_POPULATE_WRITE, (b) a peer's sseg_complete with lazy population,
 * (c) sequential reads of a peer's mapping against a private mapping. */
#include <string.h>
#include <unistd.h>

#include "bench.h"

enum { OPT_SIZE = 1, OPT_PAGES, OPT_REPS, OPT_JSON };

static const struct cli_opt bench_opts[] = {
	{ "size", true, OPT_SIZE }, { "pages", true, OPT_PAGES },
	{ "reps", true, OPT_REPS }, { "json", false, OPT_JSON },
	{ NULL, false, 0 },
};

void bench_help(FILE *out)
{
	fprintf(out,
		"usage: sharedseg bench [--size SIZE] [--pages P] [--reps R] [--json]\n"
		"\n"
		"Measures, in one run and on one page kind, R repetitions of each, and\n"
		"prints the minimum, the median and the ratios:\n"
		"  (a) owner population: sseg_create of a one-rank segment with\n"
		"      populate=owner, 1 and 2 threads, against a bare memfd of the same\n"
		"      page kind (memfd_create, ftruncate, mmap, MADV_POPULATE_WRITE);\n"
		"      ratio = bare time / sseg time (above 1: the library is faster)\n"
		"  (b) a peer's sseg_complete with populate=lazy (2 processes, the local\n"
		"      exchange): the cost of receiving the fd and mapping it\n"
		"  (c) sequential read (sum of 64-bit words) of a peer's mapping against a\n"
		"      private populated memfd mapping of the same page kind\n"
		"The page kind of every number is printed. A page kind this machine does\n"
		"not offer is reported and the exit status is 2; bench changes no knobs.\n"
		"\n"
		"options:\n"
		"  --size SIZE  bytes per segment: 4096, 256MiB, 4G (default 256MiB)\n"
		"  --pages P    %s (hugetlb: 2 MiB)\n"
		"               (default auto: what the library picks for SIZE)\n"
		"  --reps R     repetitions, 1..%d (default 5)\n"
		"  --json       one JSON object instead of the text\n"
		"  -h, --help   this text\n"
		"\n"
		"examples:\n"
		"  sharedseg bench\n"
		"  sharedseg bench --size 1GiB --pages thp --reps 9 --json\n",
		cli_names(CLI_PAGES), BENCH_MAX_REPS);
}

static int parse_args(int argc, char **argv, struct bench_config *b)
{
	struct cli_args a = { "bench", argc, argv, 1 };
	const char *v;
	int id, rc = 0;

	memset(b, 0, sizeof(*b));
	b->size = 256ull << 20;
	b->reps = 5;
	while (!rc && (id = cli_next(&a, bench_opts, &v)) != CLI_OPT_END) {
		if (id == CLI_OPT_HELP) {
			bench_help(stdout);
			return -1;
		}
		if (id == CLI_OPT_BAD)
			rc = CLI_USAGE;
		else if (id == OPT_SIZE)
			rc = cli_parse_size("bench", "--size", v, &b->size);
		else if (id == OPT_PAGES)
			rc = cli_parse_pages("bench", v, &b->pages_asked);
		else if (id == OPT_REPS)
			rc = cli_parse_int("bench", "--reps", v, 1, BENCH_MAX_REPS, &b->reps);
		else if (id == OPT_JSON)
			b->json = true;
	}
	if (!rc && b->size < 8)
		rc = cli_usage_error("bench", "--size: at least 8 bytes are needed");
	return rc;
}

/* auto becomes what the library would pick; a kind the machine does not
 * offer is CLI_USAGE with the library's reason. */
static int resolve_pages(struct bench_config *b)
{
	struct sseg_probe p = { .sz = sizeof(p) };

	b->pages = b->pages_asked;
	if (b->pages == SSEG_PAGES_AUTO) {
		if (sseg_probe(b->size, &p)) {
			fprintf(stderr, "sharedseg bench: %s\n", sseg_last_error());
			return CLI_FAIL;
		}
		b->pages = p.auto_pages;
	}
	if (sseg_check_support_size(SSEG_BACKEND_MEMFD, b->pages, b->size)) {
		fprintf(stderr, "sharedseg bench: %s (bench changes no knobs)\n", sseg_last_error());
		return CLI_USAGE;
	}
	return 0;
}

static int self_allgather(const void *mine, void *all, size_t len, void *ctx)
{
	memcpy(all, mine, len);
	return 0;
}

/* One-rank segment, populated by the owner with threads: wall time of
 * sseg_open, which is sseg_create plus a trivial complete. */
static int time_sseg(const struct bench_config *b, int threads, double *s, char *kind,
		     size_t kind_len)
{
	char name[SSEG_NAME_MAX + 1];
	struct sseg_info info = { .sz = sizeof(info) };
	sseg_t *seg;
	double t0;
	int rc;

	snprintf(name, sizeof(name), "sseg-bench-%d-pop", (int)getpid());
	SSEG_OPTS(o, .name = name, .size = b->size, .world_size = 1, .pages = b->pages,
		  .populate = SSEG_POPULATE_OWNER, .populate_threads = threads);
	t0 = cli_now();
	rc = sseg_open(&o, self_allgather, NULL, &seg);
	*s = cli_now() - t0;
	if (rc) {
		fprintf(stderr, "sharedseg bench: sseg_create (%d thread%s): %s\n", threads,
			threads == 1 ? "" : "s", sseg_last_error());
		return -1;
	}
	if (!sseg_info(seg, &info))
		snprintf(kind, kind_len, "%s", sseg_pages_name(info.pages));
	sseg_destroy(seg);
	return 0;
}

static int time_bare(const struct bench_config *b, double *s, char *kind, size_t kind_len)
{
	struct bare_map m;
	double t0 = cli_now();
	int rc = bare_create(b->pages, b->size, &m);

	if (!rc)
		rc = bare_populate(&m);
	*s = cli_now() - t0;
	if (rc) {
		fprintf(stderr, "sharedseg bench: bare memfd (%s): %s\n",
			sseg_pages_name(b->pages), strerror(-rc));
		return -1;
	}
	bare_pages_label(b->pages, &m, kind, kind_len);
	bare_destroy(&m);
	return 0;
}

/* (a): the three contenders alternate so drift hits them alike. */
static int measure_population(const struct bench_config *b, struct bench_results *r)
{
	double warm;

	/* One untimed round first: the first touch of memory the machine has
	 * not handed out yet is slower (a VM's host faults it in), and
	 * would land on whichever contender runs first. */
	if (time_bare(b, &warm, r->bare_kind, sizeof(r->bare_kind)))
		return -1;
	for (int i = 0; i < b->reps; i++)
		if (time_sseg(b, 1, &r->pop1[i], r->pop1_kind, sizeof(r->pop1_kind)) ||
		    time_sseg(b, 2, &r->pop2[i], r->pop2_kind, sizeof(r->pop2_kind)) ||
		    time_bare(b, &r->bare[i], r->bare_kind, sizeof(r->bare_kind)))
			return -1;
	return 0;
}

/* (b) and (c) */
static int measure_peer(const struct bench_config *b, struct bench_results *r)
{
	for (int i = 0; i < b->reps; i++) {
		if (bench_two_ranks(b, NULL, NULL, &r->attach)) {
			fprintf(stderr, "sharedseg bench: peer attach: %s\n", r->attach.error);
			return -1;
		}
		r->complete[i] = r->attach.complete_s;
	}
	if (bench_two_ranks(b, r->shared_read, r->private_read, &r->reads)) {
		fprintf(stderr, "sharedseg bench: peer reads: %s\n", r->reads.error);
		return -1;
	}
	return 0;
}

int bench_main(int argc, char **argv)
{
	static struct bench_results r;
	struct bench_config b;
	int rc = parse_args(argc, argv, &b);

	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = resolve_pages(&b);
	if (rc)
		return rc;
	if (measure_population(&b, &r) || measure_peer(&b, &r))
		return CLI_FAIL;
	if (b.json)
		bench_print_json(&b, &r);
	else
		bench_print_text(&b, &r);
	return CLI_OK;
}
