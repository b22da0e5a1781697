/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmarks' driver: `sharedseg bench case|limits|retouch|alternatives`,
 * one case a run, its rows as JSON lines on stdout (driver.c parses its
 * options). */
#ifndef BENCH_DRIVER_H
#define BENCH_DRIVER_H

#include <stdbool.h>
#include <stdio.h>

#include "case.h"

/* Whether name is one of the driver's commands: case, limits, ... */
bool bench_driver_command(const char *name);
/* argv[0] is the driver's command */
int bench_driver_main(int argc, char **argv);
void bench_driver_help(FILE *out);
/* The driver's defaults for a case (those of `sharedseg bench case`). */
void bench_case_defaults(struct bench_case *bc);

#endif
