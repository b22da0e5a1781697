/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration through the ACL runtime: aclrtHostRegister (mapped)
 * pins a memfd segment's mapping for the device set on the calling thread,
 * which is the rank's device here (its default context made current around
 * every call, the caller's put back). The device address it returns is for
 * the device's own use (kernels); copies take the host address.
 *
 * Registrations belong to the process that made them: in a forked child
 * (ACL does not work there; torch_npu refuses it) every op lets go without
 * a runtime call, as the CUDA host registration does. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/ascend_device.h"
#include "backend/backend.h"

struct acl_reg {
	const struct sseg_acl *acl;
	int device;
	aclrtContext ctx;
	void *last_addr; /* the last range registered and its device address */
	void *last_device_addr;
	pid_t pid;       /* the process that opened the device */
};

static bool forked(const struct acl_reg *reg)
{
	return getpid() != reg->pid;
}

static int usable(char *why, size_t len)
{
	return sseg_ascend_hostreg_usable(why, len);
}

static int open_device(int ordinal, void **out)
{
	struct acl_reg *reg = calloc(1, sizeof(*reg));
	int rc;

	if (!reg)
		return sseg_err(-ENOMEM, "out of memory");
	reg->device = ordinal;
	reg->pid = getpid();
	rc = sseg_acl_get(&reg->acl);
	if (!rc)
		rc = sseg_ascend_device_open(reg->acl, ordinal, &reg->ctx);
	if (rc) {
		free(reg);
		return rc;
	}
	*out = reg;
	return 0;
}

static int enter(void *dev, void **saved)
{
	struct acl_reg *reg = dev;
	aclrtContext caller = NULL;
	int rc = forked(reg) ? 0 : sseg_acl_enter(reg->acl, reg->ctx, &caller);

	*saved = caller;
	return rc;
}

static void leave(void *dev, void *saved)
{
	struct acl_reg *reg = dev;

	if (!forked(reg))
		sseg_acl_leave(reg->acl, saved);
}

/* ACL_HOST_REGISTER_READONLY is reserved in the reference (not supported
 * yet): a read-only mapping is not registered read-write instead. */
static int register_range(void *dev, void *addr, uint64_t len, bool readonly)
{
	struct acl_reg *reg = dev;
	void *device_addr = NULL;
	int rc;

	if (readonly)
		return sseg_err(-EOPNOTSUPP, "aclrtHostRegister cannot register a read-only mapping "
				"(ACL_HOST_REGISTER_READONLY is reserved, not supported)");
	rc = sseg_acl_result(reg->acl->aclrtHostRegister(addr, len, ACL_HOST_REGISTER_MAPPED,
							 &device_addr),
			     "aclrtHostRegister");
	if (rc)
		return rc;
	reg->last_addr = addr;
	reg->last_device_addr = device_addr;
	return 0;
}

static int unregister_range(void *dev, void *addr)
{
	struct acl_reg *reg = dev;

	if (forked(reg))
		return 0;
	return sseg_acl_result(reg->acl->aclrtHostUnregister(addr), "aclrtHostUnregister");
}

/* aclrtHostRegister hands the device address out itself; the core asks
 * right after registering the range. */
static int device_pointer(void *dev, void *addr, uint64_t *device_addr)
{
	struct acl_reg *reg = dev;

	if (addr != reg->last_addr)
		return sseg_err(-ENOENT, "no device address is known for %p", addr);
	*device_addr = (uint64_t)(uintptr_t)reg->last_device_addr;
	return 0;
}

static int close_device(void *dev)
{
	struct acl_reg *reg = dev;
	int rc = forked(reg) ? 0 : sseg_ascend_device_close(reg->acl, reg->device);

	if (!rc)
		free(reg);
	return rc;
}

const struct sseg_hostreg_ops sseg_ascend_hostreg_ops = {
	.usable = usable,
	.open = open_device,
	.enter = enter,
	.leave = leave,
	.register_range = register_range,
	.unregister_range = unregister_range,
	.device_pointer = device_pointer,
	.close = close_device,
};
