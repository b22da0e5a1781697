/* SPDX-License-Identifier: Apache-2.0 */
/* What every program of the tools parses and prints alike (args.c): exit
 * codes, options (--name VALUE or --name=VALUE), the library's words for
 * values, one-line usage errors, sizes as people read them, and what users
 * type shown safely. The tool and the benchmarks' program both use it. */
#ifndef SSEG_TOOLS_ARGS_H
#define SSEG_TOOLS_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sharedseg.h"

/* Exit codes: 2 is a usage error or a machine that cannot do what was asked. */
#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

struct cli_opt {
	const char *name; /* without the leading dashes */
	bool has_value;
	int id;
};

struct cli_args {
	const char *cmd; /* for messages: "sharedseg CMD: ..." */
	int argc;
	char **argv;
	int next;
};

#define CLI_OPT_END (-1)
#define CLI_OPT_HELP (-2)
#define CLI_OPT_BAD (-3) /* the message is already printed */

/* The next option's id (value in *value), CLI_OPT_END after the last,
 * CLI_OPT_HELP for -h/--help, CLI_OPT_BAD for an unknown option, a missing
 * value or a stray argument. */
int cli_next(struct cli_args *a, const struct cli_opt *opts, const char **value);

/* One-line usage error on stderr, "sharedseg CMD: ..."; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s for a terminal, in buf: what users type and what other users choose
 * (names, commands) may hold controls, so every control shows as an escape
 * (\x1b, \u202e), a byte that is not UTF-8 as \xNN, a backslash as \\. */
const char *cli_visible(const char *s, char *buf, size_t len);
#define CLI_SHOWN 1024 /* room for a typed argument, shown */

/* Value parsers: 0, or CLI_USAGE after a one-line error naming opt and text.
 * Parsing itself is the library's (sseg_parse_*). */
int cli_parse_size(const char *cmd, const char *opt, const char *text, uint64_t *bytes);
int cli_parse_int(const char *cmd, const char *opt, const char *text, int min, int max,
		  int *value);
/* The library's words, from its name tables ("auto, base, thp, ..."): the
 * lists help and errors print, so that a new backend or page kind is
 * listed without an edit here. DEVICE_BACKENDS: every backend but auto. */
enum cli_names { CLI_PAGES, CLI_BACKENDS, CLI_DEVICE_BACKENDS, CLI_POPULATES };
const char *cli_names(enum cli_names kind);
int cli_parse_pages(const char *cmd, const char *opt, const char *text, enum sseg_pages *pages);
int cli_parse_backend(const char *cmd, const char *text, enum sseg_backend *backend);
int cli_parse_populate(const char *cmd, const char *opt, const char *text,
		       enum sseg_populate *populate);
int cli_parse_numa(const char *cmd, const char *opt, const char *text, enum sseg_numa *numa,
		   int *node);

/* "256.0 MiB", "4.0 KiB", "12 B" */
void cli_format_size(uint64_t bytes, char *buf, size_t len);
double cli_now(void); /* CLOCK_MONOTONIC seconds */

#endif
