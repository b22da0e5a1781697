/* SPDX-License-Identifier: Apache-2.0 */
/* OS primitives: address windows (window.c). Each returns 0 or a negative errno and sets the
 * error sentence on failure; no policy lives here. */
#ifndef SSEG_OS_WINDOW_H
#define SSEG_OS_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Reserves size bytes of address space (PROT_NONE, MAP_NORESERVE) whose
 * start is a multiple of align (a power of two). */
SSEG_HIDDEN int sseg_os_window_reserve(uint64_t size, uint64_t align, void **base);
/* Maps size bytes of fd at offset 0 over the start of a reserved window
 * (MAP_FIXED | MAP_SHARED), read-only when readonly. */
SSEG_HIDDEN int sseg_os_window_map(void *base, uint64_t size, int fd, bool readonly);
SSEG_HIDDEN int sseg_os_window_release(void *base, uint64_t size);

/* Names [addr, addr + len) of a reserved window as /proc/PID/maps shows
 * it ("/memfd:TAG (deleted)"), so that `sharedseg ls` can tell which rank
 * maps what: an empty memfd named TAG mapped there PROT_NONE (no memory,
 * and it works on every kernel with memfd, unlike anonymous VMA names).
 * Sets no sentence: naming is best effort. */
SSEG_HIDDEN int sseg_os_window_tag(void *addr, uint64_t len, const char *tag);

/* A page of its own tagged the same way, for memory that /proc does not
 * name (a driver's): not inherited by fork children (MADV_DONTFORK), so a
 * child never appears to map the segment. Best effort, no sentence. */
SSEG_HIDDEN int sseg_os_tag_page(const char *tag, void **at);
SSEG_HIDDEN void sseg_os_untag_page(void *at);

#endif
