/* SPDX-License-Identifier: Apache-2.0 */
/* What a fake shares across processes: allocations are memfds that an
 * importer on this host opens through the exporter's /proc entry, told
 * apart by a nonce. */
#ifndef SSEG_FAKEKIT_MEMFD_H
#define SSEG_FAKEKIT_MEMFD_H

#include <stdint.h>

/* A fresh non-zero 64-bit value (random; pid and a counter without it). */
uint64_t fk_nonce(void);
/* Opens fd of process pid read-write, close-on-exec: the new fd, or -1
 * with errno set (gone, or not ours to open). */
int fk_open_exported(uint32_t pid, int fd);

#endif
