/* SPDX-License-Identifier: Apache-2.0 */
/* Four processes share one segment through the built-in local exchange:
 * the owner writes, every peer reads it and writes its mark, the owner reads
 * the marks. Also with spread population and with read-only peers. */
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define RANKS 4
#define SZ (16u << 20)

struct job {
	char name[64];
	int rank;
	enum sseg_populate populate;
	uint32_t flags;
};

static int barrier(struct sseg_local_group *g)
{
	char mine = 1, all[RANKS];

	return sseg_local_allgather(&mine, all, 1, g);
}

/* A child that writes to a read-only mapping must die of SIGSEGV. */
static int write_faults(volatile unsigned char *p)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL); /* a sanitizer's handler would exit(1) */
		p[0] = 1;
		_exit(0);
	}
	waitpid(pid, &status, 0);
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static int rank_main(void *arg)
{
	struct job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = SZ, .world_size = RANKS, .rank = j->rank,
		  .pages = SSEG_PAGES_BASE, .populate = j->populate, .flags = j->flags,
		  .timeout_ms = 10000);
	struct sseg_local_group *g;
	unsigned char *p;
	sseg_t *seg;
	uint64_t slice = SZ / RANKS;

	CHECK_RC(sseg_local_group_open(j->name, j->rank, RANKS, 10000, &g), 0);
	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	p = sseg_base(seg);
	if (j->rank == 0)
		for (uint64_t i = 0; i < SZ; i++)
			p[i] = tu_pattern(0, i);
	CHECK_RC(barrier(g), 0);
	for (uint64_t i = 0; i < SZ; i++)
		if (p[i] != tu_pattern(0, i)) {
			fprintf(stderr, "rank %d: byte %llu differs\n", j->rank,
				(unsigned long long)i);
			return 1;
		}
	CHECK_RC(barrier(g), 0);
	if (j->flags & SSEG_F_READONLY_PEERS) {
		if (j->rank != 0) {
			CHECK(write_faults(p));
			/* F_SEAL_FUTURE_WRITE: no way back to a writable mapping. */
			CHECK(mprotect(p, 4096, PROT_READ | PROT_WRITE) == -1 && errno == EACCES);
		}
		else
			for (int r = 1; r < RANKS; r++)
				p[r * slice] = (unsigned char)(0xa0 + r);
	} else if (j->rank != 0) {
		p[j->rank * slice] = (unsigned char)(0xa0 + j->rank);
	}
	CHECK_RC(barrier(g), 0);
	for (int r = 1; r < RANKS; r++)
		CHECK(p[r * slice] == 0xa0 + r);
	CHECK_RC(barrier(g), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	return 0;
}

static void run_group(enum sseg_populate populate, uint32_t flags)
{
	struct job jobs[RANKS];
	pid_t pids[RANKS];
	char name[64];

	tu_name(name, sizeof(name), "local");
	for (int r = 0; r < RANKS; r++) {
		jobs[r] = (struct job){ .rank = r, .populate = populate, .flags = flags };
		snprintf(jobs[r].name, sizeof(jobs[r].name), "%s", name);
		pids[r] = tu_fork(rank_main, &jobs[r]);
	}
	for (int r = 0; r < RANKS; r++) {
		int st = tu_wait(pids[r], 60000);

		if (st != 0) {
			fprintf(stderr, "rank %d exited with %d (populate=%s flags=%u)\n", r, st,
				sseg_populate_name(populate), flags);
			exit(1);
		}
	}
}

int main(void)
{
	run_group(SSEG_POPULATE_OWNER, 0);
	run_group(SSEG_POPULATE_SPREAD, 0);
	run_group(SSEG_POPULATE_LAZY, SSEG_F_READONLY_PEERS);
	printf("local_group: ok\n");
	return 0;
}
