/* SPDX-License-Identifier: Apache-2.0 */
/* What the CUDA backend and its host registration ask of the driver's
 * devices: capabilities (cuda_device.c) and access to a mapping
 * (cuda_access.c). The real probes, which use these, are cuda_probe.h. */
#ifndef SSEG_CUDA_DEVICE_H
#define SSEG_CUDA_DEVICE_H

#include "driver/cuda.h"
#include "internal.h"

struct sseg;

/* What a path needs of its device. */
enum sseg_cuda_need {
	SSEG_CUDA_NEED_VMM_HOST = 1, /* cuMemCreate on HOST_NUMA locations */
	SSEG_CUDA_NEED_REGISTER = 2, /* cuMemHostRegister */
};

/* The one device check of both paths: the ordinal exists (-ENODEV naming
 * how many the driver sees) and has what need asks for, as far as the
 * driver's version and attributes tell (the real probe is separate). */
SSEG_HIDDEN int sseg_cuda_device(const struct sseg_cuda *cu, int ordinal, int need,
				 CUdevice *dev);
/* An attribute: 1 or the value, 0, or -1 when the driver does not know it
 * (INVALID_VALUE from a driver older than the attribute). */
SSEG_HIDDEN int sseg_cuda_attribute(const struct sseg_cuda *cu, CUdevice dev, int attr);
/* The host node for the allocation: the GPU's (numa none/device-local) or
 * the explicit one (only that node is checked). */
SSEG_HIDDEN int sseg_cuda_placement(const struct sseg_cuda *cu, struct sseg *seg, CUdevice dev,
				    int *node);
/* The properties of pinned memory on host node `node` with these handle
 * types. */
SSEG_HIDDEN void sseg_cuda_host_prop(CUmemAllocationProp *prop, int node, unsigned types);
/* What a refused HOST_NUMA cuMemCreate is known to mean, for messages. */
SSEG_HIDDEN const char *sseg_cuda_host_numa_hint(void);

/* The device's UUID; false where the driver cannot say (before 11.4). */
SSEG_HIDDEN bool sseg_cuda_uuid(const struct sseg_cuda *cu, CUdevice dev, CUuuid *uuid);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi writes it. */
SSEG_HIDDEN void sseg_cuda_uuid_text(const CUuuid *uuid, char *buf, size_t len);

/* ---- access (cuda_access.c) ---- */

/* Who may access a mapping of HOST_NUMA memory: the host, the rank's own
 * device, and each other device with VMM (host memory needs no peer). */
struct sseg_cuda_grant {
	CUdeviceptr ptr;
	size_t size;
	int node;       /* the memory's host node (the owner's) */
	bool readonly;
	CUdevice own;   /* this rank's device */
	const char *name;       /* the segment's, for messages */
	const char *owner_uuid; /* the owner's GPU as text, for messages; "" unknown */
};

/* Host and own device first, each in its own call (failures are errors),
 * then every other device with VMM, one call each (a device left out, for
 * its attributes or the driver's refusal, is logged with the reason). */
SSEG_HIDDEN int sseg_cuda_grant_access(const struct sseg_cuda *cu, const struct sseg_cuda_grant *g);
/* The sentence for a device that cannot map the owner's memory (217 or
 * NOT_SUPPORTED): which GPUs, and that memfd + host registration serves
 * such topologies. */
SSEG_HIDDEN int sseg_cuda_no_peer_access(const struct sseg_cuda *cu, CUresult r, const char *call,
					 CUdevice own, const char *owner_uuid);

struct sseg_hostreg_ops;
/* Host registration of memfd segments (cuda_hostreg.c). */
SSEG_HIDDEN extern const struct sseg_hostreg_ops sseg_cuda_hostreg_ops;

#endif
