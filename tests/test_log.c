/* SPDX-License-Identifier: Apache-2.0 */
/* Messages belong to the application: sseg_set_log routes them, the level
 * filters them (SHAREDSEG_LOG=off silences the default writer), and what a
 * stranger can cause comes at most once per interval with a count, told
 * even when the flood stops. The default writer never blocks, not even on
 * a full pipe. A SHAREDSEG_LOG that names no level is ignored and said
 * once, with the levels it takes, also by a command that logs nothing. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "testutil.h"

static char lines[16][SSEG_ERR_MAX + 128];
static enum sseg_log_level levels[16];
static int nlines;

static void capture(enum sseg_log_level level, const char *message, void *ctx)
{
	CHECK(ctx == (void *)lines);
	if (nlines < 16) {
		levels[nlines] = level;
		snprintf(lines[nlines++], sizeof(lines[0]), "%s", message);
	}
}

/* The span a line tells ("in the last 250 ms", "in the last 2 s") lies
 * within [lo, hi] seconds, measured around the calls rather than assumed
 * from a sleep (a loaded machine oversleeps); in ms below a second. */
static int span_within(const char *line, double lo, double hi)
{
	const char *at = strstr(line, "in the last ");
	char unit[3] = "";
	int n;

	if (!at || sscanf(at + strlen("in the last "), "%d %2[a-z]", &n, unit) != 2)
		return 0;
	if (!strcmp(unit, "ms"))
		return lo < 1.0 && n >= (int)(lo * 1000.0) && n <= (int)(hi * 1000.0) + 1;
	return !strcmp(unit, "s") && hi >= 1.0 && n >= (int)lo && n <= (int)hi + 1;
}

/* pages=auto: a warning the library gives on its own where it falls back.
 * Returns the page kind obtained. */
static enum sseg_pages one_segment(enum sseg_pages pages, uint64_t size)
{
	SSEG_OPTS(o, .name = "log", .size = size, .world_size = 1, .pages = pages,
		  .populate = SSEG_POPULATE_LAZY);
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_info(seg, &info), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	return info.pages;
}

/* The fall-back warning: where pages=auto gives base pages to a segment
 * of at least one huge page, never for a smaller one (one huge page could
 * not have served it better). */
static void fall_back_warning(void)
{
	enum sseg_pages got;

	sseg_set_log(capture, lines);
	sseg_set_log_level(SSEG_LOG_WARN);
	nlines = 0;
	one_segment(SSEG_PAGES_AUTO, 1 << 20);
	CHECK(nlines == 0);
	got = one_segment(SSEG_PAGES_AUTO, 4 << 20);
	if (got == SSEG_PAGES_BASE)
		CHECK(nlines == 1 && levels[0] == SSEG_LOG_WARN &&
		      strstr(lines[0], "pages=auto fell back to 4 KiB pages: "));
	else
		CHECK(nlines == 0);
	sseg_set_log(NULL, NULL);
}

static void callback_and_level(void)
{
	static struct sseg_ratelimit rl;
	double first[2], told[2];

	sseg_set_log(capture, lines);
	sseg_set_log_level(SSEG_LOG_INFO);
	sseg_log(SSEG_LOG_INFO, "hello %d", 42);
	sseg_log(SSEG_LOG_DEBUG, "not at info");
	CHECK(nlines == 1 && levels[0] == SSEG_LOG_INFO && !strcmp(lines[0], "hello 42"));
	/* Three refusals within the interval: one line, then the count. */
	first[0] = tu_now();
	for (int i = 0; i < 3; i++)
		sseg_log_limited(&rl, 0.2, SSEG_LOG_WARN, "refused a connection");
	first[1] = tu_now();
	CHECK(nlines == 2 && !strcmp(lines[1], "refused a connection"));
	usleep(250 * 1000);
	told[0] = tu_now();
	sseg_log_limited(&rl, 0.2, SSEG_LOG_WARN, "refused a connection");
	told[1] = tu_now();
	CHECK(nlines == 3 &&
	      strstr(lines[2], "refused a connection (and 2 more like it in the last "));
	/* a quarter second or so, in ms, not "0 s" */
	CHECK(span_within(lines[2], told[0] - first[1], told[1] - first[0]));
	sseg_set_log_level(SSEG_LOG_OFF);
	sseg_log(SSEG_LOG_ERROR, "silenced");
	CHECK(nlines == 3);
	CHECK(sseg_log_level() == SSEG_LOG_OFF);
	sseg_set_log_level(SSEG_LOG_WARN);
	sseg_set_log(NULL, NULL);
}

/* A flood that stops: once its interval has passed, its held-back count is
 * told by the next line of any cause, or by sseg_destroy; within the
 * interval neither tells it (one line per cause and interval). */
