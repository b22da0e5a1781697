/* SPDX-License-Identifier: Apache-2.0 */
/* The end of a command's run, in every program of the tools (the tool,
 * the benchmarks' program): output that stdout refused is a failure. */
#ifndef SSEG_CLI_OUTPUT_H
#define SSEG_CLI_OUTPUT_H

/* rc, or CLI_FAIL with "sharedseg: write error: ..." on stderr when stdout
 * cannot be flushed or had an error (a full disk, a closed stdout). */
int cli_output_written(int rc);

#endif
