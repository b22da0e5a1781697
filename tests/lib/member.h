/* SPDX-License-Identifier: Apache-2.0 */
/* A rank of the built-in local exchange as a thread (member.c): it joins
 * the group, all-gathers len bytes of its own pattern and leaves, timing
 * itself. The exchange's hostile-peer test and fuzz target run groups of
 * these. */
#ifndef SSEG_MEMBER_H
#define SSEG_MEMBER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MEMBER_MAX_BYTES 256

struct member {
	const char *name;
	int rank;
	int world;
	int timeout_ms;
	size_t len;                      /* bytes each rank contributes */
	int rc;
	double took;
	char error[512];
	uint8_t all[MEMBER_MAX_BYTES];   /* world * len bytes, once gathered */
	pthread_t tid;
	pid_t task;                      /* its kernel thread id, once it runs */
};

/* The byte every rank contributes len times. */
static inline uint8_t member_byte(int rank)
{
	return (uint8_t)(0x40 + rank);
}

/* m's name, rank, world, timeout_ms and len set; the rest is filled. */
void member_start(struct member *m);
void member_join(struct member *m);
/* A rank other than the hub that has sent its hello and waits for the
 * hub's answer: its thread sleeps in poll (/proc/self/task/TID/syscall). */
int member_awaits_hub(const struct member *m);
/* The all-gather's result as it must be: every rank's bytes in its slot
 * (ranks below upto only, when the last ranks' bytes are unknown). */
int member_holds(const struct member *m, int upto);

#endif
