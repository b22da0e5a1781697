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
#include <stdlib.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cuda_device.h"

enum readonly_mode { RO_REFUSED, RO_FLAG, RO_PLAIN };

struct cuda_reg {
	const struct sseg_cuda *cu;
	int ordinal;
	CUdevice device;
	CUcontext ctx;
	pid_t pid; /* the process whose registrations these are */
	enum readonly_mode readonly;
};

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

static int open_device(int ordinal, void **out)
{
	struct cuda_reg *reg = calloc(1, sizeof(*reg));
	int rc;

	if (!reg)
		return sseg_err(-ENOMEM, "out of memory");
	reg->ordinal = ordinal;
	reg->pid = getpid();
	rc = sseg_cuda_get(&reg->cu);
	if (!rc)
		rc = sseg_cuda_device(reg->cu, ordinal, SSEG_CUDA_NEED_REGISTER, &reg->device);
	if (!rc)
		rc = sseg_cuda_result(reg->cu->cuDevicePrimaryCtxRetain(&reg->ctx, reg->device),
				      "cuDevicePrimaryCtxRetain");
	if (rc) {
		free(reg);
		return rc;
	}
	reg->readonly = readonly_mode(reg->cu, reg->device);
	*out = reg;
	return 0;
}

static bool forked(const struct cuda_reg *reg)
{
	return getpid() != reg->pid;
}

static int enter(void *dev, void **saved)
{
	struct cuda_reg *reg = dev;
	CUcontext caller = NULL;
	int rc = forked(reg) ? 0 : sseg_cuda_enter(reg->cu, reg->ctx, &caller);

	*saved = caller;
	return rc;
}

static void leave(void *dev, void *saved)
{
	struct cuda_reg *reg = dev;

	if (!forked(reg))
		sseg_cuda_leave(reg->cu, (CUcontext)saved);
}

static int refuse_readonly(const struct cuda_reg *reg)
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
		return refuse_readonly(reg);
	if (readonly && reg->readonly == RO_FLAG)
		flags |= CU_MEMHOSTREGISTER_READ_ONLY;
	r = reg->cu->cuMemHostRegister(addr, len, flags);
	rc = sseg_cuda_result(r, "cuMemHostRegister");
	return r == CUDA_ERROR_INVALID_VALUE ? -EINVAL : rc;
}

static int unregister_range(void *dev, void *addr)
{
	struct cuda_reg *reg = dev;

	if (forked(reg))
		return 0;
	return sseg_cuda_result(reg->cu->cuMemHostUnregister(addr), "cuMemHostUnregister");
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

	if (forked(reg))
		return 0;
	return sseg_cuda_result(reg->cu->cuCtxSynchronize(), "cuCtxSynchronize");
}

static int close_device(void *dev)
{
	struct cuda_reg *reg = dev;
	int rc = forked(reg) ? 0
			     : sseg_cuda_result(reg->cu->cuDevicePrimaryCtxRelease(reg->device),
						"cuDevicePrimaryCtxRelease");

	if (!rc)
		free(reg);
	return rc;
}

const struct sseg_hostreg_ops sseg_cuda_hostreg_ops = {
	.usable = usable,
	.open = open_device,
	.enter = enter,
	.leave = leave,
	.register_range = register_range,
	.unregister_range = unregister_range,
	.device_pointer = device_pointer,
	.quiesce = quiesce,
	.close = close_device,
};
