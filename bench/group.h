/* SPDX-License-Identifier: Apache-2.0 */
/* N rank processes and the parent that measures them. Two local groups:
 * the control group (the parent is member 0, rank r is member r + 1) that
 * paces the phases and carries the reports, and the ranks' own group for
 * the mechanisms' exchanges. */
#ifndef BENCH_GROUP_H
#define BENCH_GROUP_H

#include <sys/types.h>

#include "sharedseg.h"

#define GROUP_MAX_RANKS 64
#define GROUP_PATH_MAX 128

struct rank_env {
	int rank;
	int ranks;
	struct sseg_local_group *ctl;
	struct sseg_local_group *group;
	const char *name;
};

typedef int (*rank_fn)(const struct rank_env *env, void *arg);

struct group {
	int ranks;
	pid_t pids[GROUP_MAX_RANKS];
	int started;
	struct sseg_local_group *ctl;
	char name[48];
	char leftover[GROUP_PATH_MAX]; /* a file the ranks may name; "" for none */
};

/* Forks ranks processes, each running fn after joining both groups, and
 * joins the control group as member 0. 0, or -1 with a message on stderr.
 * leftover ("" for none) is a file the ranks may create and die before
 * removing: it is unlinked once every rank is gone. Until group_finish,
 * SIGINT, SIGTERM and SIGHUP (unless ignored) kill and reap the ranks and
 * unlink leftover first, then do what they did before. */
int group_start(struct group *g, int ranks, const char *name, const char *leftover, rank_fn fn,
		void *arg);
/* Leaves the control group, reaps every rank and unlinks the leftover
 * file: 0 when every rank exited 0. */
int group_finish(struct group *g);
/* Kills every rank, then group_finish: after the control group broke. */
void group_abort(struct group *g);

/* A step every member takes in turn: an all-gather of each member's ok.
 * 1 when every member is ok, 0 when one is not, -1 when the exchange
 * itself failed (the group is then unusable). */
int group_step(struct sseg_local_group *ctl, int members, int ok);

#endif
