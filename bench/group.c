/* SPDX-License-Identifier: Apache-2.0 */
/* The rank processes and their two local groups. */
#define _GNU_SOURCE /* prctl */
#include <errno.h>
#include <stdbool.h>
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

/* ---- a signal that ends the parent ends its group first ---- */

/* Ctrl-C, kill, a closed terminal */
static const int ending[] = { SIGINT, SIGTERM, SIGHUP };
#define NENDING (sizeof(ending) / sizeof(ending[0]))
static struct sigaction before[NENDING];
static bool caught[NENDING];
/* The group a signal ends: one at a time in a process. */
static struct group *volatile running;

static void let_signals_be(void)
{
	running = NULL;
	for (size_t i = 0; i < NENDING; i++) {
		if (caught[i])
			sigaction(ending[i], &before[i], NULL);
		caught[i] = false;
	}
}

/* Unlinks what the ranks may have left; they are all gone. */
static void unlink_leftover(const struct group *g)
{
	if (g->leftover[0])
		unlink(g->leftover);
}

/* The ranks killed and reaped, the leftover unlinked, then the signal
 * again as it was before (the default: this process ends by it). Only
 * async-signal-safe calls. */
static void end_on_signal(int sig)
{
	struct group *g = running;
	int saved = errno;

	if (g) {
		for (int r = 0; r < g->started; r++)
			if (g->pids[r] > 0)
				kill(g->pids[r], SIGKILL);
		for (int r = 0; r < g->started; r++)
			while (g->pids[r] > 0 && waitpid(g->pids[r], NULL, 0) < 0 && errno == EINTR)
				;
		unlink_leftover(g);
	}
	let_signals_be();
	raise(sig); /* blocked here: delivered as the handler returns */
	errno = saved;
}

static void end_group_on_signals(struct group *g)
{
	struct sigaction act = { .sa_handler = end_on_signal };

	sigemptyset(&act.sa_mask);
	for (size_t i = 0; i < NENDING; i++)
		sigaddset(&act.sa_mask, ending[i]);
	running = g;
	for (size_t i = 0; i < NENDING; i++) {
		/* one ignored stays ignored: a background job's SIGINT */
		if (sigaction(ending[i], NULL, &before[i]) || before[i].sa_handler == SIG_IGN)
			continue;
		caught[i] = !sigaction(ending[i], &act, NULL);
	}
}

int group_start(struct group *g, int ranks, const char *name, const char *leftover, rank_fn fn,
		void *arg)
{
	char ctl[SSEG_NAME_MAX + 1];
	pid_t parent = getpid();

	memset(g, 0, sizeof(*g));
	g->ranks = ranks;
	snprintf(g->name, sizeof(g->name), "%s", name);
	snprintf(g->leftover, sizeof(g->leftover), "%s", leftover);
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
	/* After the forks: a rank keeps the default, and dies by the signal. */
	end_group_on_signals(g);
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
	for (int r = 0; r < g->started; r++) {
		if (reap(g->pids[r], r))
			rc = -1;
		g->pids[r] = 0; /* a signal now kills no reused pid */
	}
	g->started = 0;
	unlink_leftover(g);
	let_signals_be();
	return rc;
}

void group_abort(struct group *g)
{
	for (int r = 0; r < g->started; r++)
		if (g->pids[r] > 0)
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
