/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile connections against the built-in local exchange's hub while a
 * 4-rank group meets. Its rendezvous is predictable and listed in
 * /proc/net/unix, a socket file in the user's runtime directory, and
 * unlike the fd channel it has no token: a same-uid stranger's well-formed
 * hello is a member's. So: garbage, silence, half a hello, a drip, a flood,
 * descriptors, a data frame where a hello belongs, and another uid's
 * well-formed hello are all refused and the group meets; a same-uid hello
 * that claims a rank outside the group, a taken rank or another world size
 * fails the group, and every rank that had joined says why (the hub
 * relays its verdict). Nothing is left open.
 * SSEG_HOSTILE_SCALE=n multiplies the counts (make reliability). */
#include <dirent.h>
#include <linux/sockios.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "hostcheck.h"
#include "intruder.h"
#include "member.h"
#include "os/named.h"
#include "runcases.h"
#include "testutil.h"

#define WORLD 4
#define LEN 16
#define GROUP_MS 4000
/* Where the group fails, a rank that comes after the hub gave up waits
 * this long to hear that nobody listens. */
#define FAILING_GROUP_MS 1500

static int scale = 1;

/* ---- the cases ---- */

struct hub_case {
	const char *what;
	enum intrusion kind;
	int count;
	int other_uid;
	uint32_t frame_kind; /* 0: garbage bytes */
	int32_t rank;
	uint32_t world;
	const char *cause;   /* NULL: the group meets; else every joined rank says this */
};

static const struct hub_case cases[] = {
	{ "garbage", INTRUDE_GARBAGE, 200, 0, 0, 0, 0, NULL },
	{ "silent, held open", INTRUDE_SILENT, 100, 0, 0, 0, 0, NULL },
	{ "half a hello, then a stall", INTRUDE_HALF, 100, 0, SSEG_FRAME_GROUP_HELLO, 1, WORLD, NULL },
	{ "a hello dripped byte by byte", INTRUDE_DRIP, 20, 0, SSEG_FRAME_GROUP_HELLO, 1, WORLD, NULL },
	{ "flood of connections", INTRUDE_FLOOD, 5000, 0, 0, 0, 0, NULL },
	{ "a data frame for a hello", INTRUDE_BYTES, 50, 0, SSEG_FRAME_GROUP_DATA, 1, WORLD, NULL },
	{ "descriptors pushed with garbage", INTRUDE_FD_BOMB, 20, 0, 0, 0, 0, NULL },
	{ "another uid, a member's hello", INTRUDE_BYTES, 20, 1, SSEG_FRAME_GROUP_HELLO, 1, WORLD, NULL },
	{ "another uid, flood", INTRUDE_FLOOD, 5000, 1, 0, 0, 0, NULL },
	{ "claims a rank outside the group", INTRUDE_BYTES, 1, 0, SSEG_FRAME_GROUP_HELLO, 9, WORLD,
	  "a process joined as rank 9, outside 1..3" },
	{ "claims a rank already joined", INTRUDE_BYTES, 1, 0, SSEG_FRAME_GROUP_HELLO, 1, WORLD,
	  "two processes joined as rank 1" },
	{ "declares another world size", INTRUDE_BYTES, 1, 0, SSEG_FRAME_GROUP_HELLO, 2, WORLD + 1,
	  "declared world size 5" },
};

static void forge(const struct hub_case *c, struct intrusion_plan *p)
{
	struct sseg_frame f = { .kind = c->frame_kind, .arg = (uint32_t)c->rank, .aux = c->world,
				.len = c->frame_kind == SSEG_FRAME_GROUP_DATA ? LEN : 0 };

	if (c->frame_kind) {
		sseg_frame_encode(p->bytes, &f);
		p->len = SSEG_FRAME_HEAD;
	} else {
		memcpy(p->bytes, "not a frame of this protocol....", 32);
		p->len = 32;
	}
}

/* The group met: every rank holds every rank's bytes. */
static int met(const struct member *m)
{
	for (int r = 0; r < WORLD; r++)
		if (m[r].rc || !member_holds(&m[r], WORLD))
			return 0;
	return 1;
}

static void start(struct member *m, const char *name, int rank, int timeout_ms)
{
	*m = (struct member){ .name = name, .rank = rank, .world = WORLD,
			      .timeout_ms = timeout_ms, .len = LEN };
	member_start(m);
}

/* A failing case: the ranks that had joined say the cause. */
static int failed_naming(const struct member *m, const char *cause)
{
	int ok = 1;

	for (int r = 0; r < 3; r++) {
		if (!m[r].rc || !strstr(m[r].error, cause)) {
			fprintf(stderr, "rank %d: %s\n", r, m[r].rc ? m[r].error : "succeeded");
			ok = 0;
		}
	}
	return ok;
}

struct measured {
	struct intrusion_tally t;
	double slowest;
	int ok;
};

/* Every connection of this process to the hub's name (sock): n of them,
 * none with bytes the hub has not read (SIOCOUTQ). */
