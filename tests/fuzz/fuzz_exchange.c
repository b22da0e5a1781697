/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in local exchange, over its real sockets: a 3-rank group whose
 * hub (rank 0) and rank 1 are threads of this process, and a stranger (or
 * rank 2) whose bytes are the input.
 *
 * Input: a mode byte, then the bytes sent. Mode even: a stranger connects
 * to the group's rendezvous name, sends the bytes as its hello and closes;
 * then the real ranks 1 and 2 join. Mode odd: rank 2 is the fuzzer: it
 * joins with a proper hello, waits for the hub's answer, then sends the
 * bytes as its all-gather frame and data and closes.
 * Invariants: no crash or undefined behaviour; every thread returns within
 * its bounds; a rank that succeeds holds every rank's bytes where they
 * belong; no descriptor is left open. */
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "fuzz.h"
#include "intruder.h"
#include "member.h"
#include "testutil.h"

#define WORLD 3
#define LEN 8
#define GROUP_MS 100
/* A member waits for joining, then for the round, each GROUP_MS plus the
 * exchange's one-second grace for non-hub ranks; the rest is slack for a
 * loaded machine (libFuzzer's -timeout catches a real hang). */
#define BOUND_S (2 * (GROUP_MS / 1000.0 + 1.0) + 3.0)

static void start(struct member *m, const char *name, int rank)
{
	*m = (struct member){ .name = name, .rank = rank, .world = WORLD, .timeout_ms = GROUP_MS,
			      .len = LEN };
	member_start(m);
}

/* The rendezvous, once the hub listens (it is a thread starting now). */
static int connect_group(const char *name)
{
	struct timespec nap = { 0, 100 * 1000 };
	char full[256];

	tu_group_socket(name, full, sizeof(full));
	for (int tries = 0; tries < 10000; tries++) {
		int s = intruder_dial(full);

		if (s >= 0)
			return s;
		nanosleep(&nap, NULL);
	}
	return -1;
}

/* Reads what the hub sends until it closes (bounded). */
static void drain(int s, int ms)
{
	struct pollfd pfd = { .fd = s, .events = POLLIN };
	char buf[256];

	while (poll(&pfd, 1, ms) > 0 && recv(s, buf, sizeof(buf), 0) > 0)
		;
}

static void stranger(const char *name, const uint8_t *data, size_t size)
{
	int s = connect_group(name);

	if (s < 0)
		return;
	intruder_send(s, data, size);
	close(s);
}

static void fuzzed_rank(const char *name, const uint8_t *data, size_t size)
{
	struct sseg_frame hello = { .kind = SSEG_FRAME_GROUP_HELLO, .arg = 2, .aux = WORLD };
	uint8_t hdr[SSEG_FRAME_HEAD];
	struct pollfd pfd;
	int s = connect_group(name);

	if (s < 0)
		return;
	sseg_frame_encode(hdr, &hello);
	intruder_send(s, hdr, sizeof(hdr));
	pfd = (struct pollfd){ .fd = s, .events = POLLIN };
	if (poll(&pfd, 1, 2 * GROUP_MS) > 0 && recv(s, hdr, sizeof(hdr), MSG_WAITALL) > 0) {
		intruder_send(s, data, size);
		shutdown(s, SHUT_WR);
		drain(s, 4 * GROUP_MS);
	}
	close(s);
}

static void check_member(const struct member *m, const struct member *hub)
{
	FUZZ_CHECK(m->took < BOUND_S);
	FUZZ_CHECK(m->rc <= 0);
	if (m->rc)
		return;
	FUZZ_CHECK(member_holds(m, 2));
	if (!hub->rc)
		FUZZ_CHECK(!memcmp(m->all, hub->all, sizeof(m->all)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned counter;
	struct member m[WORLD];
	char name[64];
	int fds = tu_count_fds(), n;
	int mode = size ? data[0] & 1 : 0;

	sseg_set_log_level(SSEG_LOG_OFF);
	snprintf(name, sizeof(name), "fz-%d-%u", (int)getpid(), counter++);
	start(&m[0], name, 0);
	if (mode == 0) {
		stranger(name, data + !!size, size - !!size);
		start(&m[1], name, 1);
		start(&m[2], name, 2);
		n = 3;
	} else {
		start(&m[1], name, 1);
		fuzzed_rank(name, data + 1, size - 1);
		n = 2;
	}
	for (int r = 0; r < n; r++)
		member_join(&m[r]);
	for (int r = 0; r < n; r++)
		check_member(&m[r], &m[0]);
	/* With every real rank well, the stranger changed nothing. */
	if (mode == 0 && !m[0].rc)
		FUZZ_CHECK(member_holds(&m[0], WORLD) && !m[1].rc && !m[2].rc);
	FUZZ_CHECK(tu_count_fds() == fds);
	return 0;
}
