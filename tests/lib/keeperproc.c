/* SPDX-License-Identifier: Apache-2.0 */
/* A keeper run as the user runs it (`sharedseg keep`), heard through its
 * stderr, and groups of two forked ranks on it: the keeper tests'
 * helpers (keeperproc.h). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "keeper_wire.h"
#include "keeperproc.h"
#include "os/named.h"
#include "testutil.h"

static pid_t test_pid; /* the main process's, also in its children */

void keeper_test_init(void)
{
	test_pid = getpid();
}

const char *K(const char *text)
{
	static char bufs[8][512];
	static int next;
	char *out = bufs[next++ % 8], tag[32];
	size_t n = 0;

	snprintf(tag, sizeof(tag), "kt%d-", (int)test_pid);
	while (*text && n < sizeof(bufs[0]) - 32) {
		if (!strncmp(text, "kt-", 3)) {
			n += (size_t)snprintf(out + n, sizeof(bufs[0]) - n, "%s", tag);
			text += 3;
		} else {
			out[n++] = *text++;
		}
	}
	out[n] = '\0';
	return out;
}

void keeper_socket_path(const char *keeper, char *buf, size_t len)
{
	char dir[SSEG_OS_NAMED_PATH], file[96];

	CHECK_RC(sseg_os_rundir(dir, sizeof(dir)), 0);
	sseg_keep_socket(keeper, file, sizeof(file));
	snprintf(buf, len, "%s/%s", dir, file);
}

/* Reads its stderr until needle shows (the keeper's own word: a barrier). */
void hear(struct keeper_proc *k, const char *needle)
{
	ssize_t got;

	k->said[k->n] = '\0';
	while (!strstr(k->said, needle)) {
		CHECK(k->n < sizeof(k->said) - 1);
		got = read(k->err, k->said + k->n, sizeof(k->said) - 1 - k->n);
		CHECK(got > 0);
		k->n += (size_t)got;
		k->said[k->n] = '\0';
	}
}

void keeper_spawn(struct keeper_proc *k, const char *name)
{
	int fds[2];

	memset(k, 0, sizeof(*k));
	CHECK(pipe(fds) == 0);
	k->pid = fork();
	CHECK(k->pid >= 0);
	if (k->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves no keeper */
		dup2(fds[1], STDERR_FILENO);
		close(fds[0]);
		execl(tu_build_file("sharedseg"), "sharedseg", "keep", "--name", name, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	k->err = fds[0];
}

void keeper_start(struct keeper_proc *k, const char *name)
{
	char running[128];

	keeper_spawn(k, name);
	snprintf(running, sizeof(running), "keeper '%s' runs", name);
	hear(k, running);
}

/* SIGTERM: its exit status; SIGKILL: 128 + 9. */
int keeper_stop(struct keeper_proc *k, int sig)
{
	int rc;

	CHECK(kill(k->pid, sig) == 0);
	rc = tu_wait(k->pid, 10000);
	if (sig == SIGTERM)
		hear(k, "let go");
	close(k->err);
	return rc;
}

/* ---- one group of two ranks (forked), on one keeper ---- */

void keep_log(enum sseg_log_level level, const char *message, void *ctx)
{
	struct rank_job *j = ctx;
	size_t n = strlen(j->log);

	(void)level;
	snprintf(j->log + n, sizeof(j->log) - n, "%s\n", message);
}

int rank_main(void *arg)
{
	struct rank_job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = j->size, .world_size = 2, .rank = j->rank,
		  .pages = SSEG_PAGES_BASE, .populate = SSEG_POPULATE_OWNER, .keeper = j->keeper,
		  .timeout_ms = j->timeout_ms);
	struct sseg_info info = { .sz = sizeof(info) };
	struct sseg_local_group *g;
	unsigned char *p;
	sseg_t *seg;

	sseg_set_log(keep_log, j);
	sseg_set_log_level(SSEG_LOG_INFO);
	CHECK_RC(sseg_local_group_open(j->name, j->rank, 2, j->timeout_ms ? j->timeout_ms : 30000,
					&g), 0);
	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	CHECK_RC(sseg_info(seg, &info), 0);
	CHECK(info.kept == (j->rank == 0 ? j->expect_kept : 0));
	p = sseg_base(seg);
	/* In a group that writes, the owner writes while its peer may read. */
	for (uint64_t off = 0; !j->write && off < j->size; off += 4096)
		CHECK(p[off] == (j->expect ? tu_pattern(0, off) : 0));
	if (j->write && j->rank == 0)
		for (uint64_t off = 0; off < j->size; off += 4096)
			p[off] = tu_pattern(0, off);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	if (j->rank == 0 && j->says && !strstr(j->log, j->says)) {
		fprintf(stderr, "the owner heard:\n%s", j->log);
		CHECK(!"the owner heard what it should");
	}
	return 0;
}

/* Both ranks, forked; the owner checks what it heard itself. */
void group_says(const char *name, const char *keeper, uint64_t size, int write, int kept,
		       int expect, const char *says)
{
	struct rank_job j[2];
	pid_t pid[2];

	for (int r = 0; r < 2; r++) {
		j[r] = (struct rank_job){ .name = name, .keeper = keeper, .size = size, .rank = r,
					  .write = write, .expect_kept = kept,
					  .expect = expect, .says = says };
		pid[r] = tu_fork(rank_main, &j[r]);
	}
	for (int r = 0; r < 2; r++)
		CHECK(tu_wait(pid[r], 60000) == 0);
}

void group(const char *name, const char *keeper, uint64_t size, int write, int kept,
		  int expect)
{
	group_says(name, keeper, size, write, kept, expect, NULL);
}

