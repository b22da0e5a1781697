/* SPDX-License-Identifier: Apache-2.0 */
/* `sharedseg bench case|limits|retouch|alternatives|pool`: the benchmarks'
 * driver (bench/: one case a run, its rows as JSON lines on stdout), which
 * `make bench` runs through bench/run.py; this file parses its options. */
#include <string.h>

#include "args.h"
#include "driver.h"
#include "report.h"

enum {
	OPT_MECH = 1, OPT_RANKS, OPT_SIZE, OPT_PAGES, OPT_POPULATE, OPT_THREADS, OPT_REPS,
	OPT_WARMUP, OPT_TOUCH, OPT_BANDWIDTH, OPT_READ_DURING, OPT_BLOCKS, OPT_TIMEOUT,
};

static const struct cli_opt driver_opts[] = {
	{ "mechanism", true, OPT_MECH },     { "ranks", true, OPT_RANKS },
	{ "size", true, OPT_SIZE },	     { "pages", true, OPT_PAGES },
	{ "populate", true, OPT_POPULATE },  { "threads", true, OPT_THREADS },
	{ "reps", true, OPT_REPS },	     { "warmup", true, OPT_WARMUP },
	{ "touch", true, OPT_TOUCH },	     { "bandwidth", false, OPT_BANDWIDTH },
	{ "read-during", false, OPT_READ_DURING }, { "blocks", true, OPT_BLOCKS },
	{ "timeout", true, OPT_TIMEOUT },    { NULL, false, 0 },
};

static const struct {
	const char *name;
	int (*run)(const struct bench_case *bc);
} commands[] = {
	{ "case", case_run },
	{ "limits", limits_run },
	{ "retouch", retouch_run },
	{ "alternatives", alternatives_run },
	{ "pool", pool_run },
};

void bench_driver_help(FILE *out)
{
	fprintf(out,
		"The benchmarks' driver (make bench runs it through bench/run.py): one case a\n"
		"run, one JSON row a line on stdout; exit 0, 1 on failure, 2 when this\n"
		"machine cannot run the case (why on stderr).\n"
		"  sharedseg bench case --mechanism M [--ranks N] [--size S] [--pages P]\n"
		"                       [--populate P] [--threads T] [--reps R] [--warmup W]\n"
		"                       [--touch all|reader|none] [--bandwidth] [--read-during]\n"
		"                       [--blocks 16K,64K,256K] [--timeout MS]\n"
		"      a group of N ranks getting S bytes of host memory by mechanism M,\n"
		"      timed phase by phase, with the host's memory between phases\n"
		"      mechanisms: %s\n"
		"  sharedseg bench limits [--size S] [--pages P] [--reps R]\n"
		"      memset, memcpy and a sequential read on private buffers\n"
		"  sharedseg bench retouch [--size S] [--pages P]\n"
		"      first touch of fresh private memory, freed just before or 3 s before\n"
		"  sharedseg bench alternatives [--size S] [--reps R]\n"
		"      a memfd's 4 KiB pages made resident each way, then a peer's first read\n"
		"  sharedseg bench pool [--size CHUNK] [--pages P] [--ranks N] [--reps R]\n"
		"      the host pool: a 64-key prefix looked up and pinned by 1..N processes\n"
		"      beside a Unix-socket server's round trip; a chunk stored and loaded\n"
		"      beside memcpy; what a SIGKILLed process held, given back\n",
		mech_names());
}

/* The driver's command of that name, or NULL. */
static int (*find_command(const char *name))(const struct bench_case *bc)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(name, commands[i].name))
			return commands[i].run;
	return NULL;
}

bool bench_driver_command(const char *name)
{
	return find_command(name) != NULL;
}

static int parse_touch(const char *text, enum bench_touch *t)
{
	static const char *const names[] = { "all", "reader", "none" };

	for (int i = 0; i < 3; i++)
		if (!strcmp(text, names[i])) {
			*t = (enum bench_touch)i;
			return 0;
		}
	return cli_usage_error("bench", "--touch %s: expected all, reader or none", text);
}

