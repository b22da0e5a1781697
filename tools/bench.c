/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg bench: the benchmarks are a program of their own (bench/),
 * sharedseg-bench, which lies beside this tool wherever the tool is: the
 * build directory, the installed bin/, the wheel's sharedseg/_tool/. This
 * command runs it with its own arguments; nothing of it is linked here. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define BENCH_PROGRAM "sharedseg-bench"

void bench_help(FILE *out)
{
	fprintf(out,
		"usage: sharedseg bench [OPTIONS]\n"
		"\n"
		"Population rate, a peer's attach time and read bandwidth against private\n"
		"buffers, and the benchmarks' driver (case, limits, retouch, alternatives).\n"
		"The benchmarks are a program of their own beside the tool, " BENCH_PROGRAM ":\n"
		"sharedseg bench ARGS runs " BENCH_PROGRAM " ARGS; sharedseg bench --help\n"
		"lists its options.\n");
}

/* The benchmarks' program in path: this program's folder (symbolic links
 * resolved) and BENCH_PROGRAM. 0, or CLI_USAGE after a sentence. */
static int bench_program(char *path, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", path, len - 1);
	char *slash;

	if (n < 0)
		return cli_usage_error("bench", "cannot read /proc/self/exe (%s), which says where "
				       "this tool lies and " BENCH_PROGRAM " beside it",
				       strerror(errno));
	path[n] = '\0';
	slash = strrchr(path, '/');
	if (!slash || (size_t)(slash + 1 - path) + sizeof(BENCH_PROGRAM) > len)
		return cli_usage_error("bench", "this tool's folder is too long a path to name "
				       BENCH_PROGRAM " in");
	memcpy(slash + 1, BENCH_PROGRAM, sizeof(BENCH_PROGRAM));
	return 0;
}

int bench_main(int argc, char **argv)
{
	char path[PATH_MAX], shown[CLI_SHOWN];
	int rc = bench_program(path, sizeof(path));

	if (rc)
		return rc;
	cli_visible(path, shown, sizeof(shown));
	if (access(path, X_OK))
		return cli_usage_error("bench", "the benchmarks' program is not beside this tool "
				       "(no executable %s): build it with the tool (make) or "
				       "install both (make install)", shown);
	fflush(stdout);
	argv[0] = path;
	execv(path, argv);
	fprintf(stderr, "sharedseg bench: cannot run %s: %s\n", shown, strerror(errno));
	return CLI_FAIL;
}
