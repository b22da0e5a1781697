/* SPDX-License-Identifier: Apache-2.0 */
/* `sharedseg bench` without a driver command: a summary of five of the
 * driver's cases (summary.c), printed as text or JSON (summary_print.c). */
#ifndef BENCH_SUMMARY_H
#define BENCH_SUMMARY_H

#include "case.h"
#include "args.h"

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

/* argv[0] is the program; the exit status (0, 1, 2) */
int bench_summary_main(int argc, char **argv);
/* The summary's help and the driver's: the program's --help. */
void bench_summary_help(FILE *out);

void bench_print_text(const struct bench_config *b, const struct bench_results *r);
void bench_print_json(const struct bench_config *b, const struct bench_results *r);

#endif
