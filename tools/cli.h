/* SPDX-License-Identifier: Apache-2.0 */
/* The `sharedseg` command-line tool: declarations shared by its files.
 * The tool uses only the public API in sharedseg.h. */
#ifndef SSEG_CLI_H
#define SSEG_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "json.h"
#include "sharedseg.h"

/* Exit codes: 2 is a usage error or a machine that cannot do what was asked. */
#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

/* ---- commands (probe.c, demo.c, bench.c) ---- */

struct cli_command {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* argv[0] is the command name */
	void (*help)(FILE *out);
	bool c_tool_only; /* forks ranks, or runs until a signal: never in an interpreter */
};

int probe_main(int argc, char **argv);
void probe_help(FILE *out);
int demo_main(int argc, char **argv);
void demo_help(FILE *out);
int bench_main(int argc, char **argv);
void bench_help(FILE *out);
int ls_main(int argc, char **argv);
void ls_help(FILE *out);
int keep_main(int argc, char **argv);
void keep_help(FILE *out);

/* ---- options (args.c): --name VALUE or --name=VALUE ---- */

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

/* ---- JSON: the helper library's one writer (tools/lib/json.h) ---- */

/* ---- host memory (meminfo.c) ---- */

/* Shared memory in use host-wide: tmpfs/shmem pages plus HugeTLB pages in
 * use in every pool. */
struct host_mem {
	uint64_t shmem;
	uint64_t hugetlb_used;
};

int host_mem_read(struct host_mem *m);
static inline uint64_t host_mem_total(const struct host_mem *m)
{
	return m->shmem + m->hugetlb_used;
}

/* This process's use of the mappings inside [addr, addr+len), from
 * /proc/self/smaps. HugeTLB pages show in the hugetlb fields, not in
 * rss/pss. */
struct vma_use {
	uint64_t rss;
	uint64_t pss;
	uint64_t hugetlb_shared;  /* Shared_Hugetlb: pages another process maps too */
	uint64_t hugetlb_private; /* Private_Hugetlb */
	uint64_t pmd_mapped; /* ShmemPmdMapped + FilePmdMapped: THP */
};

int vma_use_read(const void *addr, uint64_t len, struct vma_use *u);

#endif
