/* SPDX-License-Identifier: Apache-2.0 */
/* `sharedseg keep`: a keeper in the foreground until SIGTERM, SIGINT or
 * SIGHUP (sseg_keeper_run); a signal it was started ignoring (nohup's
 * SIGHUP, a background job's SIGINT) stays ignored. Its lines are the
 * library's, at info. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "keeper_serve.h"

enum { OPT_NAME = 1 };

static const struct cli_opt keep_opts[] = {
	{ "name", true, OPT_NAME },
	{ NULL, false, 0 },
};

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
	(void)sig;
	stop_asked = 1;
}

static int asked_to_stop(void *ctx)
{
	(void)ctx;
	return stop_asked;
}

void keep_help(FILE *out)
{
	fprintf(out,
		"usage: sharedseg keep --name NAME\n"
		"\n"
		"Runs a keeper: a process that holds the segments owners leave with it, so\n"
		"that a group started later (an engine restarted) maps the same memory and\n"
		"finds what its predecessor wrote, instead of allocating anew. An owner\n"
		"names the keeper in its options (C: opts.keeper; Python:\n"
		"create_shared_segment(keeper=NAME)); it takes the kept segment only when\n"
		"every declared field is equal (name, size, layout, pages, backend, flags,\n"
		"world size, owner rank, NUMA placement, sharedseg version), and otherwise\n"
		"the keeper frees it and says why. memfd segments only.\n"
		"\n"
		"Only this user's processes are served (the socket's peer credentials); it\n"
		"maps no segment, only a tag page per segment that `sharedseg ls` shows as\n"
		"\"keeper NAME\". The memory it holds stays allocated while it runs: stop it\n"
		"(SIGTERM, SIGINT, SIGHUP; one it was started ignoring, as under nohup,\n"
		"stays ignored) and every segment no process maps is freed; a\n"
		"keeper killed with SIGKILL leaks nothing either (the kernel closes its\n"
		"descriptors).\n"
		"\n"
		"options:\n"
		"  --name NAME  the keeper's name, 1 to 63 bytes of A-Z a-z 0-9 . _ -; one\n"
		"               keeper of a name per user and host\n"
		"\n"
		"Its lines go to stderr at log level info (SHAREDSEG_LOG sets another).\n"
		"Exit status: 0 stopped by a signal, 1 a failure (the name taken), 2 a bad\n"
		"argument.\n");
}

/* As POSIX asks of a program: a signal inherited as ignored stays so. */
static void stop_on(int sig, const struct sigaction *sa)
{
	struct sigaction was;

	if (!sigaction(sig, NULL, &was) && was.sa_handler == SIG_IGN)
		return;
	sigaction(sig, sa, NULL);
}

int keep_main(int argc, char **argv)
{
	struct cli_args a = { "keep", argc, argv, 1 };
	struct sigaction sa = { .sa_handler = on_stop };
	const char *name = NULL, *v;
	int id, rc;

	while ((id = cli_next(&a, keep_opts, &v)) != CLI_OPT_END) {
		if (id == CLI_OPT_HELP) {
			keep_help(stdout);
			return CLI_OK;
		}
		if (id == CLI_OPT_BAD)
			return CLI_USAGE;
		name = v;
	}
	if (!name)
		return cli_usage_error("keep", "--name is required");
	if (!getenv("SHAREDSEG_LOG"))
		sseg_set_log_level(SSEG_LOG_INFO);
	sigaction(SIGTERM, &sa, NULL);
	stop_on(SIGINT, &sa);
	stop_on(SIGHUP, &sa);
	rc = sseg_keeper_run(name, asked_to_stop, NULL);
	if (rc == -EINVAL) /* the name: the one argument */
		return cli_usage_error("keep", "--name: %s", sseg_last_error());
	if (rc) {
		fprintf(stderr, "sharedseg keep: %s\n", sseg_last_error());
		return CLI_FAIL;
	}
	return CLI_OK;
}
