/* SPDX-License-Identifier: Apache-2.0 */
/* Host registration through the ACL runtime: aclrtHostRegister (mapped)
 * pins a memfd segment's mapping for the device set on the calling thread,
 * which is the rank's device here (its default context made current around
 * every call, the caller's put back). The device address it returns is for
 * the device's own use (kernels); copies take the host address.
 *
 * Registrations belong to the process that made them: in a forked child
 * (ACL does not work there; torch_npu refuses it) every op lets go without
 * a runtime call (the devreg skeleton). */
#include <stdio.h>
#include <sys/utsname.h>

#include "backend/ascend/ascend_device.h"
#include "backend/devreg.h"

struct acl_reg {
	struct sseg_devreg base; /* first: the skeleton's part */
	const struct sseg_acl *acl;
	void *last_addr; /* the last range registered and its device address */
	void *last_device_addr;
};

static struct acl_reg *acl_reg(struct sseg_devreg *reg)
{
	return (struct acl_reg *)reg;
}

/* The reference: with a kernel of 5.10 or older, registering memory that
 * is not aclrtMallocHost's fails; newer kernels take ordinary memory. */
static bool kernel_newer_than_5_10(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return false;
	return major > 5 || (major == 5 && minor > 10);
}

int sseg_ascend_hostreg_usable(char *why, size_t len)
{
	const struct sseg_acl *acl;
	int rc = sseg_acl_get(&acl);

	if (rc) {
		snprintf(why, len, "%s", sseg_last_error());
		return rc;
	}
	if (!acl->host_register) {
		snprintf(why, len, "the ACL runtime %s has no aclrtHostRegister", acl->path);
		return -EOPNOTSUPP;
	}
	if (!kernel_newer_than_5_10()) {
		snprintf(why, len, "aclrtHostRegister takes memory that aclrtMallocHost did not "
			 "allocate only on kernels newer than 5.10");
		return -EOPNOTSUPP;
	}
	return 0;
}

static int open_ordinal(struct sseg_devreg *reg)
{
	int rc = sseg_acl_get(&acl_reg(reg)->acl);

	return rc ? rc : sseg_ascend_device_open(acl_reg(reg)->acl, reg->ordinal, &reg->ctx);
}

static int enter(struct sseg_devreg *reg, void **saved)
{
	return sseg_acl_enter(acl_reg(reg)->acl, reg->ctx, saved);
}

static void leave(struct sseg_devreg *reg, void *saved)
{
	sseg_acl_leave(acl_reg(reg)->acl, saved);
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

static int unregister_range(struct sseg_devreg *reg, void *addr)
{
	return sseg_acl_result(acl_reg(reg)->acl->aclrtHostUnregister(addr), "aclrtHostUnregister");
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

static int close_ordinal(struct sseg_devreg *reg)
{
	return sseg_ascend_device_close(acl_reg(reg)->acl, reg->ordinal);
}

static const struct sseg_devreg_driver ascend_devreg = {
	.state_size = sizeof(struct acl_reg),
	.open = open_ordinal,
	.enter = enter,
	.leave = leave,
	.unregister_range = unregister_range,
	.close = close_ordinal,
};

static int open_device(int ordinal, void **dev)
{
	return sseg_devreg_open(&ascend_devreg, ordinal, dev);
}

const struct sseg_hostreg_ops sseg_ascend_hostreg_ops = {
	.usable = sseg_ascend_hostreg_usable,
	.open = open_device,
	SSEG_DEVREG_OPS,
	.register_range = register_range,
	.device_pointer = device_pointer,
};
