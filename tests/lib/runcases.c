/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runcases.h"
#include "testutil.h"

static const char *program(char **argv)
{
	const char *slash = argv[0] ? strrchr(argv[0], '/') : NULL;

	return slash ? slash + 1 : argv[0] ? argv[0] : "test";
}

static const struct tu_case *find_case(const struct tu_case *cases, const char *name)
{
	for (const struct tu_case *c = cases; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

static void list_cases(const char *prog, const char *name, const struct tu_case *cases)
{
	fprintf(stderr, "%s: no case \"%s\"; its cases:", prog, name);
	for (const struct tu_case *c = cases; c->name; c++)
		fprintf(stderr, "%s \"%s\"", c == cases ? "" : ",", c->name);
	fprintf(stderr, "\n");
}

/* The child: what the case printed is not lost in stdio's buffer by the
 * child's _exit. */
static int in_child(void *arg)
{
	const struct tu_case *c = arg;
	int st = c->fn(c->arg);

	fflush(stdout);
	fflush(stderr);
	return st;
}

/* TU_CASE_TIMEOUT_MS, or $SSEG_CASE_TIMEOUT_MS where a run asks for more
 * (the benchmark raises a case's rounds). */
static int case_timeout(void)
{
	const char *env = getenv("SSEG_CASE_TIMEOUT_MS");
	int ms = env ? atoi(env) : 0;

	return ms > 0 ? ms : TU_CASE_TIMEOUT_MS;
}

/* 0 when the case ended as it must, else 1 (and says how it ended). */
static int run_case(const char *prog, const struct tu_case *c)
{
	int st = tu_wait(tu_fork(in_child, (void *)c), case_timeout());

	if (st == c->want) {
		printf("ok %s\n", c->name);
		return 0;
	}
	if (st == -1)
		fprintf(stderr, "%s: case \"%s\" ran past %d ms\n", prog, c->name,
			case_timeout());
	else
		fprintf(stderr, "%s: case \"%s\" ended with status %d, expected %d\n", prog,
			c->name, st, c->want);
	return 1;
}

int tu_run_cases(int argc, char **argv, const struct tu_case *cases)
{
	const char *prog = program(argv);
	int failed = 0;

	for (int i = 1; i < argc; i++)
		if (!find_case(cases, argv[i])) {
			list_cases(prog, argv[i], cases);
			return 1;
		}
	if (argc < 2)
		for (const struct tu_case *c = cases; c->name; c++)
			failed += run_case(prog, c);
	for (int i = 1; i < argc; i++)
		failed += run_case(prog, find_case(cases, argv[i]));
	return failed ? 1 : 0;
}
