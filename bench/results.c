/* SPDX-License-Identifier: Apache-2.0 */
/* The parent's side: every repetition's reports and host samples become
 * the case's rows. */
#include <stdlib.h>
#include <string.h>

#include "report.h"

enum series {
	S_READY, S_CREATE, S_ATTACH, S_READ, S_FACTOR, S_TABLES, S_POPULATED, S_HOST_TABLES,
	S_CREATE_SYS, S_CREATE_FAULTS, S_READ_SYS, S_READ_FAULTS, S_SMAPS, S_PRIVATE_READ,
	S_CREATE_USER, S_CREATE_PREEMPTED, S_STEAL, S_SECOND_READ, S_CPU_ALL, S_RESIDENT,
	S_DURING_READ, S_COUNT
};

struct results {
	const struct bench_case *bc;
	int n;
	double s[S_COUNT][ROW_MAX_REPS];
	char pages[16], pages_owner[16], pages_peers[16], private_pages[16];
	double huge_fraction;
	int vmas;
	struct bw_samples peer_bw, owner_bw;
};

struct results *results_new(const struct bench_case *bc)
{
	struct results *res = calloc(1, sizeof(*res));

	if (res)
		res->bc = bc;
	return res;
}

void results_free(struct results *res)
{
	free(res);
}

/* Page kinds from the least to the most: a row gives the least any rank got. */
static int kind_order(const char *label)
{
	static const char *const order[] = { "base", "mixed", "thp", "hugetlb-2M", "hugetlb-1G" };

	for (int i = 0; i < (int)(sizeof(order) / sizeof(order[0])); i++)
		if (!strcmp(label, order[i]))
			return i;
	return 99; /* unverified: says nothing */
}

static void keep_least(char *kept, const char *label)
{
	if (!kept[0] || kind_order(label) < kind_order(kept))
		snprintf(kept, 16, "%s", label);
}

static void add_pages(struct results *res, const struct rank_report *reps)
{
	res->pages[0] = res->pages_peers[0] = 0;
	snprintf(res->pages_owner, sizeof(res->pages_owner), "%s", reps[0].pages);
	keep_least(res->pages, reps[0].pages);
	res->huge_fraction = reps[0].huge_fraction;
	for (int r = 1; r < res->bc->ranks; r++) {
		keep_least(res->pages_peers, reps[r].pages);
		keep_least(res->pages, reps[r].pages);
	}
}

static double delta(uint64_t after, uint64_t before)
{
	return (double)after - (double)before;
}

/* From the first rank's start to the last rank's return (ready), or to the
 * last rank's pages resident. */
static double span(const struct rank_report *reps, int ranks, bool resident)
{
	double start = reps[0].t_start, end = 0;

	for (int r = 0; r < ranks; r++) {
		double t = resident ? reps[r].t_resident : reps[r].t_ready;

		start = reps[r].t_start < start ? reps[r].t_start : start;
		end = t > end ? t : end;
	}
	return end - start;
}

static void add_owner(struct results *res, int i, const struct rank_report *owner)
{
	res->s[S_CREATE][i] = owner->create_s;
	res->s[S_CREATE_SYS][i] = owner->create.sys_s;
	res->s[S_CREATE_USER][i] = owner->create.user_s;
	res->s[S_CREATE_FAULTS][i] = owner->create.minflt;
	res->s[S_CREATE_PREEMPTED][i] = owner->create.preempted;
	res->owner_bw = owner->bw;
}

static void add_reader(struct results *res, int i, const struct rank_report *reader)
{
	double size = (double)res->bc->size;

	res->s[S_ATTACH][i] = reader->attach_s * 1e3;
	res->s[S_READ][i] = reader->read_s > 0 ? size / reader->read_s / 1e9 : 0;
	res->s[S_READ_SYS][i] = reader->read.sys_s;
	res->s[S_READ_FAULTS][i] = reader->read.minflt;
	res->s[S_SECOND_READ][i] = reader->second_read_s > 0 ? size / reader->second_read_s / 1e9 : 0;
	res->s[S_SMAPS][i] = reader->smaps_s * 1e3;
	res->s[S_DURING_READ][i] = reader->during_read_s > 0 ? size / reader->during_read_s / 1e9 : 0;
	res->s[S_PRIVATE_READ][i] = reader->private_read_s > 0 ?
		size / reader->private_read_s / 1e9 : 0;
	snprintf(res->private_pages, sizeof(res->private_pages), "%s", reader->private_pages);
	res->vmas = reader->vmas;
	res->peer_bw = reader->bw;
}

/* The host samples: the group's rise in memory and page tables. */
static void add_host(struct results *res, int i, const struct hostmem *before,
		     const struct hostmem *ready, const struct hostmem *held)
{
	const struct bench_case *bc = res->bc;
	double size = (double)bc->size, copies = bc->mech->shared ? 1 : bc->ranks;

	res->s[S_STEAL][i] = ready->steal_s - before->steal_s;
	res->s[S_FACTOR][i] = delta(hostmem_total(held), hostmem_total(before)) / size;
	res->s[S_HOST_TABLES][i] = delta(held->page_tables, before->page_tables);
	res->s[S_POPULATED][i] = (delta(hostmem_total(ready), hostmem_total(before)) -
				  delta(ready->page_tables, before->page_tables)) / (size * copies);
}

