/* SPDX-License-Identifier: Apache-2.0 */
/* The keeper tests' helpers (keeperproc.c): `sharedseg keep` in a child,
 * heard through its stderr (its own words are the barriers), and a group
 * of two forked ranks on a keeper. */
#ifndef SSEG_KEEPERPROC_H
#define SSEG_KEEPERPROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sharedseg.h"

#define MIB (1ull << 20)

/* Once, in the test's main process: names unique to it from then on. */
void keeper_test_init(void);
/* Keeper names unique to this process ("kt-a" becomes "kt<pid>-a" in
 * text), so that copies of a test run at once; one of 8 static buffers. */
const char *K(const char *text);

struct keeper_proc {
	pid_t pid;
	int err; /* its stderr */
	char said[8192];
	size_t n;
};

/* The path of keeper's socket, in this user's runtime directory. */
void keeper_socket_path(const char *keeper, char *buf, size_t len);
/* Reads its stderr until needle shows. */
void hear(struct keeper_proc *k, const char *needle);
/* `sharedseg keep --name NAME`, its stderr to k->err; keeper_start also
 * waits for its word that it runs. */
void keeper_spawn(struct keeper_proc *k, const char *name);
void keeper_start(struct keeper_proc *k, const char *name);
/* SIGTERM: its exit status; SIGKILL: 128 + 9. */
int keeper_stop(struct keeper_proc *k, int sig);

struct rank_job {
	const char *name, *keeper;
	uint64_t size;
	int rank;
	int write;      /* the owner fills the pattern */
	int expect_kept; /* owner's info.kept */
	int expect;     /* 1: every rank reads the pattern; 0: zeros */
	int timeout_ms; /* the create's and the local group's (0: their defaults) */
	const char *says; /* owner: what the library must have said, or NULL */
	char log[4096]; /* what the library said (this process) */
};

/* The library's messages, into the job's log. */
void keep_log(enum sseg_log_level level, const char *message, void *ctx);
/* One rank of a group of two on a keeper (a tu_fork function). */
int rank_main(void *arg);
/* Both ranks, forked; the owner checks that it heard says (or NULL). */
void group_says(const char *name, const char *keeper, uint64_t size, int write, int kept,
		int expect, const char *says);
void group(const char *name, const char *keeper, uint64_t size, int write, int kept,
	   int expect);

#endif
