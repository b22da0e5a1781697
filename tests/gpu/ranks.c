/* SPDX-License-Identifier: Apache-2.0 */
/* Ranks: processes forked before any of them loads the driver, their records and bench lines. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lines.h"
#include "ranks.h"

void send_record(int out, const struct record *rec)
{
	if (write(out, rec, sizeof(*rec)) != (ssize_t)sizeof(*rec))
		perror("gpu_check: write to the parent");
}

static int read_records(int fd, struct record *records, int max)
{
	int n = 0;
	struct record rec;

	while (read(fd, &rec, sizeof(rec)) == (ssize_t)sizeof(rec))
		if (n < max)
			records[n++] = rec;
	return n;
}

/* Runs fn in n processes; returns how many failed, and their records. */
int ranks_run(int n, rank_fn fn, void *arg, struct record *records, int max, int *nrec)
{
	pid_t pids[MAX_RANKS];
	int fds[2], failed = 0;

	if (pipe2(fds, O_CLOEXEC))
		return n;
	fflush(stdout);
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			close(fds[0]);
			_exit(fn(r, arg, fds[1]));
		}
	}
	close(fds[1]);
	*nrec = read_records(fds[0], records, max);
	close(fds[0]);
	for (int r = 0; r < n; r++) {
		int st = 0;

		if (pids[r] < 0 || waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			failed++;
	}
	return failed;
}

void group_name(char *buf, size_t len, const char *what)
{
	static int seq;

	snprintf(buf, len, "gpu-check-%d-%s-%d", (int)getpid(), what, seq++);
}

int barrier(struct sseg_local_group *g)
{
	char mine = 1, all[MAX_RANKS];

	return sseg_local_allgather(&mine, all, 1, g);
}

void describe_pages(const struct sseg_info *info, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%llu", sseg_pages_name(info->pages),
		 (unsigned long long)info->page_size);
}

/* ---- bench lines: samples from every rank, one line per series ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int same_series(const struct record *a, const struct record *b)
{
	return !strcmp(a->bench, b->bench) && !strcmp(a->mechanism, b->mechanism) &&
	       a->size == b->size;
}

static void print_series(const struct record *recs, int n, int first, const char *unit)
{
	double all[MAX_RANKS * MAX_REPS];
	int count = 0, ranks = 0;
	struct json j;

	for (int i = first; i < n; i++) {
		if (!same_series(&recs[i], &recs[first]))
			continue;
		ranks++;
		for (int k = 0; k < recs[i].reps && count < MAX_RANKS * MAX_REPS; k++)
			all[count++] = recs[i].values[k];
	}
	if (!count)
		return;
	qsort(all, (size_t)count, sizeof(all[0]), cmp_double);
	j_begin(&j, NULL);
	j_int(&j, "schema", 1);
	j_str(&j, "bench", recs[first].bench);
	j_str(&j, "mechanism", recs[first].mechanism);
	j_int(&j, "ranks", ranks);
	j_int(&j, "size", (long long)recs[first].size);
	j_str(&j, "pages_requested", recs[first].pages_requested);
	j_str(&j, "pages_obtained", recs[first].pages_obtained);
	j_str(&j, "unit", unit);
	j_num(&j, "min", all[0]);
	j_num(&j, "median", all[count / 2]);
	j_num(&j, "max", all[count - 1]);
	j_int(&j, "reps", recs[first].reps);
	j_end(&j);
}

/* One line per series, in the order the series first appear. */
void print_all_series(const struct record *recs, int n, const char *unit)
{
	for (int i = 0; i < n; i++) {
		int seen = 0;

		for (int k = 0; k < i && !seen; k++)
			seen = recs[k].bench[0] && same_series(&recs[k], &recs[i]);
		if (recs[i].bench[0] && !seen)
			print_series(recs, n, i, unit);
	}
}

void report_failures(const char *check, const struct record *recs, int n, int failed)
{
	struct json j;

	for (int i = 0; i < n; i++) {
		if (recs[i].ok || recs[i].bench[0])
			continue;
		j_begin(&j, check);
		j_str(&j, "result", "fail");
		j_int(&j, "rank", recs[i].rank);
		j_str(&j, "error", recs[i].error);
		j_end(&j);
	}
	if (failed && !n) {
		j_begin(&j, check);
		j_str(&j, "result", "fail");
		j_str(&j, "error", "the ranks died without a word");
		j_end(&j);
	}
}
