/* SPDX-License-Identifier: Apache-2.0 */
/* A mechanism: one way for the ranks of a group to get host memory of a
 * page kind. The bench times each through the same steps. */
#ifndef BENCH_MECH_H
#define BENCH_MECH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mapping.h"

struct bench_case;

struct mech_ctx {
	const struct bench_case *bc;
	int rank;
	struct sseg_local_group *group; /* the ranks only, for the mechanism's own exchange */
	const char *name;               /* unique to this repetition */
};

/* What open gives one rank, and what close releases. */
struct mech_map {
	void *base;
	uint64_t len;
	double create_s;  /* this rank's allocation and population */
	double attach_s;  /* a peer's: from the owner's handle in hand to mapped */
	struct mapping map;
	int fd;
	sseg_t *seg;
	char path[96];
	char error[320];
};

struct mech_ops {
	const char *name;  /* on the command line */
	const char *label; /* in the rows */
	bool shared;       /* one copy for the group, not one a rank */
	const char *attach; /* what a peer's attach_s times */
	/* The directory the mechanism names a file in (NULL: none): the file
	 * must fit its free space, and the parent unlinks it once the ranks
	 * are gone, however they went. */
	const char *named_in;
	/* NULL when the mechanism can be asked for kind, else why not */
	const char *(*refuses)(enum sseg_pages kind);
	/* 0, or -1 with m->error set; close is then still called */
	int (*open)(const struct mech_ctx *c, struct mech_map *m);
	void (*close)(const struct mech_ctx *c, struct mech_map *m);
};

extern const struct mech_ops mech_sharedseg, mech_private, mech_devshm, mech_procfd;

const struct mech_ops *mech_find(const char *name);
/* Every mechanism's name, for the usage text. */
const char *mech_names(void);

/* The file a mechanism with named_in names for a repetition of that name,
 * in path; "" for a mechanism that names none. */
void mech_named_path(const struct mech_ops *mech, const char *name, char *path, size_t len);
/* For the tests: where SSEG_BENCH_HOLD names point, rank 0 says so on
 * stderr ("... rank 0 (pid N) holds at POINT") and stops itself (SIGSTOP),
 * so that a test can signal or kill a group at that point. */
void mech_hold(const struct mech_ctx *c, const char *point);

/* A step every rank of the group takes: 1 when every rank is ok, else 0
 * with m->error set (this rank's own message is kept). */
int mech_step(const struct mech_ctx *c, struct mech_map *m, int ok);
/* m->error = "what: strerror(err)"; returns -1 */
int mech_fail(struct mech_map *m, const char *what, int err);

#endif
