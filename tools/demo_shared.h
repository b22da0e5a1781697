/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg demo: what the parent, the ranks and the report share. */
#ifndef SSEG_CLI_DEMO_SHARED_H
#define SSEG_CLI_DEMO_SHARED_H

#include "cli.h"

struct demo_config {
	char name[SSEG_NAME_MAX + 1];
	int ranks;
	uint64_t size;
	enum sseg_backend backend;
	enum sseg_pages pages;
	enum sseg_populate populate;
	enum sseg_numa numa;
	int numa_node;
	int threads;
	int timeout_ms;       /* --timeout */
	int wait_ms;          /* every wait's: the timeout and the population's allowance */
	unsigned given;       /* 1 << OPT_x: options the user gave */
	bool readonly_peers;
	bool host_register;
	int gpus;
	bool json;
	struct host_mem baseline; /* read by the parent before the ranks start, for
				   * the progress line */
};

/* What a rank tells the parent: one fixed-size record, written with one
 * write() to a pipe all ranks share (smaller than PIPE_BUF, so atomic). */
struct rank_report {
	int rank;
	bool opened;          /* sseg_open succeeded, info below is valid */
	bool verified;        /* this rank's check of the bytes passed */
	bool failed;          /* error holds why */
	enum sseg_backend backend;
	enum sseg_pages pages;
	uint64_t page_size;
	int pages_verified;
	uint64_t huge_bytes;
	uint64_t numa_nodes;
	double create_s;
	double complete_s;
	double populate_s;
	double resident_s;    /* populate=background: open's return to resident */
	bool measured;        /* its mapping was found in its smaps */
	uint64_t rss;         /* this rank's mapping, from smaps: Rss + HugeTLB pages */
	uint64_t pss;         /* its share: Pss + HugeTLB pages, shared ones / ranks */
	char pages_reason[320];
	char error[512];
};

/* One write() of a report must stay atomic on the shared pipe. */
_Static_assert(sizeof(struct rank_report) <= 4096, "a rank's report fits PIPE_BUF");

/* How long the parent waits for the ranks before killing them: every wait
 * the ranks make is bounded by the timeout; writing and checking the bytes
 * takes a few seconds per GiB. (A fact of the configuration, here, so that
 * the run and its report both read it without calling each other.) */
static inline double demo_run_bound_s(const struct demo_config *c)
{
	return c->wait_ms / 1000.0 + 10.0 + 5.0 * (double)(c->size >> 30);
}

/* A rank's whole life; returns its exit status. */
int demo_rank_main(const struct demo_config *c, int rank, int report_fd);

/* The results of every rank, gathered by the parent. */
struct demo_result {
	struct rank_report *reports; /* index = rank */
	bool *reported;
	char **exit_note;            /* why a rank ended without a report, or NULL */
	bool timed_out;
};

bool demo_all_verified(const struct demo_config *c, const struct demo_result *r);
void demo_print_table(const struct demo_config *c, const struct demo_result *r);
void demo_print_json(const struct demo_config *c, const struct demo_result *r);
/* The errors on stderr, one line each, each distinct message once. */
void demo_print_errors(const struct demo_config *c, const struct demo_result *r);

#endif
