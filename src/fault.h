/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection for tests (fault.c). A site is a short name ("munmap",
 * "send_fd", ...). Code that can fail calls sseg_fault("site") before the
 * real call and fails with its result when it is non-zero. */
#ifndef SSEG_FAULT_H
#define SSEG_FAULT_H

#include "hidden.h"

SSEG_HIDDEN int sseg_fault(const char *site);
/* Fail the site's calls number skip+1 .. skip+count with err (negative);
 * count < 0: forever. Up to four sites at once; arming one again replaces
 * its rule. site NULL disarms everything. */
SSEG_HIDDEN void sseg_test_fault(const char *site, int skip, int count, int err);
/* hook(site) runs at every site's call, before its rule, on the calling
 * thread: how a test holds a thread at a chosen point (NULL: none). */
SSEG_HIDDEN void sseg_test_fault_hook(void (*hook)(const char *site));

#endif