static int hub_read_all(const char *sock, int n)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int seen = 0, unread = 0;

	while (d && (e = readdir(d))) {
		struct sockaddr_un a;
		socklen_t len = sizeof(a);
		struct stat st;
		int fd = atoi(e->d_name), queued = 0;

		if (fd < 3 || fstat(fd, &st) || !S_ISSOCK(st.st_mode) ||
		    getpeername(fd, (struct sockaddr *)&a, &len) ||
		    len <= offsetof(struct sockaddr_un, sun_path) ||
		    strncmp(a.sun_path, sock, sizeof(a.sun_path)))
			continue;
		seen++;
		unread += ioctl(fd, SIOCOUTQ, &queued) || queued;
	}
	if (d)
		closedir(d);
	return seen == n && !unread;
}

/* Ranks 1 and 2 are in: each sent its hello and waits for the answer,
 * and the hub has read both hellos. */
static void await_first_two(const struct member *m, const char *sock)
{
	double deadline = tu_now() + GROUP_MS / 1000.0;

	while (!(member_awaits_hub(&m[1]) && member_awaits_hub(&m[2]) && hub_read_all(sock, 2))) {
		CHECK(tu_now() < deadline);
		tu_nap_ms(1);
	}
}

/* Ranks 1 and 2 join first, the intruder comes, rank 3 last. Where the
 * group fails, the hub and the ranks that joined do at once; only rank 3
 * waits to hear that nobody listens. */
static void run_case(const struct hub_case *c, struct measured *out)
{
	struct intrusion_plan plan = { .kind = c->kind, .count = c->count * scale };
	char name[64], sock[128], prefix[200], dir[SSEG_OS_NAMED_PATH];
	struct member m[WORLD];
	int fds = tu_count_fds();
	struct intruder in;

	tu_name(name, sizeof(name), "hub");
	CHECK_RC(sseg_os_rundir(dir, sizeof(dir)), 0);
	snprintf(prefix, sizeof(prefix), "%s/group-%s", dir, name);
	plan.uid = c->other_uid ? 65534 : 0;
	forge(c, &plan);
	for (int r = 0; r < 3; r++)
		start(&m[r], name, r, GROUP_MS);
	CHECK(intruder_find_socket(prefix, sock, sizeof(sock)) == 0);
	plan.sock = sock;
	await_first_two(m, sock);
	intruder_start(&in, &plan);
	start(&m[3], name, 3, c->cause ? FAILING_GROUP_MS : GROUP_MS);
	out->slowest = 0;
	for (int r = 0; r < WORLD; r++) {
		member_join(&m[r]);
		if (m[r].took > out->slowest)
			out->slowest = m[r].took;
	}
	CHECK(intruder_finish(&in, &out->t) == 0);
	out->ok = c->cause ? failed_naming(m, c->cause) : met(m);
	/* Every refusal is a closed connection, and no descriptor went out. */
	out->ok &= out->t.fds_received == 0 && tu_count_fds() == fds;
	if (c->kind != INTRUDE_FLOOD)
		out->ok &= out->t.refused == out->t.connected;
	if (!c->cause)
		out->ok &= out->slowest < 3.0;
	if (c->cause)
		printf("  rank 3, joining after the hub failed: %s\n",
		       m[3].rc ? m[3].error : "succeeded");
}

/* One case of the table, in a child of its own: 0 when it was handled. */
static int hub_one(void *arg)
{
	const struct hub_case *c = arg;
	struct measured m;
	char what[128];

	if (c->other_uid && getuid() != 0) {
		printf("hostile_hub: '%s' needs root to play another uid: skipped\n", c->what);
		return 0;
	}
	run_case(c, &m);
	printf("%-34s %6d tried, %6d connected, %5d refused, %d fds given, slowest rank "
	       "%.2f s, %s: %s\n",
	       c->what, m.t.tried, m.t.connected, m.t.refused, m.t.fds_received, m.slowest,
	       c->cause ? "group failed naming it" : "group met", m.ok ? "ok" : "FAILED");
	hc_record("{\"test\":\"hostile\",\"target\":\"local exchange hub\",\"case\":\"%s\","
		  "\"tried\":%d,\"connected\":%d,\"refused\":%d,\"fds_given\":%d,"
		  "\"completed\":%d,\"owner_s\":%.3f,\"fds_left\":0,\"log_lines\":0,"
		  "\"ok\":%d}",
		  hc_json(c->what, what, sizeof(what)), m.t.tried, m.t.connected,
		  c->kind == INTRUDE_FLOOD ? -1 : m.t.refused, m.t.fds_received,
		  !c->cause, m.slowest, m.ok);
	return !m.ok;
}

#define NCASES (sizeof(cases) / sizeof(cases[0]))

int main(int argc, char **argv)
{
	struct tu_case table[NCASES + 1];

	scale = hc_scale("SSEG_HOSTILE_SCALE", 1);
	sseg_set_log_level(SSEG_LOG_OFF);
	for (size_t i = 0; i < NCASES; i++)
		table[i] = (struct tu_case){ cases[i].what, hub_one, (void *)&cases[i], 0 };
	table[NCASES] = (struct tu_case){ NULL, NULL, NULL, 0 };
	if (tu_run_cases(argc, argv, table))
		return 1;
	printf("hostile_hub: every case handled as it must be\n");
	return 0;
}
