/* SPDX-License-Identifier: Apache-2.0 */
/* What the ascend backend and its host registration ask of the ACL
 * runtime's devices (ascend_device.c). The real probes, which use these,
 * are ascend_probe.h. */
#ifndef SSEG_ASCEND_DEVICE_H
#define SSEG_ASCEND_DEVICE_H

#include "driver/acl.h"
#include "internal.h"

struct sseg;
struct sseg_hostreg_ops;

/* The devices the runtime sees (aclrtGetDeviceCount). */
SSEG_HIDDEN int sseg_ascend_device_count(const struct sseg_acl *acl, uint32_t *count);
/* Sets the device on this thread (aclrtSetDevice, one reference) and
 * returns its default context; the caller's context is current again
 * afterwards where it had one. Undone by sseg_ascend_device_close. */
SSEG_HIDDEN int sseg_ascend_device_open(const struct sseg_acl *acl, int ordinal,
					aclrtContext *ctx);
SSEG_HIDDEN int sseg_ascend_device_close(const struct sseg_acl *acl, int ordinal);
/* The host node the calling thread runs on (0 where it cannot be told). */
SSEG_HIDDEN int sseg_ascend_current_node(void);
/* The host NUMA node of the allocation: opts.numa_node, or the node the
 * calling thread runs on for numa=none. */
SSEG_HIDDEN int sseg_ascend_placement(struct sseg *seg, int *node);

/* What a segment's physical memory is to be. */
struct sseg_ascend_want {
	bool fabric;     /* to be exported as a fabric handle */
	bool huge1g;     /* fabric: on 1 GiB pages (ACL_MEM_P2P_HUGE1G), else 2 MiB */
	bool huge;       /* pages=auto (else base) */
	int node;        /* host NUMA node */
	bool node_fixed; /* the caller chose it: no other placement */
};

/* What it got. */
struct sseg_ascend_memory {
	aclrtMemAttr attr;
	int node;           /* -1: HOST, where the driver placed it */
	size_t granularity;
	uint64_t size;      /* the request padded to the granularity */
};

/* Allocates at least size bytes as want says, trying the ways public users
 * try (ascend_device.c), with the device's context current: 0 with *h and
 * *mem, or -errno with the last refusal. */
SSEG_HIDDEN int sseg_ascend_allocate(const struct sseg_acl *acl,
				     const struct sseg_ascend_want *want, uint64_t size,
				     struct sseg_ascend_memory *mem, aclrtDrvMemHandle *h);
SSEG_HIDDEN const char *sseg_ascend_attr_name(aclrtMemAttr attr);
/* The host node fabric memory for the device goes on. */
SSEG_HIDDEN int sseg_ascend_fabric_node(const struct sseg_acl *acl, int device);
/* The driver's logical id of the user's device ordinal
 * (ASCEND_RT_VISIBLE_DEVICES applied). */
SSEG_HIDDEN int sseg_ascend_logic_device(const struct sseg_acl *acl, int device, int32_t *logic);
/* Read-write access for the user's device to the mapping at ptr. */
SSEG_HIDDEN int sseg_ascend_grant(const struct sseg_acl *acl, void *ptr, size_t size, int device);
/* 0 when aclrtHostRegister may pin memory this library maps (a memfd
 * mapping, not aclrtMallocHost memory); else -errno and why. */
SSEG_HIDDEN int sseg_ascend_hostreg_usable(char *why, size_t len);
/* Host registration of memfd segments (ascend_hostreg.c, with the above). */
SSEG_HIDDEN extern const struct sseg_hostreg_ops sseg_ascend_hostreg_ops;

#endif
