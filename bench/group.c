/* SPDX-License-Identifier: Apache-2.0 */
/* The rank processes and their two local groups. */
#define _GNU_SOURCE /* prctl */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "group.h"

/* The control group waits out the slowest phase: eight ranks faulting a
 * 4 KiB-page mapping of several GiB on two cores. */
#define CTL_TIMEOUT_MS 600000
#define GROUP_TIMEOUT_MS 120000

static void group_name(const struct group *g, char kind, char *buf, size_t len)
{
	snprintf(buf, len, "%s%c", g->name, kind);
}

static int join(const char *name, int member, int members, int timeout_ms,
		struct sseg_local_group **out)
{
	if (!sseg_local_group_open(name, member, members, timeout_ms, out))
		return 0;
	fprintf(stderr, "sharedseg bench: joining %s as %d of %d: %s\n", name, member, members,
		sseg_last_error());
	*out = NULL;
	return -1;
}

static int rank_main(const struct group *g, int rank, pid_t parent, rank_fn fn, void *arg)
{
	struct rank_env env = { .rank = rank, .ranks = g->ranks, .name = g->name };
	char name[SSEG_NAME_MAX + 1];
	int rc = 1;

	/* A rank never outlives the parent that measures it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		return 1;
	group_name(g, 'c', name, sizeof(name));
	if (join(name, rank + 1, g->ranks + 1, CTL_TIMEOUT_MS, &env.ctl))
		goto out;
	group_name(g, 'g', name, sizeof(name));
	if (join(name, rank, g->ranks, GROUP_TIMEOUT_MS, &env.group))
		goto out;
	rc = fn(&env, arg);
out:
	if (env.group)
		sseg_local_group_close(env.group);
	if (env.ctl)
		sseg_local_group_close(env.ctl);
	return rc;
}


int group_start(struct group *g, int ranks, const char *name, rank_fn fn, void *arg)
{
	char ctl[SSEG_NAME_MAX + 1];
	pid_t parent = getpid();

	memset(g, 0, sizeof(*g));
	g->ranks = ranks;
	snprintf(g->name, sizeof(g->name), "%s", name);
	fflush(NULL);
	for (int r = 0; r < ranks; r++) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(rank_main(g, r, parent, fn, arg));
		if (pid < 0) {
			fprintf(stderr, "sharedseg bench: fork: %s\n", strerror(errno));
			goto fail;
		}
		g->pids[g->started++] = pid;
	}
	group_name(g, 'c', ctl, sizeof(ctl));
	if (join(ctl, 0, ranks + 1, CTL_TIMEOUT_MS, &g->ctl))
		goto fail;
	return 0;
fail:
	group_abort(g);
	return -1;
}

static int reap(pid_t pid, int rank)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFSIGNALED(status)) {
		fprintf(stderr, "sharedseg bench: rank %d was killed by signal %d (%s)\n", rank,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
		return -1;
	}
	return WEXITSTATUS(status) ? -1 : 0;
}

int group_finish(struct group *g)
{
	int rc = 0;

	if (g->ctl)
		sseg_local_group_close(g->ctl);
	g->ctl = NULL;
	for (int r = 0; r < g->started; r++)
		if (reap(g->pids[r], r))
			rc = -1;
	g->started = 0;
	return rc;
}

void group_abort(struct group *g)
{
	for (int r = 0; r < g->started; r++)
		kill(g->pids[r], SIGKILL);
	group_finish(g);
}

int group_step(struct sseg_local_group *ctl, int members, int ok)
{
	unsigned char mine = ok ? 1 : 0, all[GROUP_MAX_RANKS + 1];
	int every = 1;

	if (members > GROUP_MAX_RANKS + 1 || sseg_local_allgather(&mine, all, 1, ctl))
		return -1;
	for (int i = 0; i < members; i++)
		every &= all[i];
	return every;
}
