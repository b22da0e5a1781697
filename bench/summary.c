/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg bench: a summary of the benchmarks' driver, in one run on one
 * page kind: (a) a one-rank segment populated by its owner against a
 * private buffer made resident, (b) a peer's attach with lazy population,
 * (c) sequential reads of a peer's mapping against a private buffer. Each
 * figure is the row of one driver case, taken as a struct (rows_take). */
#include <string.h>

#include "driver.h"
#include "summary.h"

enum { OPT_SIZE = 1, OPT_PAGES, OPT_REPS, OPT_JSON };

static const struct cli_opt bench_opts[] = {
	{ "size", true, OPT_SIZE }, { "pages", true, OPT_PAGES },
	{ "reps", true, OPT_REPS }, { "json", false, OPT_JSON },
	{ NULL, false, 0 },
};

void bench_summary_help(FILE *out)
{
	fprintf(out,
		"usage: sharedseg bench [--size SIZE] [--pages P] [--reps R] [--json]\n"
		"       sharedseg bench case|limits|retouch|alternatives [OPTIONS]\n"
		"\n"
		"Measures, in one run and on one page kind, R repetitions of each (after\n"
		"one untimed), through the benchmarks' driver below, and prints the\n"
		"minimum, the median, the ratios and the driver command of each figure:\n"
		"  (a) owner population: a one-rank segment populated by its owner\n"
		"      (populate=owner, 1 and 2 threads) against a private buffer of the\n"
		"      same page kind made resident, what serving stacks allocate today;\n"
		"      ratio = private time / sharedseg time (above 1: the library is faster)\n"
		"  (b) a peer's attach with populate=lazy (2 processes): the cost of\n"
		"      receiving the fd and mapping it\n"
		"  (c) sequential read of a peer's mapping against a private buffer of the\n"
		"      same page kind (2 processes)\n"
		"The page kind of every number is printed. A page kind this machine does\n"
		"not offer is reported and the exit status is 2; bench changes no knobs.\n"
		"The benchmarks are a program of their own beside the tool, sharedseg-bench:\n"
		"sharedseg bench ARGS runs sharedseg-bench ARGS.\n"
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
		"  sharedseg bench --size 1GiB --pages thp --reps 9 --json\n"
		"  sharedseg bench case --mechanism devshm --ranks 4 --size 1GiB\n"
		"\n",
		cli_names(CLI_PAGES), ROW_MAX_REPS);
	bench_driver_help(out);
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
			bench_summary_help(stdout);
			return -1;
		}
		if (id == CLI_OPT_BAD)
			rc = CLI_USAGE;
		else if (id == OPT_SIZE)
			rc = cli_parse_size("bench", "--size", v, &b->size);
		else if (id == OPT_PAGES)
			rc = cli_parse_pages("bench", "--pages", v, &b->pages_asked);
		else if (id == OPT_REPS)
			rc = cli_parse_int("bench", "--reps", v, 1, ROW_MAX_REPS, &b->reps);
		else if (id == OPT_JSON)
			b->json = true;
	}
	if (!rc && b->size < 4096)
		rc = cli_usage_error("bench", "--size: at least 4096 bytes are needed");
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

/* Writes the driver command that case bc is, for the reader to run alone. */
static void command_of(const struct bench_case *bc, char *buf, size_t len)
{
	snprintf(buf, len, "sharedseg bench case --mechanism %s --ranks %d --size %llu --pages %s "
		 "--populate %s --threads %d --reps %d%s", bc->mech->name, bc->ranks,
		 (unsigned long long)bc->size, sseg_pages_name(bc->pages),
		 sseg_populate_name(bc->populate), bc->threads, bc->reps,
		 bc->bandwidth ? " --bandwidth" : "");
}

static bool row_is(const struct row_taken *row, const struct bench_figure *f)
{
	return !strcmp(row->row.bench, f->bench) && !strcmp(row->row.mechanism, f->mechanism) &&
	       (!f->role || !strcmp(row_taken_str(row, "role"), f->role));
}

/* The figures a case fills, each from the first row it names. */
struct figures {
	struct bench_figure **figs;
	int n;
};

