/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in single-host all-gather: forked ranks gather, and every way a
 * group can go wrong ends in an error naming the culprit, never a hang. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define WAIT_MS 20000

static const size_t round_len[] = { 13, 4096, 300001, 0 };

/* One forked rank: open, do `rounds` good rounds, then either leave or do
 * one more round (or, with rounds < 0, the open itself) that must fail with
 * expect and a sentence containing needle. */
struct member {
	char name[64];
	int rank;
	int world;
	int timeout_ms;
	int rounds;
	bool leave;
	int expect;
	const char *needle;
	size_t last_len; /* length of the failing round; 0: 16 */
};

static void fill(unsigned char *buf, int rank, size_t len, int round)
{
	for (size_t off = 0; off < len; off++)
		buf[off] = tu_pattern(rank, off + (size_t)round * 7);
}

static int good_round(struct sseg_local_group *g, const struct member *m, int round)
{
	size_t len = round_len[round % 4];
	unsigned char *mine = malloc(len + 1), *all = malloc(len * (size_t)m->world + 1);
	unsigned char *expect = malloc(len + 1);

	CHECK(mine && all && expect);
	fill(mine, m->rank, len, round);
	CHECK_RC(sseg_local_allgather(mine, all, len, g), 0);
	for (int r = 0; r < m->world; r++) {
		fill(expect, r, len, round);
		CHECK(!memcmp(all + (size_t)r * len, expect, len));
	}
	free(mine);
	free(all);
	free(expect);
	return 0;
}

static int failing_round(struct sseg_local_group *g, const struct member *m)
{
	size_t len = m->last_len ? m->last_len : 16;
	unsigned char mine[64] = { 0 }, *all = calloc((size_t)m->world, 64);

	CHECK(all);
	CHECK_RC(sseg_local_allgather(mine, all, len, g), m->expect);
	free(all);
	return 0;
}

static int member_main(void *arg)
{
	const struct member *m = arg;
	struct sseg_local_group *g = NULL;
	int rc = sseg_local_group_open(m->name, m->rank, m->world, m->timeout_ms, &g);

	if (m->rounds < 0) {
		CHECK_RC(rc, m->expect);
		CHECK(!g);
		CHECK_ERR_HAS(m->needle);
		return 0;
	}
	CHECK_RC(rc, 0);
	for (int round = 0; round < m->rounds; round++)
		good_round(g, m, round);
	if (!m->leave && m->expect) {
		failing_round(g, m);
		CHECK_ERR_HAS(m->needle);
		CHECK_RC(sseg_local_allgather("x", (char[8]){ 0 }, 1, g), -ENOTCONN);
	}
	sseg_local_group_close(g);
	return 0;
}

/* Forks every member (highest rank first, so ranks wait for the hub) and
 * returns the longest it took, in ms; any failing member fails the test. */
