/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg-bench, the benchmarks' program: the summary (no command) or
 * one of the driver's commands (case, limits, ...). `sharedseg bench ARGS`
 * runs it as `sharedseg-bench ARGS`; nothing links it. */
#include "driver.h"
#include "output.h"
#include "summary.h"

int main(int argc, char **argv)
{
	if (argc > 1 && bench_driver_command(argv[1]))
		return cli_output_written(bench_driver_main(argc - 1, argv + 1));
	return cli_output_written(bench_summary_main(argc, argv));
}
