/* SPDX-License-Identifier: Apache-2.0 */
/* A hostile process for the hostile-peer tests (intruder.c): it connects to
 * an abstract socket or a socket file the way a stranger on the host can
 * (both are listed in /proc/net/unix) and misbehaves in one way, then tells the test
 * what the listener did with each of its connections. It speaks through
 * raw sockets only: nothing of the library runs in it. */
#ifndef SSEG_INTRUDER_H
#define SSEG_INTRUDER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum intrusion {
	INTRUDE_BYTES,   /* sends the bytes (a forged hello), waits for the verdict */
	INTRUDE_GARBAGE, /* random bytes of random lengths, one connection each */
	INTRUDE_SILENT,  /* connects and says nothing, held until released */
	INTRUDE_HALF,    /* the first half of the bytes, then nothing, held */
	INTRUDE_DRIP,    /* the bytes one at a time, 50 ms apart */
	INTRUDE_FLOOD,   /* connects and closes as fast as it can; the group meets a
			  * tenth of the way in */
	INTRUDE_FD_BOMB, /* the bytes with 64 descriptors attached to each send */
};

struct intrusion_plan {
	const char *sock;    /* abstract name, without the leading NUL; or a path */
	enum intrusion kind;
	int count;           /* connections */
	uid_t uid;           /* non-zero: become this user (and group) first */
	uint8_t bytes[64];
	size_t len;
};

/* What the listener did: refused (closed, with or without a message),
 * answered with a descriptor (never acceptable), or nothing yet. */
struct intrusion_tally {
	int tried;
	int connected;
	int refused;
	int fds_received;
	int unanswered;
};

struct intruder {
	pid_t pid;
	int report;  /* read end: "ready", then the tally */
	int release; /* write end: let held connections be judged */
};

/* Forks the intruder and returns once its connections are in place (or
 * its bytes sent; a flood a tenth of the way). */
void intruder_start(struct intruder *in, const struct intrusion_plan *plan);
/* Releases it, collects its tally and reaps it; 0, or -1 when it failed. */
int intruder_finish(struct intruder *in, struct intrusion_tally *tally);

/* A connection to an abstract name, or to a socket file when name is a
 * path (-1 when nobody takes it, or it may not be reached), and a whole
 * send on it (as much as the other side takes). */
int intruder_dial(const char *name);
void intruder_send(int s, const uint8_t *p, size_t n);

/* The channel name of pid's owner, or the group's rendezvous, as anyone
 * reads it in /proc/net/unix: the first name (or path, for a prefix that
 * starts with '/') starting with prefix. */
int intruder_find_socket(const char *prefix, char *name, size_t len);

#endif
