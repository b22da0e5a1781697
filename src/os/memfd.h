/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: memfd (memfd.c). Each returns 0 or a negative errno and
 * sets the error sentence on failure. */
#ifndef SSEG_OS_MEMFD_H
#define SSEG_OS_MEMFD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* An unnamed memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING, plus MFD_HUGETLB with
 * the page size when hugetlb_page_size != 0) of exactly size bytes, sealed
 * with F_SEAL_SHRINK | F_SEAL_GROW. */
SSEG_HIDDEN int sseg_os_memfd_create(const char *name, uint64_t size, uint64_t hugetlb_page_size,
				int *fd);
/* The last seals, once the owner has its writable mapping: F_SEAL_SEAL, and
 * F_SEAL_FUTURE_WRITE when no one else may ever map it writable (mappings
 * made later, the peers', then cannot gain write access by mprotect). */
SSEG_HIDDEN int sseg_os_memfd_seal(int fd, bool future_write);
/* Checks an fd received from another process before mapping it: a memfd
 * (tmpfs or hugetlbfs), of expect_size bytes, with SHRINK, GROW and SEAL
 * seals. On success *page_size is the fd's page size (hugetlbfs block size,
 * else the base page size). */
SSEG_HIDDEN int sseg_os_memfd_check(int fd, uint64_t expect_size, uint64_t *page_size);
/* 0 when the fd can be mapped shared and writable: opened for reading and
 * writing, and sealed against neither writing nor future writes. -EPERM,
 * with the sentence, otherwise. */
SSEG_HIDDEN int sseg_os_memfd_writable(int fd);

/* Allocates the file's pages [0, size) now (fallocate): -ENOMEM when the
 * memory or the HugeTLB pool cannot hold them, where a first touch would be
 * killed or get SIGBUS. */
SSEG_HIDDEN int sseg_os_memfd_allocate(int fd, uint64_t size);
/* Bytes of the file's pages allocated (resident), through any mapping. */
SSEG_HIDDEN int sseg_os_memfd_allocated(int fd, uint64_t *bytes);

#endif