static double run_members(struct member *m, int n)
{
	pid_t pids[16];
	struct timespec t0, t1;
	int failed = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = n - 1; i >= 0; i--)
		pids[i] = tu_fork(member_main, &m[i]);
	for (int i = 0; i < n; i++) {
		int status = tu_wait(pids[i], WAIT_MS);

		if (status) {
			fprintf(stderr, "member %d (rank %d) of '%s' ended with %d\n", i, m[i].rank,
				m[i].name, status);
			failed = 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (failed)
		exit(1);
	return (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
}

static void init_group(struct member *m, int n, int world, int timeout_ms, const char *prefix)
{
	char name[64];

	tu_name(name, sizeof(name), prefix);
	for (int i = 0; i < n; i++) {
		memset(&m[i], 0, sizeof(m[i]));
		snprintf(m[i].name, sizeof(m[i].name), "%s", name);
		m[i].rank = i;
		m[i].world = world;
		m[i].timeout_ms = timeout_ms;
	}
}

/* Every member does rounds good rounds, then fails with expect and needle
 * (rounds < 0: fails to open). */
static void expect_all(struct member *m, int n, int rounds, int expect, const char *needle)
{
	for (int i = 0; i < n; i++) {
		m[i].rounds = rounds;
		m[i].expect = expect;
		m[i].needle = needle;
	}
}

static void test_four_ranks_gather(void)
{
	struct member m[4];

	init_group(m, 4, 4, 10000, "gather");
	expect_all(m, 4, 8, 0, NULL);
	run_members(m, 4);
}

static void test_missing_rank(void)
{
	struct member m[3];
	double ms;

	init_group(m, 3, 4, 500, "missing");
	expect_all(m, 3, -1, -ETIMEDOUT, "rank 3 of 4 did not join within 500 ms");
	ms = run_members(m, 3);
	CHECK(ms < 5000);
}

static void test_missing_hub(void)
{
	struct sseg_local_group *g = (struct sseg_local_group *)&g;
	char name[64];

	tu_name(name, sizeof(name), "nohub");
	CHECK_RC(sseg_local_group_open(name, 2, 3, 200, &g), -ETIMEDOUT);
	CHECK(!g);
	CHECK_ERR_HAS("rank 0 (hub) did not open it within 200 ms");
}

static int rendezvous_exists(const char *name)
{
	char want[256], line[512];
	FILE *f = fopen("/proc/net/unix", "r");
	int found = 0;

	tu_group_socket(name, want, sizeof(want) - 1);
	strcat(want, "\n");
	while (f && !found && fgets(line, sizeof(line), f))
		found = strlen(line) >= strlen(want) &&
			!strcmp(line + strlen(line) - strlen(want), want);
	if (f)
		fclose(f);
	return found;
}

static void test_name_in_use(void)
{
	struct member m[1];
	struct sseg_local_group *g = NULL;
	pid_t hub;

	init_group(m, 1, 2, 1500, "inuse");
	m[0].rounds = -1;
	m[0].expect = -ETIMEDOUT;
	m[0].needle = "rank 1 of 2 did not join";
	hub = tu_fork(member_main, &m[0]);
	for (int i = 0; i < 200 && !rendezvous_exists(m[0].name); i++)
		usleep(5000);
	CHECK(rendezvous_exists(m[0].name));
	CHECK_RC(sseg_local_group_open(m[0].name, 0, 2, 100, &g), -EADDRINUSE);
	CHECK_ERR_HAS("is already in use on this host");
	CHECK(tu_wait(hub, WAIT_MS) == 0);
}

static void test_world_of_one(void)
{
	struct sseg_local_group *g = NULL;
	char all[6] = { 0 };

	CHECK_RC(sseg_local_group_open("solo", 0, 1, 0, &g), 0);
	CHECK_RC(sseg_local_allgather("hello", all, 6, g), 0);
	CHECK(!strcmp(all, "hello"));
	CHECK_RC(sseg_local_allgather(NULL, NULL, 0, g), 0);
	sseg_local_group_close(g);
}

static void test_bad_arguments(void)
{
	struct sseg_local_group *g;
	char long_name[65];

	memset(long_name, 'n', 64);
	long_name[64] = '\0';
	CHECK_RC(sseg_local_group_open("", 0, 2, 0, &g), -EINVAL);
	CHECK_RC(sseg_local_group_open(NULL, 0, 2, 0, &g), -EINVAL);
	CHECK_RC(sseg_local_group_open(long_name, 0, 2, 0, &g), -EINVAL);
	CHECK_ERR_HAS("1 to 63 bytes, not 64");
	CHECK_RC(sseg_local_group_open("x", 2, 2, 0, &g), -EINVAL);
	CHECK_RC(sseg_local_group_open("x", 0, 0, 0, &g), -EINVAL);
	CHECK_RC(sseg_local_group_open("x", 0, 2, -1, &g), -EINVAL);
	CHECK_RC(sseg_local_group_open("x", 0, 2, 0, NULL), -EINVAL);
	CHECK_RC(sseg_local_allgather("x", long_name, 1, NULL), -EINVAL);
}

/* A rank that goes away after the first round fails everyone else's second. */
static void test_rank_leaves(int leaver, const char *needle)
{
	struct member m[4];
	double ms;

	init_group(m, 4, 4, 10000, "leave");
	expect_all(m, 4, 1, -ECONNRESET, needle);
	m[leaver].leave = true;
	ms = run_members(m, 4);
	CHECK(ms < 5000); /* well before the 10 s timeout */
}

static void test_length_mismatch(void)
{
	struct member m[3];

	init_group(m, 3, 3, 5000, "len");
	expect_all(m, 3, 2, -EINVAL, "rank 2 all-gathers 8 bytes, rank 0 (hub) 16");
	m[2].last_len = 8;
	run_members(m, 3);
}

static void test_duplicate_rank(void)
{
	struct member m[3];

	init_group(m, 3, 3, 5000, "dup");
	expect_all(m, 3, -1, -EINVAL, "two processes joined as rank 1");
	m[2].rank = 1;
	run_members(m, 3);
}

static void test_world_mismatch(void)
{
	struct member m[2];

	init_group(m, 2, 2, 5000, "world");
	m[1].world = 3;
	expect_all(m, 2, -1, -EINVAL, "rank 1 declared world size 3, rank 0 (hub) 2");
	run_members(m, 2);
}

int main(void)
{
	test_bad_arguments();
	test_world_of_one();
	test_four_ranks_gather();
	test_missing_rank();
	test_missing_hub();
	test_name_in_use();
	test_rank_leaves(3, "rank 3 of local group");
	test_rank_leaves(0, "rank 0 (hub) of local group");
	test_length_mismatch();
	test_duplicate_rank();
	test_world_mismatch();
	return 0;
}
