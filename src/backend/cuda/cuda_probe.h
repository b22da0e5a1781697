/* SPDX-License-Identifier: Apache-2.0 */
/* The cuda backend's real probes (cuda_probe.c): once per (device, node)
 * and process, over the device checks of cuda_device.h. */
#ifndef SSEG_CUDA_PROBE_H
#define SSEG_CUDA_PROBE_H

#include "driver/cuda.h"
#include "internal.h"

struct sseg_probe_device;

/* 0 when the driver loads, has the VMM entry points and some device can
 * allocate VMM host memory (a real create passed); else why not. */
SSEG_HIDDEN int sseg_cuda_usable(char *why, size_t len);
/* 0 when a minimum-size HOST_NUMA create and release passed on node under
 * dev's primary context; else -errno and the driver's refusal explained. */
SSEG_HIDDEN int sseg_cuda_host_vmm_works(const struct sseg_cuda *cu, CUdevice dev, int node);
/* A fabric handle created (with a POSIX fd beside it), exported and
 * imported again on node under dev's primary context. */
SSEG_HIDDEN bool sseg_cuda_fabric_works(const struct sseg_cuda *cu, CUdevice dev, int node);
/* Test hook: forget every answer (the fake driver changes its mind). */
SSEG_HIDDEN void sseg_cuda_forget_probes(void);
/* The probe's device section: attributes, then the real probes where the
 * attributes do not say no. */
SSEG_HIDDEN int sseg_cuda_probe_device(int index, struct sseg_probe_device *facts);

#endif
