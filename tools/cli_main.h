/* SPDX-License-Identifier: Apache-2.0 */
/* The `sharedseg` command line as one call: the C tool's main() and the
 * Python package's command (sharedseg._native.cli) both run it. */
#ifndef SSEG_CLI_MAIN_H
#define SSEG_CLI_MAIN_H

#include <stdbool.h>

/* argv[0] is the program's name, argv[1] the command. Prints to stdout and
 * stderr and returns the exit status (0, 1 or 2, see --help). */
int sseg_cli_main(int argc, char **argv);

/* Whether command runs only in the C tool: it forks processes that run
 * library code (demo, bench) or runs until a signal stops it, handling
 * signals (keep): safe in the C tool, not inside an interpreter that may
 * hold threads, signal handlers or an initialised GPU driver. */
bool sseg_cli_c_tool_only(const char *command);

#endif
