/* SPDX-License-Identifier: Apache-2.0 */
/* sseg_bench: the memory mechanics of the benchmarks (bench/run.py runs
 * the matrix). One case a run; its rows go to stdout as JSON lines.
 *
 *   sseg_bench case --mechanism M --ranks N --size S --pages P [...]
 *   sseg_bench limits --size S --pages P --reps R
 *   sseg_bench retouch --size S
 *   sseg_bench alternatives --size S --reps R
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: sseg_bench case --mechanism M [--ranks N] [--size S] [--pages P]\n"
		"                       [--populate P] [--threads T] [--reps R] [--warmup W]\n"
		"                       [--touch all|reader|none] [--bandwidth] [--read-during]\n"
		"                       [--blocks 16K,64K,256K] [--timeout MS]\n"
		"       sseg_bench limits [--size S] [--pages P] [--reps R]\n"
		"       sseg_bench retouch [--size S] [--pages P]\n"
		"       sseg_bench alternatives [--size S] [--reps R]   (4 KiB pages)\n"
		"\n"
		"Prints one JSON row a line on stdout. Exit 0, 1 on failure, 2 when this\n"
		"machine cannot run the case (why on stderr).\n"
		"mechanisms: %s\n",
		mech_names());
}

static const struct option long_opts[] = {
	{ "mechanism", required_argument, NULL, 'm' }, { "ranks", required_argument, NULL, 'n' },
	{ "size", required_argument, NULL, 's' },      { "pages", required_argument, NULL, 'p' },
	{ "populate", required_argument, NULL, 'P' },  { "threads", required_argument, NULL, 't' },
	{ "reps", required_argument, NULL, 'r' },      { "warmup", required_argument, NULL, 'w' },
	{ "touch", required_argument, NULL, 'T' },     { "bandwidth", no_argument, NULL, 'b' },
	{ "read-during", no_argument, NULL, 'R' },
	{ "blocks", required_argument, NULL, 'B' },    { "timeout", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },            { NULL, 0, NULL, 0 },
};

static int parse_int(const char *opt, const char *text, int min, int max, int *v)
{
	char *end;
	long x = strtol(text, &end, 10);

	if (*text && !*end && x >= min && x <= max) {
		*v = (int)x;
		return 0;
	}
	fprintf(stderr, "sseg_bench: --%s %s: expected %d..%d\n", opt, text, min, max);
	return -1;
}

static int parse_touch(const char *text, enum touch *t)
{
	static const char *const names[] = { "all", "reader", "none" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(text, names[i])) {
			*t = (enum touch)i;
			return 0;
		}
	fprintf(stderr, "sseg_bench: --touch %s: expected all, reader or none\n", text);
	return -1;
}

static int parse_blocks(const char *text, uint64_t blocks[GATHER_BLOCKS])
{
	char buf[128], *save = NULL, *tok;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", text);
	memset(blocks, 0, GATHER_BLOCKS * sizeof(*blocks));
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == GATHER_BLOCKS || sseg_parse_size(tok, &blocks[n]) || !blocks[n]) {
			fprintf(stderr, "sseg_bench: --blocks %s: up to %d sizes\n", text,
				GATHER_BLOCKS);
			return -1;
		}
		n++;
	}
	return 0;
}

static int parse_named(int id, const char *v, struct bench_case *bc)
{
	switch (id) {
	case 'm':
		bc->mech = mech_find(v);
		if (!bc->mech)
			fprintf(stderr, "sseg_bench: --mechanism %s: one of %s\n", v, mech_names());
		return bc->mech ? 0 : -1;
	case 's':
		if (!sseg_parse_size(v, &bc->size) && bc->size >= 4096)
			return 0;
		fprintf(stderr, "sseg_bench: --size %s: at least 4096 bytes\n", v);
		return -1;
	case 'p':
		return sseg_parse_pages(v, &bc->pages) ? (fprintf(stderr, "sseg_bench: --pages %s: "
						"%s\n", v, sseg_last_error()), -1) : 0;
	case 'P':
		return sseg_parse_populate(v, &bc->populate) ? (fprintf(stderr, "sseg_bench: "
						"--populate %s: %s\n", v, sseg_last_error()), -1) : 0;
	case 'T':
		return parse_touch(v, &bc->touch);
	case 'B':
		return parse_blocks(v, bc->blocks);
	}
	return -1;
}

static int parse_opt(int id, const char *v, struct bench_case *bc)
{
	switch (id) {
	case 'n':
		return parse_int("ranks", v, 1, 64, &bc->ranks);
	case 't':
		return parse_int("threads", v, 0, 256, &bc->threads);
	case 'r':
		return parse_int("reps", v, 1, ROW_MAX_REPS, &bc->reps);
	case 'w':
		return parse_int("warmup", v, 0, 100, &bc->warmup);
	case 'o':
		return parse_int("timeout", v, 1, 3600000, &bc->timeout_ms);
	case 'b':
		bc->bandwidth = true;
		return 0;
	case 'R':
		bc->read_during = true;
		return 0;
	}
	return parse_named(id, v, bc);
}

static int (*command(const char *name))(const struct bench_case *bc)
{
	if (!strcmp(name, "case"))
		return case_run;
	if (!strcmp(name, "limits"))
		return limits_run;
	if (!strcmp(name, "retouch"))
		return retouch_run;
	if (!strcmp(name, "alternatives"))
		return alternatives_run;
	return NULL;
}

static void defaults(struct bench_case *bc)
{
	memset(bc, 0, sizeof(*bc));
	bc->mech = &mech_sharedseg;
	bc->ranks = 2;
	bc->size = 64ull << 20;
	bc->pages = SSEG_PAGES_BASE;
	bc->reps = 3;
	bc->warmup = 1;
	bc->blocks[0] = 16 << 10;
	bc->blocks[1] = 64 << 10;
	bc->blocks[2] = 256 << 10;
	bc->timeout_ms = 120000;
}

int main(int argc, char **argv)
{
	struct bench_case bc;
	int id;

	defaults(&bc);
	if (argc < 2 || !command(argv[1])) {
		bool help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));

		usage(help ? stdout : stderr);
		return help ? 0 : 2;
	}
	while ((id = getopt_long(argc - 1, argv + 1, "", long_opts, NULL)) != -1) {
		if (id == 'h') {
			usage(stdout);
			return 0;
		}
		if (id == '?' || parse_opt(id, optarg, &bc))
			return 2;
	}
	if (bc.bandwidth && bc.ranks < 2) {
		fprintf(stderr, "sseg_bench: --bandwidth needs a peer: --ranks 2 or more\n");
		return 2;
	}
	return command(argv[1])(&bc);
}
