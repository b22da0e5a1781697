/* SPDX-License-Identifier: Apache-2.0 */
/* The fake runtime's state and what every call passes first (the
 * toolkit's lock and script, then aclInit), this thread's last message,
 * and the control API the tests reach with dlsym. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake_acl.h"
#include "fake/kit/control.h"
#include "sseg_fake_acl.h"

struct fake_state fake;
static __thread char recent[256];

static const unsigned char entry_before_init[] = {
#define FAKE_INIT(name, before_init) before_init,
	FAKE_ACL_ENTRIES(FAKE_INIT)
#undef FAKE_INIT
};

/* ACL does not work in a forked child of a process that set a device
 * (torch_npu refuses it: "Cannot re-initialize NPU in forked
 * subprocess"): every call there but the version fails, and is a bug. */
static int forked_child(enum fake_entry entry)
{
	return fake.device_pid && getpid() != fake.device_pid && !fake.cfg.fork_works &&
	       entry != FE_aclrtGetVersion;
}

/* What the driver holds is per process: a forked child where the runtime
 * works (fork_works=1) starts with none of its parent's handles, ranges
 * or device references; the parent's mappings are not even in its address
 * space (don't-fork). Under the lock. */
static void forget_parent(void)
{
	for (int i = 0; i < FAKE_MAX_HANDLES; i++)
		if (fake.handles[i].id)
			close(fake.handles[i].fd);
	memset(fake.handles, 0, sizeof(fake.handles));
	memset(fake.reservations, 0, sizeof(fake.reservations));
	memset(fake.mappings, 0, sizeof(fake.mappings));
	memset(fake.registrations, 0, sizeof(fake.registrations));
	memset(fake.device_refs, 0, sizeof(fake.device_refs));
	fake.pid = getpid();
}

aclError fake_enter(enum fake_entry entry)
{
	aclError rc = (aclError)fk_enter(entry);

	if (fake.cfg.fork_works && fake.pid != getpid())
		forget_parent();

	recent[0] = '\0';
	if (rc != ACL_SUCCESS)
		return fake_refuse(rc, "a failure scripted for this call");
	if (forked_child(entry)) {
		fk_bug("%s called in a forked child of pid %d", fk_driver.entries[entry],
		       (int)fake.device_pid);
		return fake_refuse(ACL_ERROR_RT_INTERNAL_ERROR,
				   "the runtime does not work in a forked child");
	}
	if (!entry_before_init[entry] && !fake.initialized && fake.cfg.need_init)
		return fake_refuse(ACL_ERROR_UNINITIALIZE, "aclInit was not called");
	return ACL_SUCCESS;
}

aclError fake_huge1g_step(const struct fake_handle *h, enum fake_huge1g step, const char *call)
{
	static const char *const names[] = { [FAKE_HUGE1G_MAP] = "map",
					     [FAKE_HUGE1G_ACCESS] = "access",
					     [FAKE_HUGE1G_EXPORT] = "export" };

	if (!h || h->granule != (size_t)1 << 30 || fake.cfg.huge1g != (int)step)
		return ACL_SUCCESS;
	return fake_refuse(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
			   "%s: 1 GiB host pages are refused here (huge1g=%s)", call, names[step]);
}

aclError fake_leave(aclError rc)
{
	fk_unlock();
	return rc;
}

aclError fake_refuse(aclError rc, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(recent, sizeof(recent), "fake acl: ");

	va_start(ap, fmt);
	vsnprintf(recent + n, sizeof(recent) - (size_t)n, fmt, ap);
	va_end(ap);
	return rc;
}

/* The runtime's own: this thread's reason for its last failure. */
FK_API const char *aclGetRecentErrMsg(void)
{
	return recent;
}

/* ---- the control API, for tests that reach this instance with dlopen ---- */

FK_CONTROL_DEFINE(sseg_fake_acl, fake.handles, fake.reservations, fake.mappings,
		  fake.registrations)
FK_CONTROL_COUNT(sseg_fake_acl_live_devices, fk_sum(fake.device_refs, FAKE_MAX_DEVICES))
/* A registration's device: the thread's current one when it registered. */
FK_CONTROL_NTH(sseg_fake_acl_registration, fake.registrations, int, devices)
/* A mapping's logical devices granted, as a bit mask. */
FK_CONTROL_NTH(sseg_fake_acl_mapping, fake.mappings, int, devices)

FK_API const char *sseg_fake_acl_init_config(void)
{
	const char *config;

	fk_lock();
	config = fake.init_config;
	fk_unlock();
	return config;
}

FK_API int sseg_fake_acl_trusted(uint64_t shareable, int32_t *pids, int max)
{
	int n;

	fk_lock();
	n = fake_trusted_of(shareable, pids, max);
	fk_unlock();
	return n;
}
