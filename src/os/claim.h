/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: whether a live group maps a memfd (claim.c). The group's
 * owner opens a description of the memfd of its own and holds a read lock
 * on it (an open file description's lock): every rank maps that one
 * description, so the lock lives exactly as long as the last fd or mapping
 * of the group, on the kernel's word, whatever kills its processes. A
 * keeper asks, on a description of its own, whether such a lock is held.
 * Each returns 0 or a negative errno and sets the sentence. */
#ifndef SSEG_OS_CLAIM_H
#define SSEG_OS_CLAIM_H

#include "internal.h"

/* A new open file description of fd's file, for reading and writing
 * (through /proc/self/fd), in *own. */
SSEG_HIDDEN int sseg_os_memfd_reopen(int fd, int *own);
/* The group's claim on its description fd. */
SSEG_HIDDEN int sseg_os_memfd_claim(int fd);
/* 1 when a description other than fd's holds a claim, 0 when none does. */
SSEG_HIDDEN int sseg_os_memfd_claimed(int fd);

#endif
