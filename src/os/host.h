/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: host identity and facts (host.c). Each returns 0 or a
 * negative errno and sets the error sentence on failure. */
#ifndef SSEG_OS_HOST_H
#define SSEG_OS_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"

struct sseg_os_host_id {
	uint8_t boot_id[16]; /* /proc/sys/kernel/random/boot_id */
	uint64_t netns;      /* inode of /proc/self/ns/net: abstract sockets live there */
	uint64_t pidns;      /* inode of /proc/self/ns/pid */
	uint32_t uid;
};
SSEG_HIDDEN int sseg_os_host_id(struct sseg_os_host_id *id);
SSEG_HIDDEN int sseg_os_random(void *buf, size_t len);
SSEG_HIDDEN uint64_t sseg_os_base_page_size(void);
SSEG_HIDDEN int sseg_os_cpu_count(void);

#endif
