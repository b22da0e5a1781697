/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration through the CUDA driver: cuMemHostRegister (portable,
 * device-mapped) on the device's primary context, which is made current
 * around every call and the caller's put back.
 *
 * Read-only peers map the segment read-only. cuda.h: READ_ONLY "is
 * required in order to register memory mapped to the CPU as read-only" on
 * platforms without PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES (attribute
 * 100), and where the device lacks READ_ONLY_HOST_REGISTER_SUPPORTED (113)
 * the flag fails with NOT_SUPPORTED. So: 113, READ_ONLY; else 100, a plain
 * registration (the device reads through the host's page tables); else a
 * read-only peer cannot be registered at all, and is refused before any
 * call, with the way out.
 *
 * Registrations belong to the process that made them: in a forked child
 * (the driver does not work there) every op lets go without a driver call. */
#include <stdio.h>

#include "backend/cuda/cuda_device.h"
#include "backend/devreg.h"

enum readonly_mode { RO_REFUSED, RO_FLAG, RO_PLAIN };

struct cuda_reg {
	struct sseg_devreg base; /* first: the skeleton's part */
	const struct sseg_cuda *cu;
	CUdevice device;
	enum readonly_mode readonly;
};

static struct cuda_reg *cuda_reg(struct sseg_devreg *reg)
{
	return (struct cuda_reg *)reg;
}

static int usable(char *why, size_t len)
{
	const struct sseg_cuda *cu;
	int rc = sseg_cuda_get(&cu);

	if (rc)
		snprintf(why, len, "%s", sseg_last_error());
	return rc;
}

static enum readonly_mode readonly_mode(const struct sseg_cuda *cu, CUdevice dev)
{
	if (sseg_cuda_attribute(cu, dev, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED) > 0)
		return RO_FLAG;
	if (sseg_cuda_attribute(cu, dev,
				CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES) > 0)
		return RO_PLAIN;
	return RO_REFUSED;
}

static int open_primary(struct sseg_devreg *base)
{
	struct cuda_reg *reg = cuda_reg(base);
	CUcontext ctx;
	int rc = sseg_cuda_get(&reg->cu);

	if (!rc)
		rc = sseg_cuda_device(reg->cu, base->ordinal, SSEG_CUDA_NEED_REGISTER, &reg->device);
	if (!rc)
		rc = sseg_cuda_result(reg->cu->cuDevicePrimaryCtxRetain(&ctx, reg->device),
				      "cuDevicePrimaryCtxRetain");
	if (rc)
		return rc;
	base->ctx = ctx;
	reg->readonly = readonly_mode(reg->cu, reg->device);
	return 0;
}

static int enter(struct sseg_devreg *reg, void **saved)
{
	CUcontext caller = NULL;
	int rc = sseg_cuda_enter(cuda_reg(reg)->cu, reg->ctx, &caller);

	*saved = caller;
	return rc;
}

static void leave(struct sseg_devreg *reg, void *saved)
{
	sseg_cuda_leave(cuda_reg(reg)->cu, (CUcontext)saved);
}

static int refuse_readonly(const struct sseg_devreg *reg)
{
	return sseg_err(-EOPNOTSUPP,
			"read-only peers need read-only registration, and device %d has neither "
			"READ_ONLY_HOST_REGISTER_SUPPORTED (attribute 113) nor "
			"PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES (100): their read-only mapping "
			"cannot be registered; use read-write peers, or backend=cuda",
			reg->ordinal);
}

/* INVALID_VALUE is -EINVAL: the core halves the chunk once and retries
 * (the driver answers it for a registration it cannot pin just now). */
static int register_range(void *dev, void *addr, uint64_t len, bool readonly)
{
	struct cuda_reg *reg = dev;
	unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
	CUresult r;
	int rc;

	if (readonly && reg->readonly == RO_REFUSED)
		return refuse_readonly(&reg->base);
	if (readonly && reg->readonly == RO_FLAG)
		flags |= CU_MEMHOSTREGISTER_READ_ONLY;
	r = reg->cu->cuMemHostRegister(addr, len, flags);
	rc = sseg_cuda_result(r, "cuMemHostRegister");
	return r == CUDA_ERROR_INVALID_VALUE ? -EINVAL : rc;
}

static int unregister_range(struct sseg_devreg *reg, void *addr)
{
	return sseg_cuda_result(cuda_reg(reg)->cu->cuMemHostUnregister(addr), "cuMemHostUnregister");
}

static int device_pointer(void *dev, void *addr, uint64_t *device_addr)
{
	struct cuda_reg *reg = dev;
	CUdeviceptr p = 0;
	int rc = sseg_cuda_result(reg->cu->cuMemHostGetDevicePointer(&p, addr, 0),
				  "cuMemHostGetDevicePointer");

	*device_addr = p;
	return rc;
}

/* Unregistering under an in-flight copy corrupts it. cuCtxSynchronize
 * waits for all work queued in the device's primary context (enter made it
 * current), which is where the CUDA runtime, PyTorch included, queues its
 * copies; work in other contexts or other processes is the caller's to
 * finish before destroy. */
static int quiesce(void *dev)
{
	struct cuda_reg *reg = dev;

	if (sseg_devreg_forked(&reg->base))
		return 0;
	return sseg_cuda_result(reg->cu->cuCtxSynchronize(), "cuCtxSynchronize");
}

static int close_primary(struct sseg_devreg *reg)
{
	return sseg_cuda_result(cuda_reg(reg)->cu->cuDevicePrimaryCtxRelease(cuda_reg(reg)->device),
				"cuDevicePrimaryCtxRelease");
}

static const struct sseg_devreg_driver cuda_devreg = {
	.state_size = sizeof(struct cuda_reg),
	.open = open_primary,
	.enter = enter,
	.leave = leave,
	.unregister_range = unregister_range,
	.close = close_primary,
};

static int open_device(int ordinal, void **dev)
{
	return sseg_devreg_open(&cuda_devreg, ordinal, dev);
}

const struct sseg_hostreg_ops sseg_cuda_hostreg_ops = {
	.usable = usable,
	.open = open_device,
	SSEG_DEVREG_OPS,
	.register_range = register_range,
	.device_pointer = device_pointer,
	.quiesce = quiesce,
};
