/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's view: `sharedseg ls` finds a live group's segment from
 * /proc alone, with every rank's pid, its rank and what is resident, and
 * flags a memfd that no process maps any more but a descriptor keeps
 * alive; once the group is gone, nothing is listed. A cuda-backend group
 * (the fake driver), whose memory /proc does not name, is listed from its
 * ranks' tag pages. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fakeutil.h"
#include "testutil.h"

#define RANKS 3
#define SZ (8u << 20)

struct job {
	char name[64];
	int rank;
	int ready_fd; /* written once the segment is complete */
	int done_fd;  /* closed by the test when the ranks may go */
	int done_w;   /* its write end: closed in the ranks at once */
	int cuda;     /* the cuda backend, through the fake driver */
};

static int rank_main(void *arg)
{
	const struct job *j = arg;
	SSEG_OPTS(o, .name = j->name, .size = SZ, .world_size = RANKS, .rank = j->rank,
		  .pages = j->cuda ? SSEG_PAGES_AUTO : SSEG_PAGES_BASE, .timeout_ms = 10000,
		  .backend = j->cuda ? SSEG_BACKEND_CUDA : SSEG_BACKEND_MEMFD);
	struct sseg_local_group *g;
	struct tu_fake fake;
	sseg_t *seg;
	char c;

	close(j->done_w);
	if (j->cuda)
		tu_fake_load("devices=2", &fake);
	CHECK_RC(sseg_local_group_open(j->name, j->rank, RANKS, 10000, &g), 0);
	CHECK_RC(sseg_open(&o, sseg_local_allgather, g, &seg), 0);
	CHECK(write(j->ready_fd, "r", 1) == 1);
	CHECK(read(j->done_fd, &c, 1) == 0); /* until the test closes it */
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	return 0;
}

static char *listing(void)
{
	static char text[1 << 16];

	CHECK(sseg_list_json(text, sizeof(text)) > 0);
	return text;
}

/* The JSON object of the segment named name, or NULL. */
static const char *segment_of(const char *text, const char *name)
{
	char needle[96];

	snprintf(needle, sizeof(needle), "{\"name\":\"%s\"", name);
	return strstr(text, needle);
}

static void check_group(const char *text, const char *name, const pid_t *pids)
{
	const char *seg = segment_of(text, name);
	char needle[96];

	CHECK(seg);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", seg);
	CHECK(strstr(seg, "\"size\":8388608") && strstr(seg, "\"pages\":\"base\""));
	CHECK(strstr(seg, "\"resident_bytes\":8388608")); /* populated by the owner */
	CHECK(strstr(seg, "\"world_size\":3,\"owner_rank\":0"));
	snprintf(needle, sizeof(needle), "\"owner_pid\":%d", (int)pids[0]);
	CHECK(strstr(seg, needle));
	CHECK(strstr(seg, "\"unmapped\":false"));
	for (int r = 0; r < RANKS; r++) {
		snprintf(needle, sizeof(needle), "{\"pid\":%d,", (int)pids[r]);
		CHECK(strstr(seg, needle));
		CHECK(strstr(strstr(seg, needle), "\"mapped_bytes\":8388608"));
		snprintf(needle, sizeof(needle), "\"rank\":%d", r);
		CHECK(strstr(seg, needle));
	}
}

/* The cuda group: every rank by its tag page; size, backend and the
 * granularity the tag gives; resident bytes unknown. */
static void check_cuda_group(const char *text, const char *name, const pid_t *pids)
{
	const char *seg = segment_of(text, name);
	char needle[96];

	CHECK(seg);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", seg);
	CHECK(strstr(seg, "\"inode\":null,\"backend\":\"cuda\",\"size\":8388608"));
	CHECK(strstr(seg, "\"page_size\":2097152,\"resident_bytes\":null"));
	CHECK(strstr(seg, "\"world_size\":3,\"owner_rank\":0"));
	snprintf(needle, sizeof(needle), "\"owner_pid\":%d", (int)pids[0]);
	CHECK(strstr(seg, needle));
	for (int r = 0; r < RANKS; r++) {
		snprintf(needle, sizeof(needle), "{\"pid\":%d,", (int)pids[r]);
		CHECK(strstr(seg, needle));
		snprintf(needle, sizeof(needle), "\"rank\":%d,\"mapped_bytes\":8388608", r);
		CHECK(strstr(seg, needle));
	}
	/* One segment of that name, not one per rank. */
	CHECK(!segment_of(strstr(seg, "}]}") ? strstr(seg, "}]}") : seg + 1, name));
}

/* Another process (a fresh program: it inherits no mapping) opens the
 * owner's memfd through /proc/PID/fd, the old recipe of reaching a memfd,
 * and keeps only the descriptor. */
static int holder_main(void *arg)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "exec 3<>%s; sleep 3", (const char *)arg);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	return 1;
}

static void unmapped_segment(void)
{
	SSEG_OPTS(o, .name = "ls-unmapped", .size = SZ, .world_size = 2, .rank = 0,
		  .pages = SSEG_PAGES_BASE, .populate = SSEG_POPULATE_LAZY);
	unsigned char blob[SSEG_BLOB_SIZE];
	char path[64], link[256];
	sseg_t *seg;
	pid_t holder = -1;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	for (int fd = 3; fd < 256 && holder < 0; fd++) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0 && (link[n] = '\0', strstr(link, "/memfd:sseg:ls-unmapped")))
			holder = tu_fork(holder_main, path);
	}
	CHECK(holder > 0);
	usleep(300 * 1000);
	CHECK_RC(sseg_destroy(seg), 0);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", listing());
	CHECK(segment_of(listing(), "ls-unmapped"));
	CHECK(strstr(segment_of(listing(), "ls-unmapped"), "\"unmapped\":true"));
	CHECK(tu_wait(holder, 10000) == 0);
	CHECK(!segment_of(listing(), "ls-unmapped"));
}

/* A group of RANKS processes kept alive while check looks at the list. */
static void live_group(int cuda, void (*check)(const char *, const char *, const pid_t *))
{
	struct job jobs[RANKS];
	int ready[2], done[2];
	pid_t pids[RANKS];
	char c, name[64];

	CHECK(pipe(ready) == 0 && pipe(done) == 0);
	tu_name(name, sizeof(name), cuda ? "sseg-ls-cuda" : "sseg-ls");
	for (int r = 0; r < RANKS; r++) {
		jobs[r] = (struct job){ .rank = r, .ready_fd = ready[1], .done_fd = done[0],
					.done_w = done[1], .cuda = cuda };
		snprintf(jobs[r].name, sizeof(jobs[r].name), "%s", name);
	}
	for (int r = RANKS - 1; r >= 0; r--)
		pids[r] = tu_fork(rank_main, &jobs[r]);
	close(done[0]);
	close(ready[1]); /* a rank that dies unready ends the read, not hangs it */
	for (int r = 0; r < RANKS; r++)
		CHECK(read(ready[0], &c, 1) == 1);
	check(listing(), name, pids);
	close(done[1]);
	for (int r = 0; r < RANKS; r++)
		CHECK(tu_wait(pids[r], 10000) == 0);
	CHECK(!segment_of(listing(), name));
	close(ready[0]);
}

int main(void)
{
	live_group(0, check_group);
	live_group(1, check_cuda_group);
	unmapped_segment();
	printf("ls: ok\n");
	return 0;
}
