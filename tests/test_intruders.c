/* SPDX-License-Identifier: Apache-2.0 */
/* Strangers at the owner's fd channel cannot stall a group or fill its
 * log. The channel's name is visible in /proc/net/unix: an intruder of the
 * same uid holds a hundred silent connections open before the peers come
 * (each used to cost the owner a second in turn, and the group failed
 * blaming the real peers), and an intruder of another uid floods it with
 * connections, and the first sends thousands of hellos with a wrong token
 * while the owner's stderr is a pipe nobody reads (each refusal used to be
 * a blocking write). The group completes in time, and
 * the owner's log holds a handful of lines. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blob.h"
#include "frame.h"
#include "testutil.h"

#define WORLD 4
#define SILENT 100
#define WRONG_TOKENS 3000

struct run {
	char name[64];
	int rank;
	int log_fd; /* the owner's stderr: a pipe the test does not drain */
	int go[2];  /* its end of file lets the peers complete: the intruders are there */
};

static int rank_main(void *arg)
{
	const struct run *r = arg;
	SSEG_OPTS(o, .name = r->name, .size = 8u << 20, .world_size = WORLD, .rank = r->rank,
		  .pages = SSEG_PAGES_BASE, .timeout_ms = 5000);
	unsigned char blob[SSEG_BLOB_SIZE], blobs[WORLD * SSEG_BLOB_SIZE];
	struct sseg_local_group *g;
	sseg_t *seg;
	char c;

	close(r->go[1]);
	if (r->rank == 0)
		dup2(r->log_fd, STDERR_FILENO); /* blocking, and nobody reads it */
	CHECK_RC(sseg_local_group_open(r->name, r->rank, WORLD, 10000, &g), 0);
	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_local_allgather(blob, blobs, SSEG_BLOB_SIZE, g), 0);
	if (r->rank != 0)
		CHECK(read(r->go[0], &c, 1) == 0); /* the intruders get there first */
	CHECK_RC(sseg_complete(seg, blobs), 0);
	CHECK_RC(sseg_local_allgather("x", blobs, 1, g), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	sseg_local_group_close(g);
	return 0;
}

/* The owner's channel name, as anyone on the host can read it. */
static int find_channel(pid_t owner, char *name, size_t len)
{
	char prefix[64], line[512];

	snprintf(prefix, sizeof(prefix), "@sharedseg-fd-%d-", (int)owner);
	for (int tries = 0; tries < 500; tries++) {
		FILE *f = fopen("/proc/net/unix", "r");

		while (f && fgets(line, sizeof(line), f)) {
			char *at = strstr(line, prefix);

			if (at) {
				at[strcspn(at, " \n")] = '\0';
				snprintf(name, len, "%s", at + 1);
				fclose(f);
				return 0;
			}
		}
		if (f)
			fclose(f);
		tu_nap_ms(10);
	}
	return -1;
}

static int connect_to(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t n = strlen(name);

	memcpy(a.sun_path + 1, name, n);
	if (s >= 0 && connect(s, (struct sockaddr *)&a,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n))) {
		close(s);
		s = -1;
	}
	return s;
}

/* An intruder says when it is in place (a byte on ready) and goes on
 * until the group is done (release ends). */
struct intrusion {
	char channel[128];
	int go_w;       /* the peers' go: not the intruder's to hold */
	int ready_w;
	int release[2];
};

static void intruder_enter(const struct intrusion *in)
{
	close(in->go_w);
	close(in->release[1]);
}

static int released(const struct intrusion *in)
{
	struct pollfd pfd = { .fd = in->release[0], .events = POLLIN };

	return poll(&pfd, 1, 0) != 0;
}

/* Same uid: connections that never say hello, held open, then a burst of
 * hellos with a wrong token (each refusal is a would-be log line). */
