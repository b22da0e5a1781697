/* SPDX-License-Identifier: Apache-2.0 */
/* This process's sharing domain (host_identity.c): boot, network namespace, uid. */
#ifndef SSEG_HOST_IDENTITY_H
#define SSEG_HOST_IDENTITY_H

#include "internal.h"
#include "os/host.h"

SSEG_HIDDEN int sseg_host_id(struct sseg_os_host_id *id);
/* Test hook: a host identity override for this thread (tests simulate a
 * group spread over several hosts). boot NULL clears it. */
SSEG_HIDDEN void sseg_test_host(const char *boot);

#endif
