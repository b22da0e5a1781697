/* What the CUDA backend and the probe ask of devices. */
#ifndef SSEG_CUDA_DEVICE_H
#define SSEG_CUDA_DEVICE_H

#include "driver/cuda.h"
#include "segment.h"

/* 0 when the cuda backend can run here; else why not (no driver, old
 * driver, no device, a capability missing). */
SSEG_HIDDEN int sseg_cuda_usable(char *why, size_t len);
SSEG_HIDDEN int sseg_cuda_device(const struct sseg_cuda *cu, int ordinal, CUdevice *dev);
/* The host node for the allocation: the GPU's (numa none/device-local) or
 * the explicit one (only that node is checked). */
SSEG_HIDDEN int sseg_cuda_placement(const struct sseg_cuda *cu, struct sseg *seg, CUdevice dev,
				    int *node);
/* The fabric attribute claims support on systems where creating and
 * exporting a fabric handle then fails (no IMEX channel): this tries it
 * once per device and caches the answer. */
SSEG_HIDDEN int sseg_cuda_fabric_works(const struct sseg_cuda *cu, CUdevice dev, int node);
/* Host access plus every visible GPU with VMM, for one cuMemSetAccess. */
SSEG_HIDDEN size_t sseg_cuda_access_list(const struct sseg_cuda *cu, int node, bool readonly,
					 CUmemAccessDesc *desc, size_t max);
SSEG_HIDDEN void sseg_cuda_probe_devices(struct sseg_probe *p);

SSEG_HIDDEN extern const struct sseg_backend_ops sseg_cuda_ops;
SSEG_HIDDEN uint64_t sseg_cuda_segment_device_addr(const struct sseg *seg);
SSEG_HIDDEN const char *sseg_cuda_segment_handle_type(const struct sseg *seg);

#endif
