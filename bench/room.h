/* SPDX-License-Identifier: Apache-2.0 */
/* Whether what a bench command holds at once fits this machine, asked
 * before anything is allocated: a process that faults pages in past
 * MemAvailable or past its memory cgroup's room is OOM-killed without a
 * word. The numbers are the library's (sseg_probe: MemAvailable, the
 * memory cgroup's limit and usage, v1 or v2, the HugeTLB pools). */
#ifndef BENCH_ROOM_H
#define BENCH_ROOM_H

#include <stdint.h>

#include "sharedseg.h"

/* What a command holds at most at once, by where the kernel takes it. */
struct room_need {
	uint64_t ordinary;            /* MemAvailable, and the memory cgroup */
	uint64_t hugetlb;             /* the HugeTLB pool of hugetlb_kind */
	enum sseg_pages hugetlb_kind;
	const char *dir;              /* a filesystem the memory is a file in, or NULL */
	uint64_t in_dir;              /* what that file holds */
};

/* Adds bytes of pages kind, rounded up to whole pages (auto: base pages,
 * what a private buffer gets). */
void room_hold(struct room_need *n, enum sseg_pages kind, uint64_t bytes);
/* The page kind the library gives a segment of size bytes asked with
 * pages kind (auto: its pick for size). */
enum sseg_pages room_segment_pages(enum sseg_pages kind, uint64_t size);
/* 0 when n fits now; else 2, the driver's "this machine cannot run it",
 * after one sentence on stderr: what (a command: "limits") at --size size
 * needs how much, the room there is, and what to do. */
int room_check(const struct room_need *n, const char *what, uint64_t size);

#endif
