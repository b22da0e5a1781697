/* Host registration through the CUDA driver: cuMemHostRegister (portable,
 * device-mapped; read-only for read-only peers) on the device's primary
 * context, which is made current around every call and the caller's put
 * back. */
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/cuda_device.h"

struct cuda_reg {
	const struct sseg_cuda *cu;
	CUdevice device;
	CUcontext ctx;
};

static int usable(char *why, size_t len)
{
	const struct sseg_cuda *cu;
	int rc = sseg_cuda_get(&cu);

	if (rc)
		snprintf(why, len, "%s", sseg_last_error());
	return rc;
}

static int open_device(int ordinal, void **out)
{
	struct cuda_reg *reg = calloc(1, sizeof(*reg));
	int rc;

	if (!reg)
		return sseg_err(-ENOMEM, "out of memory");
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
	*out = reg;
	return 0;
}

static int enter(void *dev, void **saved)
{
	struct cuda_reg *reg = dev;
	CUcontext caller = NULL;
	int rc = sseg_cuda_enter(reg->cu, reg->ctx, &caller);

	*saved = caller;
	return rc;
}

static void leave(void *dev, void *saved)
{
	struct cuda_reg *reg = dev;

	sseg_cuda_leave(reg->cu, (CUcontext)saved);
}

static int register_range(void *dev, void *addr, uint64_t len, bool readonly)
{
	struct cuda_reg *reg = dev;
	unsigned flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;

	if (readonly)
		flags |= CU_MEMHOSTREGISTER_READ_ONLY;
	return sseg_cuda_result(reg->cu->cuMemHostRegister(addr, len, flags), "cuMemHostRegister");
}

static int unregister_range(void *dev, void *addr)
{
	struct cuda_reg *reg = dev;

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

static int close_device(void *dev)
{
	struct cuda_reg *reg = dev;
	int rc = sseg_cuda_result(reg->cu->cuDevicePrimaryCtxRelease(reg->device),
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
	.close = close_device,
};
