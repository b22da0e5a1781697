/* SPDX-License-Identifier: Apache-2.0 */
/* tu_run_cases: no argument runs every case, a name runs that case alone,
 * a name that is no case fails with a sentence listing the cases, and a
 * case that ends otherwise than it must fails the program. Proven on a
 * table of its own (this program run again with SSEG_RUN_CASES_INNER set)
 * and on test_fake_acl "trust list". */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runcases.h"
#include "testutil.h"

/* Each case says it ran in a line of its own, written past stdio's buffer. */
static int say_ran(void *arg)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "ran %s\n", (const char *)arg);

	CHECK(write(STDOUT_FILENO, line, (size_t)n) == n);
	return getenv("SSEG_RUN_CASES_FAIL") && !strcmp(getenv("SSEG_RUN_CASES_FAIL"), arg);
}

static int aborts(void *arg)
{
	say_ran(arg);
	abort();
}

static const struct tu_case inner_cases[] = {
	{ "first", say_ran, "first", 0 },
	{ "second case", say_ran, "second case", 0 },
	{ "aborts", aborts, "aborts", 128 + SIGABRT },
	{ NULL, NULL, NULL, 0 },
};

struct outcome {
	int status;
	char text[8192]; /* stdout and stderr together */
};

struct command {
	char *const *argv;
	int out;
};

static int exec_command(void *arg)
{
	const struct command *c = arg;

	dup2(c->out, STDOUT_FILENO);
	dup2(c->out, STDERR_FILENO);
	execv(c->argv[0], c->argv);
	return 126;
}

/* Runs argv with its output gathered; the program must end within a minute. */
static void run_program(char *const *argv, struct outcome *o)
{
	int pipefd[2];
	struct command c = { argv, -1 };
	size_t len = 0;
	pid_t pid;

	CHECK(pipe(pipefd) == 0);
	c.out = pipefd[1];
	pid = tu_fork(exec_command, &c);
	close(pipefd[1]);
	for (;;) {
		struct pollfd p = { .fd = pipefd[0], .events = POLLIN };
		ssize_t n;

		CHECK(poll(&p, 1, 60000) == 1);
		n = read(pipefd[0], o->text + len, sizeof(o->text) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		CHECK(n >= 0);
		if (n == 0)
			break;
		len += (size_t)n;
		CHECK(len < sizeof(o->text) - 1);
	}
	o->text[len] = '\0';
	close(pipefd[0]);
	o->status = tu_wait(pid, 60000);
}

/* How many lines of text begin with prefix. */
static int lines_with(const char *text, const char *prefix)
{
	const char *line = text;
	int n = 0;

	while (line) {
		n += !strncmp(line, prefix, strlen(prefix));
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return n;
}

static int has_line(const char *text, const char *line)
{
	size_t len = strlen(line);

	for (const char *at = strstr(text, line); at; at = strstr(at + 1, line))
		if ((at == text || at[-1] == '\n') && (at[len] == '\n' || at[len] == '\0'))
			return 1;
	return 0;
}

static void show(const char *what, const struct outcome *o)
{
	if (getenv("SSEG_TEST_VERBOSE"))
		fprintf(stderr, "== %s: status %d\n%s", what, o->status, o->text);
}

static void every_case(char *self)
{
	struct outcome o;

	run_program((char *[]){ self, NULL }, &o);
	show("no argument", &o);
	CHECK(o.status == 0);
	CHECK(lines_with(o.text, "ran ") == 3 && lines_with(o.text, "ok ") == 3);
	CHECK(has_line(o.text, "ok first") && has_line(o.text, "ok second case") &&
	      has_line(o.text, "ok aborts"));
}

static void one_case(char *self)
{
	struct outcome o;

	run_program((char *[]){ self, "second case", NULL }, &o);
	show("one case", &o);
	CHECK(o.status == 0);
	CHECK(lines_with(o.text, "ran ") == 1 && has_line(o.text, "ran second case"));
	CHECK(lines_with(o.text, "ok ") == 1 && has_line(o.text, "ok second case"));
}

static void unknown_case(char *self)
{
	struct outcome o;

	run_program((char *[]){ self, "first", "third", NULL }, &o);
	show("unknown case", &o);
	CHECK(o.status == 1);
	CHECK(lines_with(o.text, "ran ") == 0); /* not even the one that exists */
	CHECK(strstr(o.text, "no case \"third\"; its cases: \"first\", \"second case\", "
			     "\"aborts\""));
}

static void failing_case(char *self)
{
	struct outcome o;

	setenv("SSEG_RUN_CASES_FAIL", "first", 1);
	run_program((char *[]){ self, NULL }, &o);
	unsetenv("SSEG_RUN_CASES_FAIL");
	show("failing case", &o);
	CHECK(o.status == 1);
	/* The others still ran and passed; the failure is told. */
	CHECK(lines_with(o.text, "ran ") == 3 && lines_with(o.text, "ok ") == 2);
	CHECK(strstr(o.text, "case \"first\" ended with status 1, expected 0"));
}

/* A real test program, one case by its name. */
static void fake_acl_case(void)
{
	char program[4096];
	struct outcome o;

	snprintf(program, sizeof(program), "%s", tu_build_file("tests/test_fake_acl"));
	run_program((char *[]){ program, "trust list", NULL }, &o);
	show("test_fake_acl \"trust list\"", &o);
	CHECK(o.status == 0);
	CHECK(lines_with(o.text, "ok ") == 1 && has_line(o.text, "ok trust list"));
	run_program((char *[]){ program, "no such case", NULL }, &o);
	show("test_fake_acl \"no such case\"", &o);
	CHECK(o.status == 1 && lines_with(o.text, "ok ") == 0);
	CHECK(strstr(o.text, "no case \"no such case\"; its cases: \"init and context\""));
}

int main(int argc, char **argv)
{
	char self[4096];
	ssize_t n;

	if (getenv("SSEG_RUN_CASES_INNER"))
		return tu_run_cases(argc, argv, inner_cases);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	CHECK(n > 0);
	self[n] = '\0';
	setenv("SSEG_RUN_CASES_INNER", "1", 1);
	every_case(self);
	one_case(self);
	unknown_case(self);
	failing_case(self);
	unsetenv("SSEG_RUN_CASES_INNER");
	fake_acl_case();
	printf("run_cases: ok\n");
	return 0;
}
