/* SPDX-License-Identifier: Apache-2.0 */
/* The operator's view: `sharedseg ls` finds a live group's segment from
 * /proc alone, with every rank's pid, its rank and what is resident, and
 * flags a memfd that no process maps any more but a descriptor keeps
 * alive; once the group is gone, nothing is listed. A cuda-backend group
 * (the fake driver), whose memory /proc does not name, is listed from its
 * ranks' tag pages. */
#define _GNU_SOURCE /* pipe2 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fakeutil.h"
#include "listing.h"
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

/* The whole document, however many segments other tests hold at once;
 * valid until the next call. */
static char *listing(void)
{
	static char *text;

	free(text);
	text = listing_now();
	return text;
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
 * granularity the tag gives, marked declared; mapped and resident bytes
 * unknown. */
static void check_cuda_group(const char *text, const char *name, const pid_t *pids)
{
	const char *seg = segment_of(text, name);
	char needle[96];

	CHECK(seg);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", seg);
	CHECK(strstr(seg, "\"inode\":null,\"backend\":\"cuda\",\"size\":8388608,\"declared\":true"));
	CHECK(strstr(seg, "\"page_size\":2097152,\"resident_bytes\":null"));
	CHECK(strstr(seg, "\"world_size\":3,\"owner_rank\":0"));
	snprintf(needle, sizeof(needle), "\"owner_pid\":%d", (int)pids[0]);
	CHECK(strstr(seg, needle));
	for (int r = 0; r < RANKS; r++) {
		snprintf(needle, sizeof(needle), "{\"pid\":%d,", (int)pids[r]);
		CHECK(strstr(seg, needle));
		snprintf(needle, sizeof(needle), "\"rank\":%d,\"mapped_bytes\":null", r);
		CHECK(strstr(seg, needle));
	}
	/* One segment of that name, not one per rank. */
	CHECK(!segment_of(strstr(seg, "}]}") ? strstr(seg, "}]}") : seg + 1, name));
}

/* Another process (a fresh program: it inherits no mapping) opens the
 * owner's memfd through /proc/PID/fd, the old recipe of reaching a memfd,
 * and keeps only the descriptor: it says so on stdout, and holds it until
 * its stdin ends. */
struct holder {
	char path[64];  /* the owner's /proc/PID/fd/N */
	int held_w;     /* becomes its stdout */
	int release_r;  /* becomes its stdin */
};

static int holder_main(void *arg)
{
	const struct holder *h = arg;
	char cmd[160];

	if (dup2(h->held_w, STDOUT_FILENO) < 0 || dup2(h->release_r, STDIN_FILENO) < 0)
		return 1;
	snprintf(cmd, sizeof(cmd), "exec 3<>%s || exit 1; echo held; read line; exit 0",
		 h->path);
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	return 1;
}

/* The owner's descriptor of its memfd, as /proc/self/fd names it. */
static int memfd_path(const char *name, char *path, size_t len)
{
	char link[256], label[96];

	snprintf(label, sizeof(label), "/memfd:sseg:%s", name);
	for (int fd = 3; fd < 256; fd++) {
		ssize_t n;

		snprintf(path, len, "/proc/%d/fd/%d", (int)getpid(), fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0 && (link[n] = '\0', strstr(link, label)))
			return 0;
	}
	return -1;
}

static void unmapped_segment(void)
{
	char name[64];
	SSEG_OPTS(o, .name = name, .size = SZ, .world_size = 2, .rank = 0,
		  .pages = SSEG_PAGES_BASE, .populate = SSEG_POPULATE_LAZY);
	unsigned char blob[SSEG_BLOB_SIZE];
	struct holder h;
	int held[2], release[2];
	char word[8];
	sseg_t *seg;
	pid_t holder;

	tu_name(name, sizeof(name), "ls-unmapped"); /* copies run at once list each other's */
	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK(memfd_path(name, h.path, sizeof(h.path)) == 0);
	/* Close-on-exec: the shell keeps only its stdin and stdout of them. */
	CHECK(pipe2(held, O_CLOEXEC) == 0 && pipe2(release, O_CLOEXEC) == 0);
	h.held_w = held[1];
	h.release_r = release[0];
	holder = tu_fork(holder_main, &h);
	close(held[1]);
	close(release[0]);
	CHECK(read(held[0], word, sizeof(word)) > 0); /* the holder has the memfd open */
	CHECK_RC(sseg_destroy(seg), 0);
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "%s\n", listing());
	CHECK(segment_of(listing(), name));
	CHECK(strstr(segment_of(listing(), name), "\"unmapped\":true"));
	close(release[1]); /* the holder lets go */
	CHECK(tu_wait(holder, 10000) == 0);
	CHECK(!segment_of(listing(), name));
	close(held[0]);
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
