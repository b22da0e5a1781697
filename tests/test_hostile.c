/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile connections against a completing group's fd channel. The owner's
 * channel name is public (/proc/net/unix); an intruder process connects
 * while the owner waits in sseg_complete: garbage, a wrong token, silence,
 * a flood, another uid holding the right token, claims of ranks that are
 * not the owner's to serve (outside the group, the owner's own, a rank of
 * another host, a rank already served), half a hello then a stall, a hello
 * dripped a byte at a time, descriptors pushed at the owner. Every
 * connection is refused without a descriptor, the group completes in time
 * with its data shared, the owner keeps no descriptor nor mapping it did
 * not have before, and the refusals take a handful of log lines.
 *
 * When a real peer never comes while strangers knock, the owner's error
 * names the missing rank and what the channel dropped meanwhile, so that
 * neither is taken for the other.
 *
 * The group: ranks 0-2 on one (simulated) host with owner 0, rank 3 on
 * another host, its own owner. SSEG_HOSTILE_SCALE=n multiplies the counts
 * (make reliability). */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "blob.h"
#include "frame.h"
#include "hostcheck.h"
#include "intruder.h"
#include "runcases.h"
#include "testutil.h"

#define WORLD 4
#define SZ (4u << 20)
#define TIMEOUT_MS 8000
#define MISSING_TIMEOUT_MS 2500

static int scale = 1;

/* ---- the group ---- */

struct group {
	struct tu_rank r[WORLD];
	unsigned char *blobs;
	struct sseg_blob owner;
	pthread_t tid[WORLD];
	double done_at[WORLD];
};

struct member {
	struct group *g;
	int rank;
};

static void group_create(struct group *g, const char *name, int timeout_ms)
{
	static const char *const hosts[WORLD] = { "hostile-a", "hostile-a", "hostile-a",
						  "hostile-b" };

	memset(g, 0, sizeof(*g));
	for (int i = 0; i < WORLD; i++) {
		g->r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = name,
						   .size = SZ, .world_size = WORLD, .rank = i,
						   .owner_rank = i == 3 ? 3 : 0,
						   .pages = SSEG_PAGES_BASE,
						   .timeout_ms = timeout_ms };
		g->r[i].host = hosts[i];
	}
	g->blobs = tu_create_inproc(g->r, WORLD);
	for (int i = 0; i < WORLD; i++)
		CHECK(g->r[i].create_rc == 0);
	CHECK_RC(sseg_blob_decode(g->blobs, 0, &g->owner), 0);
}

static void *complete_main(void *arg)
{
	struct member *m = arg;
	struct tu_rank *r = &m->g->r[m->rank];

	r->complete_rc = sseg_complete(r->seg, m->g->blobs);
	if (r->complete_rc)
		snprintf(r->error, sizeof(r->error), "%s", sseg_last_error());
	m->g->done_at[m->rank] = tu_now();
	free(m);
	return NULL;
}

static void complete_start(struct group *g, int rank)
{
	struct member *m = malloc(sizeof(*m));

	CHECK(m != NULL);
	*m = (struct member){ g, rank };
	CHECK(pthread_create(&g->tid[rank], NULL, complete_main, m) == 0);
}

static void complete_wait(struct group *g, int rank)
{
	CHECK(pthread_join(g->tid[rank], NULL) == 0);
	if (g->r[rank].complete_rc)
		fprintf(stderr, "rank %d failed: %s\n", rank, g->r[rank].error);
	CHECK(g->r[rank].complete_rc == 0);
}

/* Every rank of host a sees rank 1's bytes: one copy, shared. */
static void check_shared(struct group *g)
{
	unsigned char *p1 = sseg_base(g->r[1].seg);

	p1[SZ - 1] = 0x5e;
	for (int i = 0; i < 3; i++)
		CHECK(((unsigned char *)sseg_base(g->r[i].seg))[SZ - 1] == 0x5e);
}

/* ---- the log: refusals are counted, not printed ---- */

static int refusal_lines;

static void count_log(enum sseg_log_level level, const char *message, void *ctx)
{
	(void)level;
	(void)ctx;
	if (strstr(message, "refused"))
		__atomic_add_fetch(&refusal_lines, 1, __ATOMIC_RELAXED);
}

/* ---- the cases ---- */

struct hostile_case {
	const char *what;
	enum intrusion kind;
	int count;
	int other_uid;
	int after_rank1;    /* the intruder comes once rank 1 was served */
	int token_right;    /* the hello carries the owner's real token */
	uint32_t rank;      /* the rank the hello claims */
	int magic_right;
};

