/* What the CUDA backend and its host registration ask of the driver's
 * devices (cuda_device.c). */
#ifndef SSEG_CUDA_DEVICE_H
#define SSEG_CUDA_DEVICE_H

#include "driver/cuda.h"
#include "internal.h"

struct sseg;

/* 0 when the driver loads, has the VMM entry points and sees a device;
 * else why not. */
SSEG_HIDDEN int sseg_cuda_usable(char *why, size_t len);

/* What a path needs of its device. */
enum sseg_cuda_need {
	SSEG_CUDA_NEED_VMM_HOST = 1, /* cuMemCreate on HOST_NUMA locations */
	SSEG_CUDA_NEED_REGISTER = 2, /* cuMemHostRegister */
};

/* The one device check of both paths: the ordinal exists (-ENODEV naming
 * how many the driver sees) and has what need asks for. */
SSEG_HIDDEN int sseg_cuda_device(const struct sseg_cuda *cu, int ordinal, int need,
				 CUdevice *dev);
/* An attribute: 1 or the value, 0, or -1 when the driver does not know it
 * (INVALID_VALUE from a driver older than the attribute). */
SSEG_HIDDEN int sseg_cuda_attribute(const struct sseg_cuda *cu, CUdevice dev, int attr);
/* The host node for the allocation: the GPU's (numa none/device-local) or
 * the explicit one (only that node is checked). */
SSEG_HIDDEN int sseg_cuda_placement(const struct sseg_cuda *cu, struct sseg *seg, CUdevice dev,
				    int *node);
/* The fabric attribute claims support on systems where creating and
 * exporting a fabric handle then fails (no IMEX channel): this tries it
 * once per (device, node) and caches the answer. */
SSEG_HIDDEN int sseg_cuda_fabric_works(const struct sseg_cuda *cu, CUdevice dev, int node);
/* Host access plus every visible GPU with VMM: a list for cuMemSetAccess,
 * malloc'ed (free it); *n entries. */
SSEG_HIDDEN int sseg_cuda_access_list(const struct sseg_cuda *cu, int node, bool readonly,
				      CUmemAccessDesc **desc, size_t *n);
SSEG_HIDDEN int sseg_cuda_probe_device(int index, struct sseg_probe_device *facts);

struct sseg_hostreg_ops;
/* Host registration of memfd segments (cuda_hostreg.c). */
SSEG_HIDDEN extern const struct sseg_hostreg_ops sseg_cuda_hostreg_ops;

#endif