static int parse_blocks(const char *text, uint64_t blocks[GATHER_BLOCKS])
{
	char buf[128], *save = NULL, *tok;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", text);
	memset(blocks, 0, GATHER_BLOCKS * sizeof(*blocks));
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == GATHER_BLOCKS || sseg_parse_size(tok, &blocks[n]) || !blocks[n])
			return cli_usage_error("bench", "--blocks %s: up to %d sizes", text,
					       GATHER_BLOCKS);
		n++;
	}
	return 0;
}

static int parse_opt(int id, const char *v, struct bench_case *bc)
{
	switch (id) {
	case OPT_MECH:
		bc->mech = mech_find(v);
		return bc->mech ? 0 : cli_usage_error("bench", "--mechanism %s: one of %s", v,
						      mech_names());
	case OPT_SIZE:
		if (cli_parse_size("bench", "--size", v, &bc->size))
			return CLI_USAGE;
		return bc->size >= 4096 ? 0 : cli_usage_error("bench", "--size %s: at least "
							      "4096 bytes", v);
	case OPT_PAGES:
		return cli_parse_pages("bench", "--pages", v, &bc->pages);
	case OPT_POPULATE:
		return cli_parse_populate("bench", "--populate", v, &bc->populate);
	case OPT_TOUCH:
		return parse_touch(v, &bc->touch);
	case OPT_BLOCKS:
		return parse_blocks(v, bc->blocks);
	case OPT_RANKS:
		return cli_parse_int("bench", "--ranks", v, 1, 64, &bc->ranks);
	case OPT_THREADS:
		return cli_parse_int("bench", "--threads", v, 0, 256, &bc->threads);
	case OPT_REPS:
		return cli_parse_int("bench", "--reps", v, 1, ROW_MAX_REPS, &bc->reps);
	case OPT_WARMUP:
		return cli_parse_int("bench", "--warmup", v, 0, 100, &bc->warmup);
	case OPT_TIMEOUT:
		return cli_parse_int("bench", "--timeout", v, 1, 3600000, &bc->timeout_ms);
	case OPT_BANDWIDTH:
		bc->bandwidth = true;
		return 0;
	case OPT_READ_DURING:
		bc->read_during = true;
		return 0;
	}
	return CLI_USAGE;
}

/* Every block a gather can take: one that does not fit would be timed as
 * nothing, 0 GB/s. */
static int check_blocks(const struct bench_case *bc)
{
	uint64_t most = bw_largest_block(bc);
	char block[32], size[32], largest[32], ring[32];

	for (int k = 0; k < GATHER_BLOCKS && bc->blocks[k]; k++) {
		if (bc->blocks[k] <= most)
			continue;
		cli_format_size(bc->blocks[k], block, sizeof(block));
		cli_format_size(bc->size, size, sizeof(size));
		cli_format_size(most, largest, sizeof(largest));
		cli_format_size(BW_RING_BYTES, ring, sizeof(ring));
		if (bc->blocks[k] > BW_RING_BYTES)
			return cli_usage_error("bench", "--blocks: a %s block is more than the %s "
					       "staging ring a gather copies into: use blocks of "
					       "at most %s", block, ring, largest);
		return cli_usage_error("bench", "--blocks: a %s block is more than half of --size "
				       "%s, what a gather reads: use blocks of at most %s or a "
				       "larger --size", block, size, largest);
	}
	return 0;
}

void bench_case_defaults(struct bench_case *bc)
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

int bench_driver_main(int argc, char **argv)
{
	struct cli_args a = { "bench", argc, argv, 1 };
	int (*run)(const struct bench_case *bc);
	struct bench_case bc;
	const char *v;
	int id, rc = 0;

	bench_case_defaults(&bc);
	while (!rc && (id = cli_next(&a, driver_opts, &v)) != CLI_OPT_END) {
		if (id == CLI_OPT_HELP) {
			bench_driver_help(stdout);
			return CLI_OK;
		}
		rc = id == CLI_OPT_BAD ? CLI_USAGE : parse_opt(id, v, &bc);
	}
	if (rc)
		return rc;
	if (bc.bandwidth && bc.ranks < 2)
		return cli_usage_error("bench", "--bandwidth needs a peer: --ranks 2 or more");
	if (bc.bandwidth && (rc = check_blocks(&bc)))
		return rc;
	run = find_command(argv[0]);
	return run ? run(&bc) : cli_usage_error("bench", "unknown command '%s'", argv[0]);
}