static void forge_hello(const struct hostile_case *c, const struct sseg_blob *owner,
			struct intrusion_plan *p)
{
	/* The channel's hello, as a peer sends it (src/frame.h). */
	sseg_frame_encode(p->bytes, &(struct sseg_frame){ .kind = SSEG_FRAME_CHANNEL_HELLO,
							  .arg = c->rank, .len = SSEG_TOKEN_LEN });
	if (!c->magic_right)
		sseg_put32(p->bytes, 0x6b6e756au);
	memcpy(p->bytes + SSEG_FRAME_HEAD, owner->handle.token, SSEG_TOKEN_LEN);
	if (!c->token_right)
		p->bytes[SSEG_FRAME_HEAD + 5] ^= 0x40;
	p->len = SSEG_FRAME_HEAD + SSEG_TOKEN_LEN;
}

struct measured {
	int tried, connected, refused, fds;
	double owner_s;
	int owner_fds_left, lines;
};

static void run_case(const struct hostile_case *c, struct measured *m)
{
	struct intrusion_plan plan = { .kind = c->kind, .count = c->count * scale };
	int fds = tu_count_fds();
	struct tu_maps maps = tu_maps();
	struct intrusion_tally t;
	struct intruder in;
	struct group g;
	char name[64];
	double peers_at;

	tu_name(name, sizeof(name), "hostile");
	group_create(&g, name, TIMEOUT_MS);
	plan.sock = g.owner.handle.sock;
	plan.uid = c->other_uid ? 65534 : 0;
	forge_hello(c, &g.owner, &plan);
	refusal_lines = 0;
	complete_start(&g, 0);
	complete_start(&g, 3);
	if (c->after_rank1) {
		complete_start(&g, 1);
		complete_wait(&g, 1);
	}
	intruder_start(&in, &plan);
	peers_at = tu_now();
	for (int r = 1; r < 3; r++)
		if (r != 1 || !c->after_rank1)
			complete_start(&g, r);
	for (int r = 0; r < WORLD; r++)
		if (r != 1 || !c->after_rank1)
			complete_wait(&g, r);
	CHECK(intruder_finish(&in, &t) == 0);
	check_shared(&g);
	tu_destroy_all(g.r, WORLD);
	free(g.blobs);
	*m = (struct measured){ t.tried, t.connected, t.refused, t.fds_received,
				g.done_at[0] - peers_at,
				tu_count_fds() - fds, refusal_lines };
	CHECK(tu_maps_same(maps, tu_maps()));
}

static const struct hostile_case cases[] = {
	{ "garbage", INTRUDE_GARBAGE, 200, 0, 0, 0, 0, 0 },
	{ "wrong token", INTRUDE_BYTES, 200, 0, 0, 0, 1, 1 },
	{ "wrong magic, right token", INTRUDE_BYTES, 50, 0, 0, 1, 1, 0 },
	{ "silent, held open", INTRUDE_SILENT, 100, 0, 0, 0, 0, 1 },
	{ "half a hello, then a stall", INTRUDE_HALF, 100, 0, 0, 1, 1, 1 },
	{ "a hello dripped byte by byte", INTRUDE_DRIP, 20, 0, 0, 1, 1, 1 },
	{ "flood of connections", INTRUDE_FLOOD, 5000, 0, 0, 0, 0, 1 },
	{ "another uid, right token", INTRUDE_BYTES, 20, 1, 0, 1, 1, 1 },
	{ "another uid, flood", INTRUDE_FLOOD, 5000, 1, 0, 0, 0, 1 },
	{ "claims a rank outside the group", INTRUDE_BYTES, 20, 0, 0, 1, 7, 1 },
	{ "claims the owner's own rank", INTRUDE_BYTES, 20, 0, 0, 1, 0, 1 },
	{ "claims a rank of another host", INTRUDE_BYTES, 20, 0, 0, 1, 3, 1 },
	{ "claims a rank already served", INTRUDE_BYTES, 20, 0, 1, 1, 1, 1 },
	{ "descriptors pushed with the hello", INTRUDE_FD_BOMB, 20, 0, 0, 0, 1, 1 },
};

/* Rank 2 never completes while a stranger holds silent connections and
 * sends hellos with a wrong token: the owner times out naming rank 2, and
 * says that it dropped connections that were no member. */