static void held_back_told(void)
{
	static struct sseg_ratelimit rl;
	double first[2], told[2];

	sseg_set_log(capture, lines);
	nlines = 0;
	first[0] = tu_now();
	for (int i = 0; i < 4; i++)
		sseg_log_limited(&rl, 0.2, SSEG_LOG_WARN, "refused connection %d", i);
	first[1] = tu_now();
	sseg_log(SSEG_LOG_ERROR, "within the interval");
	CHECK(nlines == 2 && !strcmp(lines[1], "within the interval"));
	usleep(250 * 1000);
	told[0] = tu_now();
	sseg_log(SSEG_LOG_ERROR, "another cause");
	told[1] = tu_now();
	CHECK(nlines == 4 && levels[2] == SSEG_LOG_WARN &&
	      strstr(lines[2], "refused connection 3 (3 like it in the last ") &&
	      strstr(lines[2], ", held back)") && !strcmp(lines[3], "another cause"));
	CHECK(span_within(lines[2], told[0] - first[1], told[1] - first[0]));
	sseg_log(SSEG_LOG_ERROR, "told once");
	CHECK(nlines == 5);

	usleep(250 * 1000);
	sseg_log_limited(&rl, 0.2, SSEG_LOG_WARN, "refused connection %d", 4);
	sseg_log_limited(&rl, 0.2, SSEG_LOG_WARN, "refused connection %d", 5);
	CHECK(nlines == 6);
	usleep(250 * 1000);
	one_segment(SSEG_PAGES_BASE, 1 << 20);
	CHECK(nlines == 7 && strstr(lines[6], "refused connection 5 (1 like it"));
	sseg_set_log(NULL, NULL);
}

/* The default writer, in a child whose stderr the test reads, with the
 * environment read at first use. */
static int child_writes(void *arg)
{
	setenv("SHAREDSEG_LOG", (const char *)arg, 1);
	sseg_log(SSEG_LOG_WARN, "a warning");
	sseg_log(SSEG_LOG_ERROR, "an error");
	return 0;
}

/* The same under the spelling of 0.2 and before: still read, and its use
 * told once. */
static int child_writes_old_name(void *arg)
{
	setenv("SSEG_LOG", (const char *)arg, 1);
	sseg_log(SSEG_LOG_WARN, "a warning");
	sseg_log(SSEG_LOG_ERROR, "an error");
	sseg_log(SSEG_LOG_WARN, "another warning");
	return 0;
}

/* Both set: the new name wins, the old one is still told. */
static int child_writes_both_names(void *arg)
{
	setenv("SHAREDSEG_LOG", (const char *)arg, 1);
	setenv("SSEG_LOG", "off", 1);
	sseg_log(SSEG_LOG_WARN, "a warning");
	return 0;
}

/* A driver library named under the old spelling is still loaded (the
 * error names the path it tried), and the old name is told. */
static int child_old_driver_name(void *arg)
{
	setenv("SSEG_CUDA_LIBRARY", (const char *)arg, 1);
	if (sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO) == 0)
		return 1;
	fprintf(stderr, "%s\n", sseg_last_error());
	return 0;
}

/* Held back when the process exits: told on its way out. */
static int child_holds_back(void *arg)
{
	static struct sseg_ratelimit rl;

	(void)arg;
	for (int i = 0; i < 3; i++)
		sseg_log_limited(&rl, 60.0, SSEG_LOG_WARN, "refused connection %d", i);
	exit(0);
}

static char child_output[1024]; /* what the last child wrote */

static int count_of(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void default_writer(int (*child)(void *), const char *env, const char *expect_absent,
			   const char *expect)
{
	char buf[1024] = "";
	int fds[2], saved = dup(STDERR_FILENO);
	ssize_t n;

	CHECK(pipe(fds) == 0);
	dup2(fds[1], STDERR_FILENO);
	CHECK(tu_wait(tu_fork(child, (void *)env), 5000) == 0);
	dup2(saved, STDERR_FILENO);
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	memcpy(child_output, buf, sizeof(child_output));
	close(fds[0]);
	close(saved);
	if (expect)
		CHECK(strstr(buf, expect));
	if (expect_absent)
		CHECK(!strstr(buf, expect_absent));
}

/* What the command line writes on stderr (stdout dropped) with this
 * environment: the warning of a bad SHAREDSEG_LOG comes from the library
 * as it is loaded, also where nothing else is logged (probe), and once
 * for the command, not once per rank it forks (demo). */
static void cli_stderr(const char *env, const char *args, char *buf, size_t len)
{
	char cmd[512];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s %s %s 2>&1 >/dev/null", env, tu_build_file("sharedseg"),
		 args);
	p = popen(cmd, "r");
	CHECK(p);
	while (n < len - 1 && !feof(p))
		n += fread(buf + n, 1, len - 1 - n, p);
	buf[n] = '\0';
	CHECK(pclose(p) == 0);
}

static void bad_level_from_the_cli(void)
{
	static char err[8192];

	cli_stderr("SHAREDSEG_LOG=garbage", "probe", err, sizeof(err));
	CHECK(count_of(err, "SHAREDSEG_LOG=garbage is not a log level and is ignored: it "
			    "takes off, none, error, warn, info or debug") == 1);
	cli_stderr("SHAREDSEG_LOG=garbage", "demo --ranks 2 --size 8MiB --pages base", err,
		   sizeof(err));
	CHECK(count_of(err, "SHAREDSEG_LOG=garbage is not a log level") == 1);
	cli_stderr("SHAREDSEG_LOG=warn", "probe", err, sizeof(err));
	CHECK(!strstr(err, "not a log level"));
}

