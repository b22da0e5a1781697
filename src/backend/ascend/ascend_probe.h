/* SPDX-License-Identifier: Apache-2.0 */
/* The ascend backend's real probes (ascend_probe.c): what a segment's owner
 * does, on one granule, once per (device, node) and process, over the
 * device calls of ascend_device.h. */
#ifndef SSEG_ASCEND_PROBE_H
#define SSEG_ASCEND_PROBE_H

#include "driver/acl.h"
#include "internal.h"

struct sseg_probe_device;

/* 0 when the runtime loads, has the VMM entry points and sees a device;
 * else -errno, and why in why. *ndevices: what the runtime sees. */
SSEG_HIDDEN int sseg_ascend_usable(char *why, size_t len, int *ndevices);
/* Whether a fabric handle can be made on the current device for host node
 * `node`: what a segment does, on one granule (A3 only, per the
 * reference), cached per (device, node); false when SHAREDSEG_ASCEND_FABRIC=0.
 * Needs the device's context current. */
SSEG_HIDDEN bool sseg_ascend_fabric_works(const struct sseg_acl *acl, int device, int node);
/* Whether a fabric segment of a whole number of GiB may take 1 GiB pages
 * (ACL_MEM_P2P_HUGE1G) on the device and host node: what such a segment
 * does, on one GiB of them, cached per (device, node). */
SSEG_HIDDEN bool sseg_ascend_huge1g_works(const struct sseg_acl *acl, int device, int node);
/* The probe's device section. */
SSEG_HIDDEN int sseg_ascend_probe_device(int index, struct sseg_probe_device *facts);

#endif
