/* SPDX-License-Identifier: Apache-2.0 */
/* Initialization, version, devices, default contexts and the runtime's
 * pid. Like the runtime, aclrtSetDevice counts references per device and
 * makes the device's default context current on the calling thread;
 * aclrtResetDevice drops one, and the context dies with the last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_acl.h"

struct fake_context {
	int device;
};

static struct fake_context contexts[FAKE_MAX_DEVICES];
static __thread struct fake_context *current;

int fake_logic_valid(int32_t id)
{
	return id >= 0 && id < fake.cfg.devices;
}

static int visible_count(void)
{
	int n = 0;

	if (fake.nvisible < 0)
		return fake.cfg.devices;
	while (n < fake.nvisible && fake_logic_valid(fake.visible[n]))
		n++;
	return n;
}

int fake_device_valid(int32_t dev)
{
	return dev >= 0 && dev < visible_count();
}

int fake_logic_of(int32_t dev)
{
	return fake.nvisible < 0 ? dev : fake.visible[dev];
}

static int context_live(const struct fake_context *ctx)
{
	return ctx && fake.device_refs[ctx->device] > 0;
}

aclError fake_enter_ctx(enum fake_entry entry)
{
	aclError rc = fake_enter(entry);

	if (rc == ACL_SUCCESS && fake.cfg.need_ctx && !context_live(current))
		rc = fake_refuse(ACL_ERROR_RT_CONTEXT_NULL,
				 "no device set on this thread (aclrtSetDevice) or its context "
				 "was reset");
	return rc;
}

int fake_current_device(void)
{
	return context_live(current) ? current->device : -1;
}

int32_t fake_bare_tgid(void)
{
	return (int32_t)getpid() + fake.cfg.bare_tgid_offset;
}

FK_API aclError aclInit(const char *configPath)
{
	aclError rc = fake_enter(FE_aclInit);
	FILE *f;

	if (rc == ACL_SUCCESS && fake.initialized)
		rc = fake_refuse(ACL_ERROR_REPEAT_INITIALIZE, "aclInit was called before");
	if (rc == ACL_SUCCESS && configPath) {
		f = fopen(configPath, "r");
		if (f)
			fclose(f);
		else
			rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "cannot read %s", configPath);
	}
	if (rc == ACL_SUCCESS) {
		fake.initialized = 1;
		fake.init_config = configPath ? strdup(configPath) : "";
	}
	return fake_leave(rc);
}

FK_API aclError aclrtGetVersion(int32_t *major, int32_t *minor, int32_t *patch)
{
	aclError rc = fake_enter(FE_aclrtGetVersion);

	if (rc == ACL_SUCCESS && (!major || !minor || !patch))
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "a NULL argument");
	if (rc == ACL_SUCCESS) {
		*major = fake.cfg.version[0];
		*minor = fake.cfg.version[1];
		*patch = fake.cfg.version[2];
	}
	return fake_leave(rc);
}

FK_API aclError aclrtGetDeviceCount(uint32_t *count)
{
	aclError rc = fake_enter(FE_aclrtGetDeviceCount);

	if (rc == ACL_SUCCESS && !count)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "count is NULL");
	if (rc == ACL_SUCCESS)
		*count = (uint32_t)visible_count();
	return fake_leave(rc);
}

FK_API aclError aclrtSetDevice(int32_t deviceId)
{
	aclError rc = fake_enter(FE_aclrtSetDevice);

	if (rc == ACL_SUCCESS && !fake_device_valid(deviceId))
		rc = fake_refuse(ACL_ERROR_RT_INVALID_DEVICEID, "no device %d", deviceId);
	if (rc == ACL_SUCCESS) {
		contexts[deviceId].device = deviceId;
		fake.device_refs[deviceId]++;
		current = &contexts[deviceId];
		if (!fake.device_pid)
			fake.device_pid = getpid();
	}
	return fake_leave(rc);
}

FK_API aclError aclrtResetDevice(int32_t deviceId)
{
	aclError rc = fake_enter(FE_aclrtResetDevice);

	if (rc == ACL_SUCCESS && !fake_device_valid(deviceId))
		rc = fake_refuse(ACL_ERROR_RT_INVALID_DEVICEID, "no device %d", deviceId);
	if (rc == ACL_SUCCESS && fake.device_refs[deviceId] == 0) {
		fk_bug("aclrtResetDevice(%d) without an aclrtSetDevice", deviceId);
		rc = fake_refuse(ACL_ERROR_RT_PARAM_INVALID, "device %d is not set", deviceId);
	}
	if (rc == ACL_SUCCESS)
		fake.device_refs[deviceId]--;
	return fake_leave(rc);
}

FK_API aclError aclrtGetCurrentContext(aclrtContext *context)
{
	aclError rc = fake_enter(FE_aclrtGetCurrentContext);

	if (rc == ACL_SUCCESS && !context)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "context is NULL");
	if (rc == ACL_SUCCESS && !context_live(current))
		rc = fake_refuse(ACL_ERROR_RT_CONTEXT_NULL, "this thread has no context");
	if (rc == ACL_SUCCESS)
		*context = current;
	return fake_leave(rc);
}

FK_API aclError aclrtSetCurrentContext(aclrtContext context)
{
	aclError rc = fake_enter(FE_aclrtSetCurrentContext);
	struct fake_context *ctx = NULL;

	for (int d = 0; d < FAKE_MAX_DEVICES; d++)
		if (context == (aclrtContext)&contexts[d])
			ctx = &contexts[d];
	if (rc == ACL_SUCCESS && !context_live(ctx))
		rc = fake_refuse(ACL_ERROR_RT_PARAM_INVALID,
				 "%p is no live context (its device was reset?)", context);
	if (rc == ACL_SUCCESS)
		current = ctx;
	return fake_leave(rc);
}

/* Inside a container the runtime names a process by its host pid: the
 * offset makes the two differ, as they would there. */
FK_API aclError aclrtDeviceGetBareTgid(int32_t *pid)
{
	aclError rc = fake_enter(FE_aclrtDeviceGetBareTgid);

	if (rc == ACL_SUCCESS && !pid)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "pid is NULL");
	if (rc == ACL_SUCCESS)
		*pid = fake_bare_tgid();
	return fake_leave(rc);
}

/* The reverse of ASCEND_RT_VISIBLE_DEVICES: the driver's id of a user's
 * ordinal. */
FK_API aclError aclrtGetLogicDevIdByUserDevId(const int32_t userDevid, int32_t *const logicDevId)
{
	aclError rc = fake_enter(FE_aclrtGetLogicDevIdByUserDevId);

	if (rc == ACL_SUCCESS && !logicDevId)
		rc = fake_refuse(ACL_ERROR_INVALID_PARAM, "logicDevId is NULL");
	if (rc == ACL_SUCCESS && !fake_device_valid(userDevid))
		rc = fake_refuse(ACL_ERROR_RT_INVALID_DEVICEID, "no device %d", userDevid);
	if (rc == ACL_SUCCESS)
		*logicDevId = fake_logic_of(userDevid);
	return fake_leave(rc);
}
