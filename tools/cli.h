/* SPDX-License-Identifier: Apache-2.0 */
/* The `sharedseg` command-line tool: its commands and what they share
 * beyond the option parser (tools/lib/args.h). */
#ifndef SSEG_CLI_H
#define SSEG_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "json.h"
#include "sharedseg.h"

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
