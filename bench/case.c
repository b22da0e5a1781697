/* SPDX-License-Identifier: Apache-2.0 */
/* One case: for every repetition, fork the ranks, pace them through the
 * phases, sample the host's memory between phases, collect the reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "group.h"
#include "hostmem.h"
#include "kernels.h"
#include "report.h"

/* A rank's state through one repetition. */
struct rank_run {
	const struct bench_case *bc;
	struct mech_ctx ctx;
	struct mech_map map;
	struct rank_report *rep;
};

void usage_now(struct usage *u)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	u->user_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
	u->sys_s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
	u->minflt = (double)ru.ru_minflt;
	u->preempted = (double)ru.ru_nivcsw;
}

void usage_since(struct usage *u)
{
	struct usage now;

	usage_now(&now);
	u->user_s = now.user_s - u->user_s;
	u->sys_s = now.sys_s - u->sys_s;
	u->minflt = now.minflt - u->minflt;
	u->preempted = now.preempted - u->preempted;
}

/* Usable since open; resident now, or once populate=background's work is
 * done (the owner waits for it, the others watch the count). With
 * --read-during the reader first reads the segment while it runs. */
static int phase_resident(struct rank_run *run)
{
	const struct bench_case *bc = run->bc;
	struct rank_report *rep = run->rep;
	struct sseg_info info = { .sz = sizeof(info) };

	rep->t_resident = rep->t_ready;
	if (bc->read_during && run->ctx.rank == reader_rank(bc))
		rep->during_read_s = time_read(run->map.base, run->map.len);
	if (!run->map.seg || bc->populate != SSEG_POPULATE_BACKGROUND)
		return 1;
	if (sseg_populate_wait(run->map.seg, -1) || sseg_info(run->map.seg, &info)) {
		snprintf(run->map.error, sizeof(run->map.error), "populate=background: %s",
			 sseg_last_error());
		return 0;
	}
	/* The work started as the owner's complete returned; its seconds,
	 * not this wait's end, which a read here may have delayed. */
	if (info.is_owner)
		rep->t_resident = rep->t_ready + info.populate_s;
	return 1;
}

static int phase_open(struct rank_run *run)
{
	struct rank_report *rep = run->rep;
	int rc;

	rep->page_tables = -(double)own_page_tables();
	usage_now(&rep->create);
	rep->t_start = now_s();
	rc = run->bc->mech->open(&run->ctx, &run->map);
	rep->t_ready = now_s();
	usage_since(&rep->create);
	rep->create_s = run->map.create_s;
	rep->attach_s = run->map.attach_s;
	rep->opened = 1;
	return rc == 0;
}

/* A private buffer of the segment's kind, populated by this rank, then
 * read once: what the first peer's read of the segment is set against. */
static int private_first_read(struct rank_run *run)
{
	struct mapping m;
	double huge;
	int rc = map_private(run->bc->pages, run->bc->size, &m);

	if (rc)
		return !mech_fail(&run->map, "the private buffer the first read is set against", rc);
	touch_write(m.base, m.len);
	run->rep->private_read_s = time_read(m.base, run->bc->size);
	snprintf(run->rep->private_pages, sizeof(run->rep->private_pages), "%s",
		 pages_obtained(m.base, m.len, &huge));
	unmap(&m);
	return 1;
}

static int phase_first_read(struct rank_run *run)
{
	const struct bench_case *bc = run->bc;

	if (run->ctx.rank != reader_rank(bc) || bc->touch == TOUCH_NONE)
		return 1;
	usage_now(&run->rep->read);
	run->rep->read_s = time_read(run->map.base, run->map.len);
	usage_since(&run->rep->read);
	run->rep->second_read_s = time_read(run->map.base, run->map.len);
	run->rep->smaps_s = smaps_read_seconds(&run->rep->vmas);
	if (bc->mech->shared && bc->ranks > 1)
		return private_first_read(run);
	return 1;
}

