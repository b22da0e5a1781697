/* SPDX-License-Identifier: Apache-2.0 */
/* sharedseg: look at what this host can do (probe), show N ranks sharing
 * one segment (demo), and measure it (bench). */
#include "cli_main.h"

int main(int argc, char **argv)
{
	return sseg_cli_main(argc, argv);
}
