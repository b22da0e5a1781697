/* SPDX-License-Identifier: Apache-2.0 */
/* A segment's keeper as its owner meets it (keeper.c): before allocating,
 * the owner asks the keeper for its segment of the same declaration; after
 * allocating anew, it leaves its own with the keeper. Only a keeper of the
 * same user is asked, in this user's runtime directory, within a share of
 * the create's timeout; a keeper that is not there, slow or refusing costs
 * a warning that says what happens instead, never the segment. The keeper
 * itself: keeper_serve.c. */
#ifndef SSEG_KEEPER_H
#define SSEG_KEEPER_H

#include "keeper_wire.h"

struct sseg;

/* One owner's conversation with its keeper. */
struct sseg_keep_talk {
	double deadline;    /* for every question of it */
	uint32_t hold_flags; /* SSEG_KEEP_REPLACE once a kept segment proved unusable */
	char why[SSEG_KEEP_WHY];
};

enum sseg_keep_answer {
	SSEG_KEEP_ANSWER_KEPT,    /* *fd: the kept memfd, its group's claim on it held */
	SSEG_KEEP_ANSWER_NEW,     /* allocate anew, then leave it with the keeper */
	SSEG_KEEP_ANSWER_UNKEPT,  /* allocate anew, kept by no one (said why) */
};

SSEG_HIDDEN void sseg_keeper_talk_init(const struct sseg *seg, struct sseg_keep_talk *t);
SSEG_HIDDEN enum sseg_keep_answer sseg_keeper_take(struct sseg *seg, struct sseg_keep_talk *t,
						   int *fd, struct sseg_keep_decl *got);
/* Leaves the owner's memfd with the keeper; a refusal or failure is logged
 * with what it means: the segment is kept by no one. */
SSEG_HIDDEN void sseg_keeper_hold(struct sseg *seg, struct sseg_keep_talk *t, int fd);
/* Leaves the memfd fd with keeper, as q (a HOLD) declares it: 0 held;
 * -EPERM refused (the keeper's why in the sentence), -EIO no answer, or
 * the dial's error (-ECONNREFUSED: no keeper runs). */
SSEG_HIDDEN int sseg_keeper_leave(const char *keeper, const struct sseg_keep_msg *q, int fd,
				  double deadline);

/* The deadline of a conversation with a keeper within an open bounded by
 * timeout_ms (0: the default): a share of it, and at most KEEPER_REPLY_S. */
SSEG_HIDDEN double sseg_keeper_deadline(int timeout_ms);
/* sseg_keeper_lend, every wait bounded by deadline. */
SSEG_HIDDEN int sseg_keeper_lend_by(const char *keeper, const char *name, int *fd,
				    uint64_t *size, double deadline);

#endif