static int silent_intruder(void *arg)
{
	const struct intrusion *in = arg;
	uint8_t hello[SSEG_FRAME_HEAD + SSEG_TOKEN_LEN];
	int fds[SILENT], n = 0;
	char c;

	intruder_enter(in);
	for (int i = 0; i < SILENT; i++) {
		fds[i] = connect_to(in->channel);
		n += fds[i] >= 0;
	}
	sseg_frame_encode(hello, &(struct sseg_frame){ .kind = SSEG_FRAME_CHANNEL_HELLO, .arg = 1,
						       .len = SSEG_TOKEN_LEN });
	memcpy(hello + SSEG_FRAME_HEAD, "wrong-token-here", SSEG_TOKEN_LEN);
	for (int i = 0; i < WRONG_TOKENS; i++) {
		int s = connect_to(in->channel);

		if (s >= 0) {
			(void)!send(s, hello, sizeof(hello), MSG_NOSIGNAL);
			close(s);
		}
	}
	if (write(in->ready_w, "s", 1) != 1 || read(in->release[0], &c, 1) != 0)
		return 1;
	for (int i = 0; i < SILENT; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return n > 0 ? 0 : 1;
}

/* Another uid: a flood of connections for as long as the group runs. */
static int foreign_flood(void *arg)
{
	const struct intrusion *in = arg;
	int tried = 0;

	intruder_enter(in);
	if (setgid(65534) || setuid(65534)) {
		perror("intruders: setuid");
		return 1;
	}
	do {
		int s = connect_to(in->channel);

		if (s >= 0) {
			(void)!send(s, "garbage-garbage-garbage!", 24, MSG_NOSIGNAL);
			close(s);
		}
		if (++tried == 1 && write(in->ready_w, "f", 1) != 1)
			return 1;
	} while (!released(in));
	return 0;
}

static int count_lines(int fd, const char *needle)
{
	char buf[65536 + 1];
	ssize_t n;
	int lines = 0;

	fcntl(fd, F_SETFL, O_NONBLOCK);
	n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	for (const char *at = buf; (at = strstr(at, needle)); at++)
		lines++;
	return lines;
}

int main(void)
{
	struct run runs[WORLD];
	struct intrusion in;
	pid_t pids[WORLD], silent, flood = -1;
	int log_pipe[2], go[2], ready[2], failed = 0, intruders = 1, refused_lines;
	char c;

	CHECK(pipe(log_pipe) == 0 && pipe(go) == 0);
	tu_name(runs[0].name, sizeof(runs[0].name), "sseg-intruders");
	for (int r = 0; r < WORLD; r++) {
		runs[r] = runs[0];
		runs[r].rank = r;
		runs[r].log_fd = log_pipe[1];
		runs[r].go[0] = go[0];
		runs[r].go[1] = go[1];
	}
	for (int r = WORLD - 1; r >= 0; r--)
		pids[r] = tu_fork(rank_main, &runs[r]);
	close(go[0]);
	CHECK(find_channel(pids[0], in.channel, sizeof(in.channel)) == 0);
	CHECK(pipe(ready) == 0 && pipe(in.release) == 0);
	in.go_w = go[1];
	in.ready_w = ready[1];
	silent = tu_fork(silent_intruder, &in);
	if (getuid() == 0) {
		flood = tu_fork(foreign_flood, &in);
		intruders++;
	}
	close(ready[1]);
	close(in.release[0]);
	for (int i = 0; i < intruders; i++)
		CHECK(read(ready[0], &c, 1) == 1);
	close(go[1]); /* the peers come now */
	for (int r = 0; r < WORLD; r++) {
		int status = tu_wait(pids[r], 20000);

		if (status) {
			fprintf(stderr, "rank %d ended with %d\n", r, status);
			failed = 1;
		}
	}
	close(in.release[1]); /* the group is done: the intruders stop */
	CHECK(tu_wait(silent, 20000) == 0);
	if (flood > 0)
		CHECK(tu_wait(flood, 20000) == 0);
	close(ready[0]);
	CHECK(!failed);
	/* Refusals are rate-limited: a handful of lines, not one each, and
	 * the foreign flood's refusals are told at least once. */
	refused_lines = count_lines(log_pipe[0], "refused");
	CHECK(refused_lines <= 4);
	if (flood > 0)
		CHECK(refused_lines >= 1);
	printf("intruders: ok (%s)\n", flood > 0 ? "same and other uid" : "same uid only: not root");
	return 0;
}
