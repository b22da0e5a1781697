/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg bench: what its files share. Every figure is measured by the
 * benchmarks' driver (bench/); the summary (bench.c, bench_report.c) runs
 * its cases and reads their rows. */
#ifndef SSEG_CLI_BENCH_H
#define SSEG_CLI_BENCH_H

#include "case.h"
#include "cli.h"

struct bench_config {
	uint64_t size;
	enum sseg_pages pages_asked;
	enum sseg_pages pages; /* auto resolved to what the library picks for size */
	int reps;
	bool json;
};

/* One figure of the summary: the row of bench (and role, when not NULL)
 * by mechanism that the driver's case wrote. */
struct bench_figure {
	const char *bench;
	const char *mechanism;
	const char *role;
	/* from the row */
	bool found;
	double min, median; /* in unit */
	char unit[16];
	char pages[32];      /* the page kind obtained */
	char command[256];   /* the driver command that measures it alone */
};

/* Everything the summary shows, (a) to (c). */
struct bench_results {
	struct bench_figure pop1, pop2, private_pop; /* owner_create, seconds */
	struct bench_figure attach;                  /* peer_attach, ms */
	struct bench_figure shared_read, private_read; /* seq_read, GB/s */
};

void bench_print_text(const struct bench_config *b, const struct bench_results *r);
void bench_print_json(const struct bench_config *b, const struct bench_results *r);

/* ---- the benchmarks' driver, bench/ (bench_driver.c) ---- */

/* Whether name is one of the driver's commands: case, limits, ... */
bool bench_driver_command(const char *name);
/* argv[0] is the driver's command */
int bench_driver_main(int argc, char **argv);
void bench_driver_help(FILE *out);
/* The driver's defaults for a case (those of `sharedseg bench case`). */
void bench_case_defaults(struct bench_case *bc);

#endif
