/* SPDX-License-Identifier: Apache-2.0 */
/* `sharedseg bench` with two ranks: this process is the owner, a child is
 * the peer. The peer times its sseg_complete, or its reads of the shared
 * mapping against a private mapping of the same page kind. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define TIMEOUT_MS 30000

static volatile uint64_t sink; /* keeps the read loops from being optimized out */

struct peer_msg {
	struct peer_run run;
	int failed;
	int reps; /* read timings that follow: reps shared, then reps private */
};

/* The whole of len bytes through a pipe, in either direction. */
static int transfer_all(int fd, void *buf, size_t len, bool out)
{
	char *p = buf;

	while (len) {
		ssize_t n = out ? write(fd, p, len) : read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	return transfer_all(fd, (void *)buf, len, true);
}

static int read_all(int fd, void *buf, size_t len)
{
	return transfer_all(fd, buf, len, false);
}

static double time_sum(const void *base, uint64_t len)
{
	double t0 = cli_now();

	sink += bench_sum_words(base, len);
	return cli_now() - t0;
}

/* The first pass over each mapping faults its page tables in; it is not
 * counted. The two mappings alternate so drift hits both alike. */
static int time_reads(const struct bench_config *b, const void *shared, double *shared_s,
		      double *private_s, struct peer_run *run)
{
	struct bare_map priv;
	int rc = bare_create(b->pages, b->size, &priv);

	if (!rc)
		rc = bare_populate(&priv);
	if (rc) {
		snprintf(run->error, sizeof(run->error), "the private %s mapping: %s",
			 sseg_pages_name(b->pages), strerror(-rc));
		bare_destroy(&priv);
		return -1;
	}
	bare_pages_label(b->pages, &priv, run->private_pages, sizeof(run->private_pages));
	time_sum(shared, b->size);
	time_sum(priv.base, b->size);
	for (int i = 0; i < b->reps; i++) {
		shared_s[i] = time_sum(shared, b->size);
		private_s[i] = time_sum(priv.base, b->size);
	}
	bare_destroy(&priv);
	return 0;
}

static int barrier(struct sseg_local_group *g)
{
	unsigned char mine = 1, all[2];

	return sseg_local_allgather(&mine, all, 1, g);
}

/* Both ranks: create, exchange, complete (timed), then the peer's reads. */
static int run_rank(const struct bench_config *b, const char *name, int rank, bool reads,
		    struct peer_msg *msg, double *shared_s, double *private_s)
{
	SSEG_OPTS(o, .name = name, .size = b->size, .world_size = 2, .rank = rank,
		  .owner_rank = 0, .pages = b->pages, .timeout_ms = TIMEOUT_MS,
		  .populate = reads ? SSEG_POPULATE_OWNER : SSEG_POPULATE_LAZY);
	unsigned char blob[SSEG_BLOB_SIZE], blobs[2 * SSEG_BLOB_SIZE];
	struct sseg_info info = { .sz = sizeof(info) };
	struct sseg_local_group *g = NULL;
	sseg_t *seg = NULL;
	double t0;
	int rc;

	rc = sseg_local_group_open(name, rank, 2, TIMEOUT_MS, &g);
	if (!rc) {
		int created = sseg_create(&o, &seg, blob);

		rc = sseg_local_allgather(blob, blobs, SSEG_BLOB_SIZE, g);
		rc = created ? created : rc;
	}
	t0 = cli_now();
	if (!rc)
		rc = sseg_complete(seg, blobs);
	msg->run.complete_s = cli_now() - t0;
	if (rc)
		snprintf(msg->run.error, sizeof(msg->run.error), "rank %d: %s", rank,
			 sseg_last_error());
	if (!rc && !sseg_info(seg, &info)) {
		msg->run.pages = info.pages;
		msg->run.page_size = info.page_size;
	}
	if (!rc && rank == 1 && reads)
		rc = time_reads(b, sseg_base(seg), shared_s, private_s, &msg->run);
	if (g && barrier(g) && !rc)
		rc = -1;
	sseg_destroy(seg);
	if (g)
		sseg_local_group_close(g);
	msg->failed = rc != 0;
	return rc;
}

static void peer_child(const struct bench_config *b, const char *name, bool reads, int fd)
{
	double *times = calloc(2 * (size_t)b->reps, sizeof(double));
	struct peer_msg msg;

	memset(&msg, 0, sizeof(msg));
	if (!times)
		_exit(1);
	run_rank(b, name, 1, reads, &msg, times, times + b->reps);
	msg.reps = reads && !msg.failed ? b->reps : 0;
	if (write_all(fd, &msg, sizeof(msg)) ||
	    write_all(fd, times, 2 * (size_t)msg.reps * sizeof(double)))
		_exit(1);
	_exit(msg.failed);
}

static int collect_peer(int fd, pid_t pid, const struct bench_config *b, double *shared_s,
			double *private_s, struct peer_run *run)
{
	struct peer_msg msg;
	int status, rc = -1;

	memset(&msg, 0, sizeof(msg));
	if (read_all(fd, &msg, sizeof(msg))) {
		snprintf(run->error, sizeof(run->error), "the peer process sent no result");
	} else if (msg.failed) {
		*run = msg.run;
	} else if (msg.reps && (read_all(fd, shared_s, (size_t)b->reps * sizeof(double)) ||
				read_all(fd, private_s, (size_t)b->reps * sizeof(double)))) {
		snprintf(run->error, sizeof(run->error), "the peer's timings were cut short");
	} else {
		*run = msg.run;
		rc = 0;
	}
	if (waitpid(pid, &status, 0) == pid && WIFSIGNALED(status)) {
		snprintf(run->error, sizeof(run->error), "the peer was killed by signal %d (%s)",
			 WTERMSIG(status), strsignal(WTERMSIG(status)));
		rc = -1;
	}
	return rc;
}

int bench_two_ranks(const struct bench_config *b, double *shared_s, double *private_s,
		    struct peer_run *run)
{
	static int runs;
	bool reads = shared_s != NULL;
	struct peer_msg owner;
	char name[SSEG_NAME_MAX + 1];
	int fds[2], rc;
	pid_t pid;

	memset(run, 0, sizeof(*run));
	snprintf(name, sizeof(name), "sseg-bench-%d-%d", (int)getpid(), runs++);
	if (pipe(fds))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		peer_child(b, name, reads, fds[1]);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		snprintf(run->error, sizeof(run->error), "fork: %s", strerror(errno));
		return -1;
	}
	memset(&owner, 0, sizeof(owner));
	rc = run_rank(b, name, 0, reads, &owner, NULL, NULL);
	if (collect_peer(fds[0], pid, b, shared_s, private_s, run))
		rc = -1;
	else if (rc)
		*run = owner.run;
	close(fds[0]);
	return rc ? -1 : 0;
}
