/* OS primitives: host identity and facts (host.c). Each returns 0 or a negative errno and sets the
 * error sentence on failure; no policy lives here. */
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
/* Shmem and HugeTLB bytes in use host-wide, from /proc/meminfo. */
SSEG_HIDDEN int sseg_os_meminfo(uint64_t *shmem, uint64_t *hugetlb);
SSEG_HIDDEN int sseg_os_random(void *buf, size_t len);
SSEG_HIDDEN uint64_t sseg_os_base_page_size(void);
SSEG_HIDDEN int sseg_os_cpu_count(void);
/* Reads a small sysfs/proc file into buf (NUL-terminated, trailing newline
 * stripped). */
SSEG_HIDDEN int sseg_os_read_text(const char *path, char *buf, size_t len);
SSEG_HIDDEN int sseg_os_read_u64(const char *path, uint64_t *value);

#endif
