/* SPDX-License-Identifier: Apache-2.0 */
/* The `sharedseg` command line: the commands, the help and the dispatch.
 * The C tool's main() and sharedseg._native.cli call sseg_cli_main. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_main.h"
#include "output.h"

static const struct cli_command commands[] = {
	{ "probe", "what this host can do: memfd, THP, HugeTLB pools, NUMA, backends",
	  probe_main, probe_help, false },
	{ "demo", "N processes map one segment; verify the bytes and show host memory use",
	  demo_main, demo_help, true },
	{ "bench", "population rate, peer attach time and read bandwidth against baselines",
	  bench_main, bench_help, true },
	{ "ls", "the segments live on this host: who maps them, how much is resident",
	  ls_main, ls_help, false },
	/* Runs until a signal stops it: the C tool's, never inside an interpreter. */
	{ "keep", "hold segments between groups, so that a restarted engine finds its memory",
	  keep_main, keep_help, true },
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct cli_command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

/* "probe, demo, bench, ls, keep": from the table, so a new command is named. */
static const char *command_names(void)
{
	static char names[128];
	size_t n = 0;

	for (size_t i = 0; i < NCOMMANDS && n < sizeof(names); i++)
		n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s", i ? ", " : "",
				      commands[i].name);
	return names;
}

static void main_help(FILE *out)
{
	fprintf(out,
		"usage: sharedseg COMMAND [OPTIONS]\n"
		"       sharedseg help COMMAND | sharedseg COMMAND --help\n"
		"       sharedseg --version\n"
		"\n"
		"One host-memory segment, allocated once by an owner rank and mapped by\n"
		"every rank of a group (a sealed memfd handed over by SCM_RIGHTS), instead\n"
		"of one private copy per rank.\n"
		"\n"
		"commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-7s %s\n", commands[i].name, commands[i].summary);
	fprintf(out,
		"  help    help on one command\n"
		"\n"
		"examples:\n"
		"  sharedseg probe --size 16GiB\n"
		"  sharedseg demo --ranks 8 --size 4GiB --pages thp\n"
		"  sharedseg bench --size 1GiB --pages base --reps 5\n"
		"  sharedseg ls\n"
		"  sharedseg keep --name kv-tier\n"
		"\n"
		"Exit status: 0 success, 1 a failure (the library's error is printed, or\n"
		"\"write error\": stdout refused the output), 2 a bad argument or a page\n"
		"kind/backend this machine does not offer.\n"
		"SHAREDSEG_LOG=off|error|warn|info|debug sets the library's log level (default warn).\n");
}

static int help_command(int argc, char **argv)
{
	const struct cli_command *c;
	char shown[CLI_SHOWN];

	if (argc < 2) {
		main_help(stdout);
		return CLI_OK;
	}
	c = find_command(argv[1]);
	if (!c)
		return cli_usage_error("help", "unknown command '%s' (commands: %s)",
				       cli_visible(argv[1], shown, sizeof(shown)), command_names());
	c->help(stdout);
	return CLI_OK;
}

bool sseg_cli_c_tool_only(const char *command)
{
	const struct cli_command *c = find_command(command);

	return c && c->c_tool_only;
}

static int run(int argc, char **argv)
{
	const struct cli_command *c;
	char shown[CLI_SHOWN];

	if (argc < 2) {
		main_help(stderr);
		return CLI_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		main_help(stdout);
		return CLI_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("sharedseg %d.%d.%d\n", SSEG_VERSION_MAJOR, SSEG_VERSION_MINOR,
		       SSEG_VERSION_PATCH);
		return CLI_OK;
	}
	if (!strcmp(argv[1], "help"))
		return help_command(argc - 1, argv + 1);
	c = find_command(argv[1]);
	if (!c)
		return cli_usage_error(NULL, "unknown command '%s' (commands: %s; see sharedseg --help)",
				       cli_visible(argv[1], shown, sizeof(shown)), command_names());
	return c->run(argc - 1, argv + 1);
}

int sseg_cli_main(int argc, char **argv)
{
	return cli_output_written(run(argc, argv));
}
