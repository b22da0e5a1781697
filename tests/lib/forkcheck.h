/* SPDX-License-Identifier: Apache-2.0 */
/* fork() after device segments exist, as test_cuda_fork and test_ascend_fork
 * check it: a one-rank segment on the device backend and a memfd one
 * registered with the device's driver are made, then a child describes and
 * destroys both without one driver call (the driver does not work in a
 * child), then the parent's segments are still whole and torn down. */
#ifndef SSEG_TU_FORKCHECK_H
#define SSEG_TU_FORKCHECK_H

#include "sharedseg.h"

struct tu_fork_check {
	const char *prefix;            /* the segments are PREFIX-vmm and PREFIX-hostreg */
	enum sseg_backend device;      /* the device segment's backend */
	enum sseg_backend registrar;   /* the memfd segment's device_backend (0: default) */
	long (*calls)(const char *entry);  /* the fake's count of calls (NULL: all) */
	int (*live_registrations)(void);
	int (*live_mappings)(void);
	int (*child_checks)(void);     /* the test's own, at the child's end; or NULL */
};

/* Runs the check; exits 1 on the first that fails. */
void tu_fork_after_segments(const struct tu_fork_check *check);

#endif
