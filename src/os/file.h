/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: small readers for sysfs and procfs files (file.c). */
#ifndef SSEG_OS_FILE_H
#define SSEG_OS_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Reads a small sysfs/proc file into buf (NUL-terminated, trailing newline
 * stripped). */
SSEG_HIDDEN int sseg_os_read_text(const char *path, char *buf, size_t len);
SSEG_HIDDEN int sseg_os_read_u64(const char *path, uint64_t *value);

#endif