/* Every rank faults the whole segment in, then says what it obtained. */
static int phase_touch(struct rank_run *run)
{
	const struct bench_case *bc = run->bc;
	bool reader = run->ctx.rank == reader_rank(bc);

	if (bc->touch == TOUCH_ALL && !reader)
		touch_read(run->map.base, run->map.len);
	if (bc->touch != TOUCH_NONE || run->ctx.rank == 0)
		snprintf(run->rep->pages, sizeof(run->rep->pages), "%s",
			 pages_obtained(run->map.base, run->map.len, &run->rep->huge_fraction));
	run->rep->page_tables += (double)own_page_tables();
	return 1;
}

static int phase_bw_peer(struct rank_run *run)
{
	if (!run->bc->bandwidth || run->ctx.rank != 1)
		return 1;
	return !bw_measure(run->bc, run->map.base, true, &run->rep->bw, run->map.error,
			   (int)sizeof(run->map.error));
}

static int phase_bw_owner(struct rank_run *run)
{
	if (!run->bc->bandwidth || run->ctx.rank != 0 || run->bc->ranks < 2)
		return 1;
	return !bw_measure(run->bc, run->map.base, false, &run->rep->bw, run->map.error,
			   (int)sizeof(run->map.error));
}

static const struct phase {
	int (*work)(struct rank_run *run); /* 1 ok, 0 failed (map.error says why) */
	enum sample sample;
} phases[] = {
	{ NULL, SAMPLE_BEFORE },
	{ phase_open, SAMPLE_READY },
	{ phase_resident, SAMPLE_NONE },
	{ phase_first_read, SAMPLE_NONE },
	{ phase_touch, SAMPLE_HELD },
	{ phase_bw_peer, SAMPLE_NONE },
	{ phase_bw_owner, SAMPLE_NONE },
};

#define NPHASES (sizeof(phases) / sizeof(phases[0]))

/* Every phase on the rank side; the work stops at the first failure, the
 * steps go on so that no member waits for one that left. */
static int run_phases(struct rank_run *run, struct sseg_local_group *ctl)
{
	int members = run->bc->ranks + 1, all_ok = 1, ok = 1;

	for (size_t i = 0; i < NPHASES; i++) {
		int st;

		if (all_ok && phases[i].work)
			ok = phases[i].work(run);
		st = group_step(ctl, members, ok);
		if (st >= 0 && phases[i].sample != SAMPLE_NONE)
			st = group_step(ctl, members, ok);
		if (st < 0)
			return -1;
		all_ok = st;
	}
	return 0;
}

static int rank_body(const struct rank_env *env, void *arg)
{
	const struct bench_case *bc = arg;
	struct rank_run run = { .bc = bc, .map = { .fd = -1 } };
	struct rank_report *all = calloc((size_t)bc->ranks + 1, sizeof(*all));
	struct rank_report *rep = calloc(1, sizeof(*rep));
	int rc = 1;

	if (!all || !rep)
		goto out;
	run.rep = rep;
	run.ctx = (struct mech_ctx){ .bc = bc, .rank = env->rank, .group = env->group,
				     .name = env->name };
	if (run_phases(&run, env->ctl))
		goto out;
	bc->mech->close(&run.ctx, &run.map);
	rep->ok = !run.map.error[0];
	snprintf(rep->error, sizeof(rep->error), "%s", run.map.error);
	rc = sseg_local_allgather(rep, all, sizeof(*rep), env->ctl) ? 1 : 0;
out:
	free(all);
	free(rep);
	return rc;
}

/* The parent's side of one repetition. */
static int parent_phases(struct group *g, struct hostmem samples[3])
{
	int members = g->ranks + 1;

	for (size_t i = 0; i < NPHASES; i++) {
		if (group_step(g->ctl, members, 1) < 0)
			return -1;
		if (phases[i].sample == SAMPLE_NONE)
			continue;
		hostmem_read(&samples[phases[i].sample - SAMPLE_BEFORE]);
		if (group_step(g->ctl, members, 1) < 0)
			return -1;
	}
	return 0;
}