static void take_row(const struct row_taken *row, void *ctx)
{
	const struct figures *want = ctx;

	for (int i = 0; i < want->n; i++) {
		struct bench_figure *f = want->figs[i];

		if (f->found || !row_is(row, f))
			continue;
		f->found = true;
		f->min = row->min;
		f->median = row->median;
		snprintf(f->unit, sizeof(f->unit), "%s", row->row.unit);
		snprintf(f->pages, sizeof(f->pages), "%s", row->row.pages_obtained);
	}
}

/* Runs the driver's case bc with its rows taken as structs, and fills each
 * of the n figures from the row it names. */
static int run_case(const struct bench_case *bc, struct bench_figure **figs, int n)
{
	struct figures want = { figs, n };
	int rc;

	fflush(stdout); /* the case forks its ranks */
	rows_take(take_row, &want);
	rc = case_run(bc);
	rows_take(NULL, NULL);
	for (int i = 0; i < n; i++) {
		command_of(bc, figs[i]->command, sizeof(figs[i]->command));
		if (!rc && !figs[i]->found) {
			fprintf(stderr, "sharedseg bench: %s wrote no %s row of %s\n",
				figs[i]->command, figs[i]->bench, figs[i]->mechanism);
			rc = CLI_FAIL;
		}
	}
	return rc == 2 ? CLI_USAGE : rc ? CLI_FAIL : CLI_OK;
}

/* One case of the driver over b's size, page kind and repetitions. */
static void case_of(const struct bench_config *b, const struct mech_ops *mech, int ranks,
		    enum sseg_populate populate, int threads, struct bench_case *bc)
{
	bench_case_defaults(bc);
	bc->mech = mech;
	bc->ranks = ranks;
	bc->size = b->size;
	bc->pages = b->pages;
	bc->populate = populate;
	bc->threads = threads;
	bc->reps = b->reps;
	memset(bc->blocks, 0, sizeof(bc->blocks)); /* no KV-block gathers */
}

static int measure(const struct bench_config *b, struct bench_results *r)
{
	struct bench_case bc;
	int rc;

	*r = (struct bench_results){
		.pop1 = { .bench = "owner_create", .mechanism = "sharedseg" },
		.pop2 = { .bench = "owner_create", .mechanism = "sharedseg" },
		.private_pop = { .bench = "owner_create", .mechanism = "private-malloc" },
		.attach = { .bench = "peer_attach", .mechanism = "sharedseg" },
		.shared_read = { .bench = "seq_read", .mechanism = "sharedseg", .role = "peer" },
		.private_read = { .bench = "seq_read", .mechanism = "private-malloc", .role = "private" },
	};
	/* (a) */
	case_of(b, &mech_sharedseg, 1, SSEG_POPULATE_OWNER, 1, &bc);
	rc = run_case(&bc, (struct bench_figure *[]){ &r->pop1 }, 1);
	case_of(b, &mech_sharedseg, 1, SSEG_POPULATE_OWNER, 2, &bc);
	rc = rc ? rc : run_case(&bc, (struct bench_figure *[]){ &r->pop2 }, 1);
	case_of(b, &mech_private, 1, SSEG_POPULATE_OWNER, 0, &bc);
	rc = rc ? rc : run_case(&bc, (struct bench_figure *[]){ &r->private_pop }, 1);
	/* (b) */
	case_of(b, &mech_sharedseg, 2, SSEG_POPULATE_LAZY, 0, &bc);
	rc = rc ? rc : run_case(&bc, (struct bench_figure *[]){ &r->attach }, 1);
	/* (c) */
	case_of(b, &mech_sharedseg, 2, SSEG_POPULATE_OWNER, 0, &bc);
	bc.bandwidth = true;
	return rc ? rc : run_case(&bc, (struct bench_figure *[]){ &r->shared_read,
								&r->private_read }, 2);
}

int bench_summary_main(int argc, char **argv)
{
	struct bench_results r;
	struct bench_config b;
	int rc;

	rc = parse_args(argc, argv, &b);
	if (rc)
		return rc < 0 ? CLI_OK : rc;
	rc = resolve_pages(&b);
	if (!rc)
		rc = measure(&b, &r);
	if (rc)
		return rc;
	if (b.json)
		bench_print_json(&b, &r);
	else
		bench_print_text(&b, &r);
	return CLI_OK;
}
