/* SPDX-License-Identifier: Apache-2.0 */
/* A process of another uid (stranger.c), kept alive while a test looks at
 * what it left on the host: `sharedseg ls` run by root against an ordinary
 * local user. Needs root. */
#ifndef SSEG_STRANGER_H
#define SSEG_STRANGER_H

#include <stdbool.h>
#include <sys/types.h>

#define STRANGER_UID 65534 /* nobody */

struct stranger {
	int (*act)(void *arg); /* runs as STRANGER_UID; 0 when it is set up */
	void *arg;
	int fds;               /* how many descriptors it may need */
	int ready[2], release[2];
	pid_t pid;
};

/* Forks it: it becomes STRANGER_UID and runs act; stranger_ready waits
 * for that (a child that failed ends the wait: the check fails). */
void stranger_fork(struct stranger *s);
void stranger_ready(struct stranger *s);
/* Both of the above. */
void stranger_start(struct stranger *s);
/* Lets it exit and reaps it. */
void stranger_stop(struct stranger *s);

/* A memfd of that name, held, and mapped when map (one page); -1. */
int stranger_hold_memfd(const char *name, bool map);

#endif
