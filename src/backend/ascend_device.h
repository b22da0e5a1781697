/* SPDX-License-Identifier: Apache-2.0 */
/* What the ascend backend and its host registration ask of the ACL
 * runtime's devices (ascend_device.c). */
#ifndef SSEG_ASCEND_DEVICE_H
#define SSEG_ASCEND_DEVICE_H

#include "driver/acl.h"
#include "internal.h"

struct sseg;
struct sseg_probe_device;
struct sseg_hostreg_ops;

/* 0 when the runtime loads, has the VMM entry points and sees a device;
 * else -errno, and why in why. *ndevices: what the runtime sees. */
SSEG_HIDDEN int sseg_ascend_usable(char *why, size_t len, int *ndevices);
/* Sets the device on this thread (aclrtSetDevice, one reference) and
 * returns its default context; the caller's context is current again
 * afterwards where it had one. Undone by sseg_ascend_device_close. */
SSEG_HIDDEN int sseg_ascend_device_open(const struct sseg_acl *acl, int ordinal,
					aclrtContext *ctx);
SSEG_HIDDEN int sseg_ascend_device_close(const struct sseg_acl *acl, int ordinal);
/* The host NUMA node of the allocation: opts.numa_node, or the node the
 * calling thread runs on for numa=none. */
SSEG_HIDDEN int sseg_ascend_placement(struct sseg *seg, int *node);
/* Physical memory on host node `node`: huge (2 MiB granularity) or normal. */
SSEG_HIDDEN void sseg_ascend_prop(aclrtPhysicalMemProp *prop, bool huge, int node);
/* The host (CPU) and the rank's device, read and write. */
SSEG_HIDDEN void sseg_ascend_access(int device, aclrtMemAccessDesc desc[2]);
/* Whether a fabric handle can be made on the current device for host node
 * `node`: one real create and export (A3 only, per the reference), cached
 * per (device, node); false when SSEG_ASCEND_FABRIC=0. Needs the device's
 * context current. */
SSEG_HIDDEN bool sseg_ascend_fabric_works(const struct sseg_acl *acl, int device, int node);
/* 0 when aclrtHostRegister may pin memory this library maps (a memfd
 * mapping, not aclrtMallocHost memory); else -errno and why. */
SSEG_HIDDEN int sseg_ascend_hostreg_usable(char *why, size_t len);
SSEG_HIDDEN int sseg_ascend_probe_device(int index, struct sseg_probe_device *facts);

/* Host registration of memfd segments (ascend_hostreg.c). */
SSEG_HIDDEN extern const struct sseg_hostreg_ops sseg_ascend_hostreg_ops;

#endif
