/* SPDX-License-Identifier: Apache-2.0 */
#include <signal.h>
#include <sys/resource.h>

#include "forkcheck.h"
#include "testutil.h"

static const struct tu_fork_check *forked;
static sseg_t *device_seg, *registered_seg;
static long calls_before_fork;

static sseg_t *solo(const char *suffix, enum sseg_backend backend)
{
	const struct tu_fork_check *c = forked;
	char name[64];

	snprintf(name, sizeof(name), "%s-%s", c->prefix, suffix);
	SSEG_OPTS(o, .name = name, .size = 4 << 20, .world_size = 1, .backend = backend,
		  .pages = backend == SSEG_BACKEND_MEMFD ? SSEG_PAGES_BASE : SSEG_PAGES_AUTO,
		  .flags = backend == SSEG_BACKEND_MEMFD ? SSEG_F_HOST_REGISTER : 0,
		  .device_backend = c->registrar);
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	CHECK_RC(sseg_create(&o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	return seg;
}

static int touch(void *addr)
{
	volatile unsigned char *byte = addr;
	struct rlimit no_core = { 0, 0 };

	setrlimit(RLIMIT_CORE, &no_core);
	signal(SIGSEGV, SIG_DFL);
	signal(SIGBUS, SIG_DFL);
	*byte = *byte;
	return 0;
}

int tu_touch_in_child(void *addr)
{
	return tu_wait(tu_fork(touch, addr), 10000);
}

static int child(void *arg)
{
	struct sseg_info info = { .sz = sizeof(info) };

	(void)arg;
	CHECK(forked->calls(NULL) == calls_before_fork); /* the atfork handler made none */
	if (forked->device_pages == TU_FORK_PAGES_ABSENT)
		CHECK(tu_touch_in_child(sseg_base(device_seg)) == 128 + SIGSEGV);
	CHECK_RC(sseg_info(device_seg, &info), 0);
	CHECK_RC(sseg_info(registered_seg, &info), 0);
	CHECK_RC(sseg_destroy(device_seg), 0);
	CHECK_RC(sseg_destroy(registered_seg), 0);
	CHECK(forked->calls(NULL) == calls_before_fork);
	return forked->child_checks ? forked->child_checks() : 0;
}

void tu_fork_after_segments(const struct tu_fork_check *check)
{
	struct sseg_info info = { .sz = sizeof(info) };

	forked = check;
	device_seg = solo("vmm", check->device);
	registered_seg = solo("hostreg", SSEG_BACKEND_MEMFD);
	CHECK_RC(sseg_info(registered_seg, &info), 0);
	CHECK(info.registered_chunks == 1 && check->live_registrations() == 1);
	calls_before_fork = check->calls(NULL);
	CHECK(tu_wait(tu_fork(child, NULL), 10000) == 0);
	/* The parent's segments are whole. */
	((unsigned char *)sseg_base(device_seg))[1] = 1;
	CHECK(check->live_registrations() == 1 && check->live_mappings() == 1);
	CHECK_RC(sseg_destroy(device_seg), 0);
	CHECK_RC(sseg_destroy(registered_seg), 0);
}
