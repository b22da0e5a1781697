/* SPDX-License-Identifier: Apache-2.0 */
/* What the reliability tests measure outside one process: host-wide Shmem
 * and the HugeTLB pool, which processes still hold a segment's memfd, and
 * where the figures of `make reliability` go (hostcheck.c). */
#ifndef SSEG_HOSTCHECK_H
#define SSEG_HOSTCHECK_H

#include <stddef.h>
#include <stdint.h>

/* Host memory a segment can leave behind once every rank is gone. */
struct hc_host {
	uint64_t shmem;      /* bytes (Shmem of /proc/meminfo, THP included) */
	uint64_t huge_free;  /* 2 MiB HugeTLB pages free */
	uint64_t huge_rsvd;  /* reserved, not yet faulted */
};

struct hc_host hc_host(void);

/* Waits up to timeout_ms for the host to come back to before: Shmem at most
 * shmem_slack bytes above it, the HugeTLB pool exactly as it was. Returns 0,
 * or -1 saying what stayed behind (*shmem_left gets the Shmem growth, and
 * *huge_left the pages missing from the pool, either way). */
int hc_host_back(struct hc_host before, uint64_t shmem_slack, int timeout_ms,
		 int64_t *shmem_left, int64_t *huge_left);

/* Processes of this host that map or hold an fd of the memfd named label
 * ("sseg:NAME"); their pids (up to max) in pids. */
int hc_memfd_holders(const char *label, int *pids, int max);

/* True when text names rank: "rank 2", "rank(s) 2", "ranks 1, 2", "owner
 * rank 2", not "rank 20". */
int hc_names_rank(const char *text, int rank);

/* The figures of a run for `make reliability`: one JSON object a line,
 * appended to the file named by $SSEG_RELIABILITY_OUT (nothing without). */
void hc_record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* text as the inside of a JSON string (quotes, backslashes, control bytes
 * escaped), cut to fit len. */
const char *hc_json(const char *text, char *buf, size_t len);

/* A scale for the campaign: $name as a positive integer, else fallback. */
int hc_scale(const char *name, int fallback);

#endif