void results_add(struct results *res, const struct rank_report *reps,
		 const struct hostmem *before, const struct hostmem *ready,
		 const struct hostmem *held)
{
	const struct bench_case *bc = res->bc;
	int i = res->n++;

	res->s[S_READY][i] = span(reps, bc->ranks, false);
	res->s[S_RESIDENT][i] = span(reps, bc->ranks, true);
	res->s[S_TABLES][i] = res->s[S_CPU_ALL][i] = 0;
	for (int r = 0; r < bc->ranks; r++) {
		res->s[S_TABLES][i] += reps[r].page_tables;
		res->s[S_CPU_ALL][i] += reps[r].create.user_s + reps[r].create.sys_s;
	}
	add_owner(res, i, &reps[0]);
	add_reader(res, i, &reps[reader_rank(bc)]);
	add_host(res, i, before, ready, held);
	add_pages(res, reps);
}

/* The fixed part of a row, and what every row of the case says. */
static void begin(const struct results *res, const char *bench, const char *unit,
		  const double *samples)
{
	const struct bench_case *bc = res->bc;
	struct row r = { bench, bc->mech->label, bc->ranks, bc->size,
			 sseg_pages_name(bc->pages), res->pages, unit };

	row_begin(&r, samples, res->n);
	if (bc->mech == &mech_sharedseg) {
		row_str("populate", sseg_populate_name(bc->populate));
		row_num("threads", bc->threads);
	}
	row_str("pages_owner", res->pages_owner);
	if (bc->ranks > 1)
		row_str("pages_peers", res->pages_peers);
	row_num("huge_fraction", res->huge_fraction);
}

static void median_extra(const struct results *res, const char *key, enum series s)
{
	row_num(key, median_of(res->s[s], res->n));
}

static void print_setup(const struct results *res)
{
	const struct bench_case *bc = res->bc;
	double create = median_of(res->s[S_CREATE], res->n);

	begin(res, "ready", "s", res->s[S_READY]);
	median_extra(res, "populated_fraction", S_POPULATED);
	median_extra(res, "steal_s", S_STEAL);
	median_extra(res, "cpu_s_all_ranks", S_CPU_ALL);
	row_end();
	begin(res, "resident", "s", res->s[S_RESIDENT]);
	if (bc->read_during)
		median_extra(res, "during_read_gbps", S_DURING_READ);
	row_end();
	begin(res, "owner_create", "s", res->s[S_CREATE]);
	row_num("rate_gbps", create > 0 ? (double)bc->size / create / 1e9 : 0);
	median_extra(res, "sys_s", S_CREATE_SYS);
	median_extra(res, "user_s", S_CREATE_USER);
	median_extra(res, "minor_faults", S_CREATE_FAULTS);
	median_extra(res, "preempted", S_CREATE_PREEMPTED);
	row_end();
	if (bc->ranks > 1 && bc->mech->attach[0]) {
		begin(res, "peer_attach", "ms", res->s[S_ATTACH]);
		row_str("what", bc->mech->attach);
		if (bc->touch != TOUCH_NONE) {
			median_extra(res, "smaps_read_ms", S_SMAPS);
			row_num("vmas", res->vmas);
		}
		row_end();
	}
}

/* The first read's pair: a private buffer the same rank had just populated. */
static void print_private_read(const struct results *res)
{
	const struct bench_case *bc = res->bc;
	struct row r = { "first_read", mech_private.label, bc->ranks, bc->size,
			 sseg_pages_name(bc->pages), res->private_pages, "GB/s" };

	row_begin(&r, res->s[S_PRIVATE_READ], res->n);
	row_str("role", "private");
	row_str("pair", "peer");
	row_str("paired_with", bc->mech->label);
	row_end();
}

static void print_memory(const struct results *res)
{
	const struct bench_case *bc = res->bc;

	begin(res, "first_read", "GB/s", res->s[S_READ]);
	row_str("role", bc->ranks > 1 ? "peer" : "owner");
	row_str("pair", bc->ranks > 1 ? "peer" : "owner");
	median_extra(res, "sys_s", S_READ_SYS);
	median_extra(res, "minor_faults", S_READ_FAULTS);
	median_extra(res, "second_read_gbps", S_SECOND_READ);
	row_end();
	if (res->private_pages[0])
		print_private_read(res);
	if (bc->touch != TOUCH_ALL)
		return;
	begin(res, "memory_factor", "factor", res->s[S_FACTOR]);
	median_extra(res, "populated_fraction", S_POPULATED);
	row_end();
	begin(res, "page_tables", "bytes", res->s[S_TABLES]);
	row_num("fraction_of_size", median_of(res->s[S_TABLES], res->n) / (double)bc->size);
	median_extra(res, "host_page_tables", S_HOST_TABLES);
	row_end();
}

void results_print(const struct results *res)
{
	if (res->bc->bandwidth) {
		bw_print(res->bc, res->pages, "peer", &res->peer_bw);
		bw_print(res->bc, res->pages, "owner", &res->owner_bw);
		return;
	}
	print_setup(res);
	if (res->bc->touch != TOUCH_NONE)
		print_memory(res);
}