static int missing_peer_named(void)
{
	struct intrusion_plan silent = { .kind = INTRUDE_SILENT, .count = 20 };
	struct intrusion_plan wrong = { .kind = INTRUDE_BYTES, .count = 5 };
	static const struct hostile_case forged = { .token_right = 0, .rank = 1,
						    .magic_right = 1 };
	struct intrusion_tally t;
	struct intruder in[2];
	struct group g;
	char name[64];
	const char *says;
	int ok;

	tu_name(name, sizeof(name), "hostile-missing");
	group_create(&g, name, MISSING_TIMEOUT_MS);
	silent.sock = wrong.sock = g.owner.handle.sock;
	forge_hello(&forged, &g.owner, &wrong);
	complete_start(&g, 0);
	complete_start(&g, 3);
	intruder_start(&in[0], &silent);
	intruder_start(&in[1], &wrong);
	complete_start(&g, 1);
	CHECK(pthread_join(g.tid[0], NULL) == 0);
	complete_wait(&g, 3);
	CHECK(pthread_join(g.tid[1], NULL) == 0);
	CHECK(intruder_finish(&in[0], &t) == 0);
	CHECK(intruder_finish(&in[1], &t) == 0);
	says = g.r[0].error;
	ok = g.r[0].complete_rc == -ETIMEDOUT && strstr(says, "rank(s) 2 did not collect") &&
	     !strstr(says, "rank(s) 1") &&
	     strstr(says, "dropped connections that were no member") &&
	     strstr(says, "20 silent") && strstr(says, "5 with a wrong token or rank");
	printf("%-36s owner: %s: %s\n", "a peer missing among strangers", says,
	       ok ? "ok" : "FAILED");
	tu_destroy_all(g.r, WORLD);
	free(g.blobs);
	return ok;
}

/* One case of the table, in a child of its own: 0 when it was handled. */
static int hostile_one(void *arg)
{
	const struct hostile_case *c = arg;
	struct measured m;
	char what[128];
	int ok;

	if (c->other_uid && getuid() != 0) {
		printf("hostile: '%s' needs root to play another uid: skipped\n", c->what);
		return 0;
	}
	run_case(c, &m);
	/* A flood's connections are closed by the intruder itself. */
	ok = m.fds == 0 && m.owner_fds_left == 0 && m.lines <= 4 &&
	     (c->kind == INTRUDE_FLOOD || m.refused == m.connected) && m.owner_s < 3.0;
	printf("%-36s %6d tried, %6d connected, %5d refused, %d fds given, owner done "
	       "%.2f s after the peers began, %d log line(s): %s\n",
	       c->what, m.tried, m.connected, m.refused, m.fds, m.owner_s, m.lines,
	       ok ? "ok" : "FAILED");
	hc_record("{\"test\":\"hostile\",\"target\":\"fd channel\",\"case\":\"%s\","
		  "\"tried\":%d,\"connected\":%d,\"refused\":%d,\"fds_given\":%d,"
		  "\"completed\":1,\"owner_s\":%.3f,\"fds_left\":%d,\"log_lines\":%d,"
		  "\"ok\":%d}",
		  hc_json(c->what, what, sizeof(what)), m.tried, m.connected,
		  c->kind == INTRUDE_FLOOD ? -1 : m.refused, m.fds, m.owner_s,
		  m.owner_fds_left, m.lines, ok);
	return !ok;
}

static int missing_peer(void *arg)
{
	(void)arg;
	return !missing_peer_named();
}

#define NCASES (sizeof(cases) / sizeof(cases[0]))

int main(int argc, char **argv)
{
	struct tu_case table[NCASES + 2];
	size_t n = 0;

	/* Per-thread malloc arenas reserve address space that would read as
	 * leaked windows: one arena. */
	mallopt(M_ARENA_MAX, 1);
	scale = hc_scale("SSEG_HOSTILE_SCALE", 1);
	sseg_set_log(count_log, NULL);
	for (; n < NCASES; n++)
		table[n] = (struct tu_case){ cases[n].what, hostile_one, (void *)&cases[n], 0 };
	table[n++] = (struct tu_case){ "a peer missing among strangers", missing_peer, NULL, 0 };
	table[n] = (struct tu_case){ NULL, NULL, NULL, 0 };
	if (tu_run_cases(argc, argv, table))
		return 1;
	printf("hostile: every case handled, the group completing each time it could\n");
	return 0;
}
