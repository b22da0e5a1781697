/* SPDX-License-Identifier: Apache-2.0 */
/* Messages belong to the application: sseg_set_log routes them, the level
 * filters them (SSEG_LOG=off silences the default writer), and what a
 * stranger can cause comes at most once per interval with a count. */
#include <fcntl.h>
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

/* A warning the library gives on its own: pages=auto falling back. */
static void fall_back(void)
{
	SSEG_OPTS(o, .name = "log", .size = 1 << 20, .world_size = 1, .pages = SSEG_PAGES_AUTO,
		  .populate = SSEG_POPULATE_LAZY);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_destroy(seg), 0);
}

static void callback_and_level(void)
{
	struct sseg_ratelimit rl = { 0 };

	sseg_set_log(capture, lines);
	sseg_set_log_level(SSEG_LOG_INFO);
	sseg_log(SSEG_LOG_INFO, "hello %d", 42);
	sseg_log(SSEG_LOG_DEBUG, "not at info");
	CHECK(nlines == 1 && levels[0] == SSEG_LOG_INFO && !strcmp(lines[0], "hello 42"));
	/* Three refusals within the interval: one line, then the count. */
	for (int i = 0; i < 3; i++)
		sseg_log_limited(&rl, 0.2, SSEG_LOG_WARN, "refused a connection");
	CHECK(nlines == 2 && !strcmp(lines[1], "refused a connection"));
	usleep(250 * 1000);
	sseg_log_limited(&rl, 0.2, SSEG_LOG_WARN, "refused a connection");
	CHECK(nlines == 3 &&
	      strstr(lines[2], "refused a connection (and 2 more like it in the last 0 s)"));
	sseg_set_log_level(SSEG_LOG_OFF);
	sseg_log(SSEG_LOG_ERROR, "silenced");
	CHECK(nlines == 3);
	CHECK(sseg_log_level() == SSEG_LOG_OFF);
	sseg_set_log_level(SSEG_LOG_WARN);
	nlines = 0;
	fall_back();
	if (nlines) /* only where pages=auto had to fall back here */
		CHECK(levels[0] == SSEG_LOG_WARN && strstr(lines[0], "pages=auto fell back"));
	sseg_set_log(NULL, NULL);
}

/* The default writer, in a child whose stderr the test reads, with the
 * environment read at first use. */
static int child_writes(void *arg)
{
	setenv("SSEG_LOG", (const char *)arg, 1);
	sseg_log(SSEG_LOG_WARN, "a warning");
	sseg_log(SSEG_LOG_ERROR, "an error");
	return 0;
}

static void default_writer(const char *env, const char *expect_absent, const char *expect)
{
	char buf[1024] = "";
	int fds[2], saved = dup(STDERR_FILENO);
	ssize_t n;

	CHECK(pipe(fds) == 0);
	dup2(fds[1], STDERR_FILENO);
	CHECK(tu_wait(tu_fork(child_writes, (void *)env), 5000) == 0);
	dup2(saved, STDERR_FILENO);
	close(fds[1]);
	n = read(fds[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	close(saved);
	if (expect)
		CHECK(strstr(buf, expect));
	if (expect_absent)
		CHECK(!strstr(buf, expect_absent));
}

int main(void)
{
	/* First: the children must read SSEG_LOG themselves, which they do
	 * only if this process has not logged yet. */
	default_writer("off", "sharedseg", NULL);
	default_writer("error", "a warning", "]: error: an error");
	default_writer("warn", NULL, "]: warning: a warning");
	callback_and_level();
	printf("log: ok\n");
	return 0;
}