/* Every failing rank's message, on stderr; 0 when every rank is ok. */
static int check_reports(const struct rank_report *reps, int ranks)
{
	int rc = 0;

	for (int r = 0; r < ranks; r++)
		if (!reps[r].ok) {
			fprintf(stderr, "sharedseg bench: rank %d: %s\n", r, reps[r].error);
			rc = -1;
		}
	return rc;
}

static int one_rep(const struct bench_case *bc, int rep, struct results *res)
{
	struct rank_report *all = calloc((size_t)bc->ranks + 1, sizeof(*all));
	struct hostmem samples[3];
	char name[40], leftover[GROUP_PATH_MAX];
	struct group g;
	int rc = -1;

	snprintf(name, sizeof(name), "sseg-bench-%d-%d", (int)getpid(), rep);
	mech_named_path(bc->mech, name, leftover, sizeof(leftover));
	if (!all || group_start(&g, bc->ranks, name, leftover, rank_body, (void *)bc))
		goto out;
	if (parent_phases(&g, samples) ||
	    sseg_local_allgather(&all[bc->ranks], all, sizeof(*all), g.ctl)) {
		fprintf(stderr, "sharedseg bench: the control group broke: %s\n", sseg_last_error());
		group_abort(&g);
		goto out;
	}
	rc = group_finish(&g);
	/* the parent is member 0: rank r's report is at r + 1 */
	if (!rc)
		rc = check_reports(all + 1, bc->ranks);
	if (!rc && res)
		results_add(res, all + 1, &samples[0], &samples[1], &samples[2]);
out:
	free(all);
	return rc;
}

/* The most a case holds at once: the mechanism's memory (one segment, or
 * a buffer a rank), and beside it the largest of the bench's own buffers:
 * the bandwidth phase's, else the one the first read is set against. */
static void case_need(const struct bench_case *bc, struct room_need *n)
{
	enum sseg_pages seg = room_segment_pages(bc->pages, bc->size);

	for (int r = 0; r < (bc->mech->shared ? 1 : bc->ranks); r++)
		room_hold(n, seg, bc->size);
	n->dir = bc->mech->named_in;
	n->in_dir = pages_round(seg, bc->size);
	if (bc->bandwidth)
		bw_need(bc, n);
	else if (bc->mech->shared && bc->ranks > 1 && bc->touch != TOUCH_NONE)
		room_hold(n, bc->pages, bc->size);
}

/* 0 when the machine can run the case, else 2 with one sentence why. */
static int case_fits(const struct bench_case *bc)
{
	const char *why = bc->mech->refuses(bc->pages);
	struct room_need need = { 0 };
	char what[96];

	if (why) {
		fprintf(stderr, "sharedseg bench: %s with pages=%s: %s\n", bc->mech->label,
			sseg_pages_name(bc->pages), why);
		return 2;
	}
	case_need(bc, &need);
	snprintf(what, sizeof(what), "case --mechanism %s --ranks %d", bc->mech->name, bc->ranks);
	return room_check(&need, what, bc->size);
}

int case_run(const struct bench_case *bc)
{
	struct results *res;
	int rc = case_fits(bc);

	if (rc)
		return rc;
	res = results_new(bc);
	if (!res)
		return 1;
	/* The bandwidth phase repeats and warms up inside one group. */
	for (int i = 0; !rc && !bc->bandwidth && i < bc->warmup; i++)
		rc = one_rep(bc, 1000 + i, NULL);
	for (int i = 0; !rc && i < (bc->bandwidth ? 1 : bc->reps); i++)
		rc = one_rep(bc, i, res);
	if (!rc)
		results_print(res);
	results_free(res);
	return rc ? 1 : 0;
}