/* ---- stderr a full pipe that nobody drains ---- */

#define FLOOD_LINES 2000
#define FULL_TIMEOUT_MS 3000

static void *log_flood(void *arg)
{
	(void)arg;
	for (int i = 0; i < FLOOD_LINES; i++)
		sseg_log(SSEG_LOG_WARN, "flood line %d", i);
	return NULL;
}

/* stderr is already full and blocking: a write would hang, so a group that
 * completes in time while thousands of warnings are given never wrote. */
static int full_stderr_group(void *arg)
{
	struct tu_rank r[2];
	pthread_t flood;
	int *pipe_fds = arg;

	dup2(pipe_fds[1], STDERR_FILENO);
	close(pipe_fds[0]);
	memset(r, 0, sizeof(r));
	for (int i = 0; i < 2; i++)
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "log-full",
						.size = 1 << 20, .world_size = 2, .rank = i,
						.pages = SSEG_PAGES_BASE,
						.timeout_ms = FULL_TIMEOUT_MS };
	CHECK(pthread_create(&flood, NULL, log_flood, NULL) == 0);
	CHECK(tu_run_inproc(r, 2) == 0);
	CHECK(pthread_join(flood, NULL) == 0);
	tu_destroy_all(r, 2);
	sseg_log(SSEG_LOG_WARN, "after the flood");
	return 0;
}

static void full_stderr(void)
{
	static char chunk[4096], drained[1 << 20];
	size_t got = 0;
	int fds[2];
	ssize_t n;

	memset(chunk, 'x', sizeof(chunk));
	CHECK(pipe(fds) == 0);
	CHECK(fcntl(fds[1], F_SETFL, O_NONBLOCK) == 0);
	while (write(fds[1], chunk, sizeof(chunk)) > 0 || write(fds[1], chunk, 1) > 0)
		;
	CHECK(errno == EAGAIN);
	CHECK(fcntl(fds[1], F_SETFL, 0) == 0); /* a blocking write would now hang */
	CHECK(tu_wait(tu_fork(full_stderr_group, fds), 4 * FULL_TIMEOUT_MS) == 0);
	close(fds[1]);
	while (got < sizeof(drained) - 1 && (n = read(fds[0], drained + got,
						     sizeof(drained) - 1 - got)) > 0)
		got += (size_t)n;
	drained[got] = '\0';
	close(fds[0]);
	/* Nothing got in: the child's last line found the pipe still full. */
	CHECK(!strstr(drained, "sharedseg["));
}

int main(void)
{
	/* First: the children must read SHAREDSEG_LOG themselves, which they do
	 * only if this process has not logged yet. */
	default_writer(child_writes, "off", "sharedseg", NULL);
	default_writer(child_writes, "error", "a warning", "]: error: an error");
	default_writer(child_writes, "warn", NULL, "]: warning: a warning");
	default_writer(child_writes_old_name, "error", "a warning", "]: error: an error");
	default_writer(child_writes_old_name, "off", "sharedseg", NULL);
	default_writer(child_writes_old_name, "warn", NULL,
		       "]: warning: SSEG_LOG is deprecated: set SHAREDSEG_LOG instead");
	CHECK(count_of(child_output, "deprecated") == 1);
	CHECK(strstr(child_output, "another warning"));
	default_writer(child_writes_both_names, "warn", NULL, "SSEG_LOG is deprecated");
	default_writer(child_writes_both_names, "warn", NULL, "]: warning: a warning");
	default_writer(child_old_driver_name, "/nonexistent/old-name/libcuda.so.1", NULL,
		       "/nonexistent/old-name/libcuda.so.1");
	default_writer(child_old_driver_name, "/nonexistent/old-name/libcuda.so.1", NULL,
		       "SSEG_CUDA_LIBRARY is deprecated: set SHAREDSEG_CUDA_LIBRARY instead");
	/* A value that is no level: ignored, said once, with the levels. */
	default_writer(child_writes, "garbage", NULL,
		       "]: warning: SHAREDSEG_LOG=garbage is not a log level and is ignored: it "
		       "takes off, none, error, warn, info or debug\n");
	CHECK(count_of(child_output, "is not a log level") == 1);
	CHECK(strstr(child_output, "]: warning: a warning") && strstr(child_output, "an error"));
	default_writer(child_writes_old_name, "Debug", NULL,
		       "]: warning: SSEG_LOG=Debug is not a log level and is ignored");
	CHECK(count_of(child_output, "is not a log level") == 1);
	CHECK(count_of(child_output, "SSEG_LOG is deprecated") == 1);
	bad_level_from_the_cli();
	default_writer(child_holds_back, "warn", NULL,
		       "]: warning: refused connection 2 (2 like it in the last ");
	callback_and_level();
	fall_back_warning();
	held_back_told();
	full_stderr();
	printf("log: ok\n");
	return 0;
}
