/* SPDX-License-Identifier: Apache-2.0 */
/* fork() after device segments exist, as test_cuda_fork and test_ascend_fork
 * check it: a one-rank segment on the device backend and a memfd one
 * registered with the device's driver are made, then a child describes and
 * destroys both without one driver call (the driver does not work in a
 * child), after touching the device segment's address where the driver
 * says what a child finds there, then the parent's segments are still
 * whole and torn down. */
#ifndef SSEG_TU_FORKCHECK_H
#define SSEG_TU_FORKCHECK_H

#include "sharedseg.h"

/* What a forked child finds at the device segment's address. */
enum tu_fork_pages {
	TU_FORK_PAGES_UNCHECKED, /* the driver promises nothing: not touched */
	TU_FORK_PAGES_ABSENT,    /* not copied into a child (don't-fork): a touch is SIGSEGV */
};

struct tu_fork_check {
	const char *prefix;            /* the segments are PREFIX-vmm and PREFIX-hostreg */
	enum sseg_backend device;      /* the device segment's backend */
	enum sseg_backend registrar;   /* the memfd segment's device_backend (0: default) */
	long (*calls)(const char *entry);  /* the fake's count of calls (NULL: all) */
	int (*live_registrations)(void);
	int (*live_mappings)(void);
	int (*child_checks)(void);     /* the test's own, at the child's end; or NULL */
	enum tu_fork_pages device_pages;
};

/* Reads and writes back one byte at addr in a process forked from this
 * one, which dies of what that raises (no core file): its tu_wait status,
 * 128 + SIGSEGV where nothing is mapped there, 0 where the byte is. */
int tu_touch_in_child(void *addr);

/* Runs the check; exits 1 on the first that fails. */
void tu_fork_after_segments(const struct tu_fork_check *check);

#endif
