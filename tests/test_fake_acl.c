/* SPDX-License-Identifier: Apache-2.0 */
/* The fake ACL runtime on its own, driven through dlopen and dlsym as the
 * ascend backend drives libascendcl.so: each rule it enforces, in a child
 * that sets its own SSEG_FAKE_ACL before it loads the fake (the
 * configuration is read once per process); sharing is checked with
 * grandchildren that import what the child exported. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "aclutil.h"
#include "driver/acl_abi.h"
#include "forkcheck.h"
#include "runcases.h"
#include "testutil.h"

#define MiB (1ull << 20)
#define GRAN (2 * MiB)

#define EXPECT(expr, want)                                                              \
	do {                                                                            \
		aclError got_ = (expr);                                                 \
		if (got_ != (want)) {                                                   \
			fprintf(stderr, "%s:%d: %s returned %d, expected %d (%s)\n",      \
				__FILE__, __LINE__, #expr, got_, (want), rt.recent());    \
			exit(1);                                                        \
		}                                                                       \
	} while (0)
#define OK(expr) EXPECT(expr, ACL_SUCCESS)

/* The entry points, resolved by name from the fake. */
#define RUNTIME_ENTRIES(X)                                                          \
	X(aclInit) X(aclrtGetDeviceCount) X(aclrtSetDevice) X(aclrtResetDevice)      \
	X(aclrtDeviceGetBareTgid) X(aclrtMemGetAllocationGranularity)               \
	X(aclrtMallocPhysical) X(aclrtFreePhysical) X(aclrtReserveMemAddress)        \
	X(aclrtReleaseMemAddress) X(aclrtMapMem) X(aclrtUnmapMem) X(aclrtMemSetAccess) \
	X(aclrtMemExportToShareableHandle) X(aclrtMemSetPidToShareableHandle)         \
	X(aclrtMemImportFromShareableHandle) X(aclrtMemExportToShareableHandleV2)    \
	X(aclrtMemImportFromShareableHandleV2) X(aclrtHostRegister) X(aclrtHostUnregister) \
	X(aclrtGetLogicDevIdByUserDevId)

static struct {
#define FIELD(name) PFN_##name name;
	RUNTIME_ENTRIES(FIELD)
#undef FIELD
	PFN_aclGetRecentErrMsg recent;
	__typeof__(sseg_fake_acl_bugs) *bugs;
	__typeof__(sseg_fake_acl_calls) *calls;
	__typeof__(sseg_fake_acl_fail) *fail;
	__typeof__(sseg_fake_acl_trusted) *trusted;
	__typeof__(sseg_fake_acl_mapping) *mapping;
	__typeof__(sseg_fake_acl_init_config) *init_config;
	__typeof__(sseg_fake_acl_configure) *configure;
} rt;

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "the fake lacks %s\n", name);
		exit(1);
	}
	return p;
}

/* Loads the fake with config in this process, aclInit not yet called. */
static void load(const char *config)
{
	void *lib;

	setenv("SSEG_FAKE_ACL", config, 1);
	lib = dlopen(ta_fake_path(), RTLD_NOW | RTLD_LOCAL);
	CHECK(lib);
#define RESOLVE(name) *(void **)&rt.name = sym(lib, #name);
	RUNTIME_ENTRIES(RESOLVE)
#undef RESOLVE
	*(void **)&rt.recent = sym(lib, "aclGetRecentErrMsg");
	*(void **)&rt.bugs = sym(lib, "sseg_fake_acl_bugs");
	*(void **)&rt.calls = sym(lib, "sseg_fake_acl_calls");
	*(void **)&rt.fail = sym(lib, "sseg_fake_acl_fail");
	*(void **)&rt.trusted = sym(lib, "sseg_fake_acl_trusted");
	*(void **)&rt.mapping = sym(lib, "sseg_fake_acl_mapping");
	*(void **)&rt.init_config = sym(lib, "sseg_fake_acl_init_config");
	*(void **)&rt.configure = sym(lib, "sseg_fake_acl_configure");
}

static void start(const char *config)
{
	load(config);
	OK(rt.aclInit(NULL));
	OK(rt.aclrtSetDevice(0));
}

static aclrtPhysicalMemProp host_prop(aclrtMemAttr attr)
{
	aclrtPhysicalMemProp p = { .handleType = ACL_MEM_HANDLE_TYPE_NONE,
				   .allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED, .memAttr = attr,
				   .location = { 0, ACL_MEM_LOCATION_TYPE_HOST_NUMA } };
	return p;
}

static aclrtDrvMemHandle allocate(size_t size)
{
	aclrtPhysicalMemProp p = host_prop(ACL_DDR_MEM_HUGE);
	aclrtDrvMemHandle h = NULL;

	OK(rt.aclrtMallocPhysical(&h, size, &p, 0));
	return h;
}

static aclrtMemAccessDesc access_desc(aclrtMemLocationType type, uint32_t id)
{
	aclrtMemAccessDesc d = { .flags = ACL_RT_MEM_ACCESS_FLAGS_READWRITE, .location = { id, type } };
	return d;
}

/* Reserves, maps and grants device 0 (one descriptor); returns the
 * address. */
static unsigned char *map_granted(aclrtDrvMemHandle h, size_t size)
{
	aclrtMemAccessDesc d = access_desc(ACL_MEM_LOCATION_TYPE_DEVICE, 0);
	void *va = NULL;

	OK(rt.aclrtReserveMemAddress(&va, size, 0, NULL, 0));
	OK(rt.aclrtMapMem(va, size, 0, h, 0));
	OK(rt.aclrtMemSetAccess(va, size, &d, 1));
	return va;
}

static void unmap_release(void *va)
{
	OK(rt.aclrtUnmapMem(va));
	OK(rt.aclrtReleaseMemAddress(va));
}

/* ---- cases, each in its own child ---- */

static int init_and_context(void *arg)
{
	aclrtPhysicalMemProp p = host_prop(ACL_DDR_MEM_HUGE);
	aclrtDrvMemHandle h;
	uint32_t n = 0;

	(void)arg;
	load("devices=2");
	EXPECT(rt.aclrtGetDeviceCount(&n), ACL_ERROR_UNINITIALIZE);
	OK(rt.aclInit(NULL));
	EXPECT(rt.aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
	OK(rt.aclrtGetDeviceCount(&n));
	CHECK(n == 2);
	EXPECT(rt.aclrtMallocPhysical(&h, GRAN, &p, 0), ACL_ERROR_RT_CONTEXT_NULL);
	CHECK(strstr(rt.recent(), "aclrtSetDevice"));
	EXPECT(rt.aclrtSetDevice(2), ACL_ERROR_RT_INVALID_DEVICEID);
	OK(rt.aclrtSetDevice(1));
	OK(rt.aclrtMallocPhysical(&h, GRAN, &p, 0));
	OK(rt.aclrtFreePhysical(h));
	OK(rt.aclrtResetDevice(1)); /* the last reference: the context dies */
	EXPECT(rt.aclrtMallocPhysical(&h, GRAN, &p, 0), ACL_ERROR_RT_CONTEXT_NULL);
	EXPECT(rt.aclrtResetDevice(1), ACL_ERROR_RT_PARAM_INVALID);
	CHECK(rt.bugs() == 1);
	return 0;
}

/* Host memory comes at 2 MiB whatever the page type; HOST takes id 0;
 * HOST_NUMA only where the driver has the feature. */
static int allocation(void *arg)
{
	aclrtPhysicalMemProp p = host_prop(ACL_DDR_MEM_NORMAL);
	const int no_numa = *(int *)arg;
	aclrtDrvMemHandle h;
	size_t gran = 0;
	int32_t pid = 0;

	start(no_numa ? "host_numa=0" : "bare_tgid_offset=100");
	OK(rt.aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran));
	CHECK(gran == GRAN);
	if (no_numa) {
		EXPECT(rt.aclrtMallocPhysical(&h, GRAN, &p, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
		p.location.type = ACL_MEM_LOCATION_TYPE_HOST;
		OK(rt.aclrtMallocPhysical(&h, GRAN, &p, 0));
		OK(rt.aclrtFreePhysical(h));
		return 0;
	}
	p.memAttr = ACL_DDR_MEM_HUGE;
	OK(rt.aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran));
	CHECK(gran == GRAN);
	EXPECT(rt.aclrtMallocPhysical(&h, GRAN + 4096, &p, 0), ACL_ERROR_RT_PARAM_INVALID);
	p.location = (aclrtMemLocation){ 1, ACL_MEM_LOCATION_TYPE_HOST };
	EXPECT(rt.aclrtMallocPhysical(&h, GRAN, &p, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
	p.location.id = 0; /* HOST with id 0: accepted */
	OK(rt.aclrtMallocPhysical(&h, GRAN, &p, 0));
	OK(rt.aclrtFreePhysical(h));
	p.memAttr = ACL_MEM_P2P_HUGE1G; /* 1 GiB host pages: huge1g=1 only */
	EXPECT(rt.aclrtMallocPhysical(&h, 1u << 30, &p, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
	p.memAttr = ACL_DDR_MEM_HUGE;
	p.location = (aclrtMemLocation){ 4095, ACL_MEM_LOCATION_TYPE_HOST_NUMA };
	EXPECT(rt.aclrtMallocPhysical(&h, GRAN, &p, 0), ACL_ERROR_RT_PARAM_INVALID);
	OK(rt.aclrtDeviceGetBareTgid(&pid));
	CHECK(pid == getpid() + 100);
	h = allocate(GRAN);
	OK(rt.aclrtFreePhysical(h));
	EXPECT(rt.aclrtFreePhysical(h), ACL_ERROR_RT_INVALID_HANDLE); /* freed once only */
	CHECK(rt.bugs() == 1);
	return 0;
}

/* aclrtMemSetAccess as the driver reads it: 20-byte descriptors, so only
 * one a call is whole; the owner's host entry is skipped (the CPU has the
 * mapping from aclrtMapMem); ids are the driver's logical devices. */
static int mapping(void *arg)
{
	aclrtMemAccessDesc d[2] = { access_desc(ACL_MEM_LOCATION_TYPE_HOST, 0),
				    access_desc(ACL_MEM_LOCATION_TYPE_DEVICE, 0) };
	aclrtDrvMemHandle h;
	unsigned char *va = NULL;
	size_t bytes;
	void *at;
	int devices = -1;

	(void)arg;
	start("");
	h = allocate(2 * GRAN);
	EXPECT(rt.aclrtReserveMemAddress((void **)&va, 2 * GRAN, GRAN, NULL, 0),
	       ACL_ERROR_INVALID_PARAM); /* alignment is reserved: 0 */
	OK(rt.aclrtReserveMemAddress((void **)&va, 2 * GRAN, 0, NULL, 0));
	EXPECT(rt.aclrtMemSetAccess(va, 2 * GRAN, &d[1], 1), ACL_ERROR_RT_PARAM_INVALID);
	EXPECT(rt.aclrtMapMem(va, GRAN, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);
	EXPECT(rt.aclrtMapMem(va, 2 * GRAN, GRAN, h, 0), ACL_ERROR_INVALID_PARAM);
	OK(rt.aclrtMapMem(va, 2 * GRAN, 0, h, 0));
	va[0] = 1; /* host memory: the CPU has it once mapped */
	EXPECT(rt.aclrtMemSetAccess(va, GRAN, &d[1], 1), ACL_ERROR_RT_PARAM_INVALID);
	/* Two descriptors: the second is read at byte 20, type 0. */
	EXPECT(rt.aclrtMemSetAccess(va, 2 * GRAN, d, 2), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
	CHECK(strstr(rt.recent(), "Not support type. (index=1"));
	CHECK(rt.mapping(0, &at, &bytes, &devices) == 0 && devices == 0); /* nothing applied */
	d[0].flags = 0x1; /* READ: not supported */
	EXPECT(rt.aclrtMemSetAccess(va, 2 * GRAN, d, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
	d[0] = access_desc(ACL_MEM_LOCATION_TYPE_HOST, 1);
	EXPECT(rt.aclrtMemSetAccess(va, 2 * GRAN, d, 1), ACL_ERROR_INVALID_PARAM);
	d[0] = access_desc(ACL_MEM_LOCATION_TYPE_HOST, 0);
	OK(rt.aclrtMemSetAccess(va, 2 * GRAN, d, 1)); /* the owner's host entry: skipped */
	d[1].location.id = 1;
	EXPECT(rt.aclrtMemSetAccess(va, 2 * GRAN, &d[1], 1), ACL_ERROR_RT_INVALID_DEVICEID);
	d[1].location.id = 0;
	OK(rt.aclrtMemSetAccess(va, 2 * GRAN, &d[1], 1));
	CHECK(rt.mapping(0, &at, &bytes, &devices) == 0 && at == va && devices == 1);
	va[2 * GRAN - 1] = 7;
	EXPECT(rt.aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID); /* still mapped */
	OK(rt.aclrtFreePhysical(h)); /* the mapping keeps the memory */
	CHECK(va[2 * GRAN - 1] == 7);
	unmap_release(va);
	CHECK(rt.bugs() == 1);
	return 0;
}

/* A device on PCIe does not reach host memory (HCCS only); with
 * ASCEND_RT_VISIBLE_DEVICES the user's ordinal is not the driver's id. */
static int links(void *arg)
{
	const int visible = *(int *)arg;
	aclrtMemAccessDesc d = access_desc(ACL_MEM_LOCATION_TYPE_DEVICE, 0);
	aclrtDrvMemHandle h;
	unsigned char *va = NULL;
	int32_t logic = -1;
	uint32_t n = 0;
	int devices = 0;
	size_t bytes;
	void *at;

	if (visible)
		setenv("ASCEND_RT_VISIBLE_DEVICES", "2,3", 1);
	start(visible ? "devices=4" : "hccs=0");
	h = allocate(GRAN);
	OK(rt.aclrtReserveMemAddress((void **)&va, GRAN, 0, NULL, 0));
	OK(rt.aclrtMapMem(va, GRAN, 0, h, 0));
	if (!visible) {
		EXPECT(rt.aclrtMemSetAccess(va, GRAN, &d, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
		CHECK(strstr(rt.recent(), "Only support hccs connect"));
	} else {
		OK(rt.aclrtGetDeviceCount(&n));
		CHECK(n == 2);
		OK(rt.aclrtGetLogicDevIdByUserDevId(1, &logic));
		CHECK(logic == 3);
		OK(rt.aclrtMemSetAccess(va, GRAN, &d, 1)); /* logical device 0: not one of ours */
		d.location.id = 3;
		OK(rt.aclrtMemSetAccess(va, GRAN, &d, 1));
		CHECK(rt.mapping(0, &at, &bytes, &devices) == 0 && devices == (1 | 1 << 3));
	}
	unmap_release(va);
	OK(rt.aclrtFreePhysical(h));
	return 0;
}

/* ACL does not work in a forked child of a process that set a device. */
static int child_calls(void *arg)
{
	uint32_t n;

	(void)arg;
	EXPECT(rt.aclrtGetDeviceCount(&n), ACL_ERROR_RT_INTERNAL_ERROR);
	CHECK(strstr(rt.recent(), "forked child"));
	return rt.bugs() == 1 ? 0 : 1;
}

/* Nor are its mappings copied into the child (don't-fork): it has nothing
 * at their address, and its first touch is SIGSEGV. */
static int fork_rule(void *arg)
{
	aclrtDrvMemHandle h;
	unsigned char *va;

	(void)arg;
	start("");
	CHECK(tu_wait(tu_fork(child_calls, NULL), 10000) == 0);
	h = allocate(GRAN);
	va = map_granted(h, GRAN);
	va[GRAN - 1] = 1;
	CHECK(tu_touch_in_child(va) == 128 + SIGSEGV);
	CHECK(tu_touch_in_child(va + GRAN - 1) == 128 + SIGSEGV);
	unmap_release(va);
	OK(rt.aclrtFreePhysical(h));
	CHECK(rt.bugs() == 0);
	return 0;
}

/* Older runtimes need aclInit; the current one answers without it, and
 * only the first aclInit's configuration is taken. */
static int init_order(void *arg)
{
	uint32_t n = 0;

	(void)arg;
	load("need_init=0");
	OK(rt.aclrtGetDeviceCount(&n));
	CHECK(rt.init_config() == NULL);
	OK(rt.aclInit("/dev/null"));
	EXPECT(rt.aclInit(NULL), ACL_ERROR_REPEAT_INITIALIZE);
	CHECK(!strcmp(rt.init_config(), "/dev/null"));
	return 0;
}

/* ---- sharing: a grandchild imports what this child exported ---- */

struct importer {
	uint64_t shareable;
	aclrtMemFabricHandle fabric;
	int use_fabric;
	int v1;           /* the V1 import (else V2 with the default type) */
	int gate;         /* read end: wait for a byte before importing; -1 none */
	int32_t as_pid;   /* the runtime's pid to have; 0: getpid() + the offset */
	aclError expect;
};

static aclError import_once(const struct importer *im, aclrtDrvMemHandle *h)
{
	if (im->use_fabric)
		return rt.aclrtMemImportFromShareableHandleV2((void *)&im->fabric,
							      ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, h);
	if (im->v1)
		return rt.aclrtMemImportFromShareableHandle(im->shareable, 0, h);
	return rt.aclrtMemImportFromShareableHandleV2((void *)&im->shareable,
						      ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0, h);
}

static int import_main(void *arg)
{
	struct importer *im = arg;
	aclrtMemAccessDesc host = access_desc(ACL_MEM_LOCATION_TYPE_HOST, 0);
	aclrtDrvMemHandle h = NULL, again = NULL;
	struct pollfd gate = { .fd = im->gate, .events = POLLIN };
	unsigned char *va;
	char spec[64], go;

	if (im->as_pid) {
		snprintf(spec, sizeof(spec), "bare_tgid_offset=%d", (int)(im->as_pid - getpid()));
		CHECK(rt.configure(spec) == 0);
	}
	OK(rt.aclrtSetDevice(0));
	/* A deadline: a sibling holds the gate's write end too, so a parent
	 * that failed would never close it for good. */
	if (im->gate >= 0 && (poll(&gate, 1, 20000) != 1 || read(im->gate, &go, 1) != 1))
		return 2;
	EXPECT(import_once(im, &h), im->expect);
	if (im->expect != ACL_SUCCESS)
		return 0;
	/* A repeated import is the same handle, one more reference. */
	OK(import_once(im, &again));
	CHECK(again == h);
	OK(rt.aclrtFreePhysical(again));
	va = map_granted(h, GRAN);
	/* A host entry on imported host memory: "h2h map", refused. */
	EXPECT(rt.aclrtMemSetAccess(va, GRAN, &host, 1), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
	CHECK(va[100] == 0x5a);
	va[101] = 0xa5;
	unmap_release(va);
	OK(rt.aclrtFreePhysical(h));
	return rt.bugs() == 0 ? 0 : 3;
}

static pid_t spawn_importer(struct importer *im, int *gate_write)
{
	int fds[2];
	pid_t pid;

	CHECK(pipe(fds) == 0);
	im->gate = fds[0];
	pid = tu_fork(import_main, im);
	close(fds[0]);
	*gate_write = fds[1];
	return pid;
}

static void release_importer(int gate)
{
	CHECK(write(gate, "g", 1) == 1);
	close(gate);
}

/* Until the boot-time clock is past this process's tick: a process forked
 * afterwards starts, as /proc tells it, after now (a wait on a clock, not
 * on another process). */
static void next_ticks(void)
{
	struct timespec start, now;

	clock_gettime(CLOCK_BOOTTIME, &start);
	do
		clock_gettime(CLOCK_BOOTTIME, &now);
	while ((now.tv_sec - start.tv_sec) * 1000000000L + now.tv_nsec - start.tv_nsec <
	       3 * (1000000000L / sysconf(_SC_CLK_TCK)));
}

static int set_pid_in_child(void *arg)
{
	int32_t pid = 1;

	OK(rt.aclrtSetDevice(0)); /* the parent's device is not this process's */
	EXPECT(rt.aclrtMemSetPidToShareableHandle(*(uint64_t *)arg, &pid, 1),
	       ACL_ERROR_RT_NO_PERMISSION);
	CHECK(strstr(rt.recent(), "not the exporting process"));
	return 0;
}

/* The trust list: nobody before SetPid; each SetPid adds (a pid given again
 * gets a new time); an entry set before its process started does not
 * admit it; only the exporter sets pids. The V1 import of host memory
 * fails (EnableP2P with the host's id), V2 with the default type does not. */
static int trust_list(void *arg)
{
	struct importer im = { .expect = ACL_ERROR_RT_NO_PERMISSION, .gate = -1 };
	const int offset = *(int *)arg;
	aclrtDrvMemHandle h, imported;
	unsigned char *va;
	int gate, gate2, gate3;
	int32_t pids[2], seen[4], late;
	uint64_t open;
	pid_t a, b, c;

	start(offset ? "fork_works=1;bare_tgid_offset=1000" : "fork_works=1");
	h = allocate(GRAN);
	va = map_granted(h, GRAN);
	va[100] = 0x5a;
	OK(rt.aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &im.shareable));
	EXPECT(rt.aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &im.shareable),
	       ACL_ERROR_RT_PARAM_INVALID); /* one export per handle */
	/* The exporter of host memory is refused by the list only. */
	EXPECT(rt.aclrtMemImportFromShareableHandleV2(&im.shareable,
						      ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT, 0, &imported),
	       ACL_ERROR_RT_NO_PERMISSION);
	CHECK(tu_wait(tu_fork(import_main, &im), 10000) == 0); /* not admitted yet */
	CHECK(tu_wait(tu_fork(set_pid_in_child, &im.shareable), 10000) == 0);
	im.expect = ACL_SUCCESS;
	a = spawn_importer(&im, &gate);
	im.v1 = 1;
	im.expect = ACL_ERROR_RT_DRV_INTERNAL_ERROR;
	b = spawn_importer(&im, &gate2);
	pids[0] = (int32_t)a + offset; /* the runtime's pid of each */
	pids[1] = (int32_t)b + offset;
	OK(rt.aclrtMemSetPidToShareableHandle(im.shareable, &pids[0], 1));
	OK(rt.aclrtMemSetPidToShareableHandle(im.shareable, &pids[1], 1)); /* adds */
	OK(rt.aclrtMemSetPidToShareableHandle(im.shareable, &pids[0], 1)); /* a new time */
	CHECK(rt.trusted(im.shareable, seen, 4) == 2 && seen[0] == pids[0] && seen[1] == pids[1]);
	release_importer(gate2);
	CHECK(tu_wait(b, 10000) == 0);
	release_importer(gate);
	CHECK(tu_wait(a, 10000) == 0);
	CHECK(va[101] == 0xa5);
	/* An entry set before its process started: refused, until set again. */
	im = (struct importer){ .shareable = im.shareable, .gate = -1,
				.as_pid = (int32_t)getpid() + 600000,
				.expect = ACL_ERROR_RT_NO_PERMISSION };
	late = im.as_pid;
	OK(rt.aclrtMemSetPidToShareableHandle(im.shareable, &late, 1));
	next_ticks();
	im.expect = ACL_SUCCESS;
	c = spawn_importer(&im, &gate3);
	im.expect = ACL_ERROR_RT_NO_PERMISSION;
	im.gate = -1;
	CHECK(tu_wait(tu_fork(import_main, &im), 10000) == 0);
	next_ticks();
	OK(rt.aclrtMemSetPidToShareableHandle(im.shareable, &late, 1)); /* after c started */
	release_importer(gate3);
	CHECK(tu_wait(c, 10000) == 0);
	/* Exported without pid validation: there is no list to set. */
	imported = allocate(GRAN);
	OK(rt.aclrtMemExportToShareableHandle(imported, ACL_MEM_HANDLE_TYPE_NONE,
					      ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION, &open));
	EXPECT(rt.aclrtMemSetPidToShareableHandle(open, &late, 1), ACL_ERROR_RT_NO_PERMISSION);
	OK(rt.aclrtFreePhysical(imported));
	unmap_release(va);
	OK(rt.aclrtFreePhysical(h));
	/* Freed by its exporter: nobody imports it any more. */
	im = (struct importer){ .shareable = im.shareable, .gate = -1,
				.expect = ACL_ERROR_RT_INVALID_HANDLE };
	CHECK(tu_wait(tu_fork(import_main, &im), 10000) == 0);
	CHECK(rt.bugs() == 0);
	return 0;
}

/* A process whose pid is on the list by getpid() but not by its runtime
 * pid is refused (the container case). */
static int container_pid(void *arg)
{
	struct importer im = { .expect = ACL_ERROR_RT_NO_PERMISSION };
	aclrtDrvMemHandle h;
	int32_t pid;
	int gate;
	pid_t child;

	(void)arg;
	start("fork_works=1;bare_tgid_offset=1000");
	h = allocate(GRAN);
	OK(rt.aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &im.shareable));
	child = spawn_importer(&im, &gate);
	pid = (int32_t)child;
	OK(rt.aclrtMemSetPidToShareableHandle(im.shareable, &pid, 1));
	release_importer(gate);
	CHECK(tu_wait(child, 10000) == 0);
	OK(rt.aclrtFreePhysical(h));
	return 0;
}

static int fabric(void *arg)
{
	struct importer im = { .use_fabric = 1, .gate = -1, .expect = ACL_SUCCESS };
	const int enabled = *(int *)arg;
	aclrtPhysicalMemProp p2p = host_prop(ACL_MEM_P2P_HUGE);
	aclrtDrvMemHandle h, h2;
	unsigned char *va;

	start(enabled ? "fabric=1;fork_works=1" : "fabric=0");
	h = allocate(GRAN);
	if (enabled) {
		/* Only P2P memory is fabric memory. */
		EXPECT(rt.aclrtMemExportToShareableHandleV2(h, 1, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC,
							    &im.fabric),
		       ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
		OK(rt.aclrtFreePhysical(h));
		OK(rt.aclrtMallocPhysical(&h, GRAN, &p2p, 0));
	}
	if (!enabled) {
		EXPECT(rt.aclrtMemExportToShareableHandleV2(h, 1, ACL_MEM_SHARE_HANDLE_TYPE_FABRIC,
							    &im.fabric),
		       ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
		OK(rt.aclrtFreePhysical(h));
		return 0;
	}
	va = map_granted(h, GRAN);
	va[100] = 0x5a;
	OK(rt.aclrtMemExportToShareableHandleV2(h, ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
						ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &im.fabric));
	CHECK(tu_wait(tu_fork(import_main, &im), 10000) == 0);
	CHECK(va[101] == 0xa5);
	/* With validation on and nobody on the list, nobody imports. */
	OK(rt.aclrtMallocPhysical(&h2, GRAN, &p2p, 0));
	OK(rt.aclrtMemExportToShareableHandleV2(h2, ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
						ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, &im.fabric));
	im.expect = ACL_ERROR_RT_NO_PERMISSION;
	CHECK(tu_wait(tu_fork(import_main, &im), 10000) == 0);
	unmap_release(va);
	OK(rt.aclrtFreePhysical(h));
	OK(rt.aclrtFreePhysical(h2));
	return 0;
}

static int host_register(void *arg)
{
	const int supported = *(int *)arg;
	size_t len = 4 * MiB;
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *dev = NULL;

	start(supported ? "" : "host_register=0");
	CHECK(p != MAP_FAILED);
	if (!supported) {
		EXPECT(rt.aclrtHostRegister(p, len, ACL_HOST_REGISTER_MAPPED, &dev),
		       ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
		return 0;
	}
	EXPECT(rt.aclrtHostRegister(p + 100, len - 4096, ACL_HOST_REGISTER_MAPPED, &dev),
	       ACL_ERROR_INVALID_PARAM);
	EXPECT(rt.aclrtHostRegister(p, len, (aclrtHostRegisterType)0x8, &dev),
	       ACL_ERROR_RT_FEATURE_NOT_SUPPORT); /* READONLY: reserved */
	OK(rt.aclrtHostRegister(p, len, ACL_HOST_REGISTER_MAPPED, &dev));
	CHECK(dev && dev != (void *)p);
	EXPECT(rt.aclrtHostRegister(p + 4096, 4096, ACL_HOST_REGISTER_MAPPED, &dev),
	       ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	EXPECT(rt.aclrtHostUnregister(p + 4096), ACL_ERROR_HOST_MEMORY_NOT_REGISTERED);
	CHECK(rt.bugs() == 1);
	OK(rt.aclrtHostUnregister(p));
	munmap(p, len);
	return 0;
}

static int scripted(void *arg)
{
	uint32_t n;

	(void)arg;
	setenv("SSEG_FAKE_ACL_FAIL", "aclrtGetDeviceCount:2:ACL_ERROR_RT_NO_DEVICE", 1);
	start("");
	OK(rt.aclrtGetDeviceCount(&n));
	EXPECT(rt.aclrtGetDeviceCount(&n), ACL_ERROR_RT_NO_DEVICE);
	CHECK(strstr(rt.recent(), "scripted"));
	OK(rt.aclrtGetDeviceCount(&n));
	rt.fail("aclrtGetDeviceCount", 2, 2, 507000);
	OK(rt.aclrtGetDeviceCount(&n));
	EXPECT(rt.aclrtGetDeviceCount(&n), 507000);
	EXPECT(rt.aclrtGetDeviceCount(&n), 507000);
	OK(rt.aclrtGetDeviceCount(&n));
	CHECK(rt.calls("aclrtGetDeviceCount") == 7 && rt.calls("aclrtNoSuchCall") == -1);
	return 0;
}

/* A typo in a script must not pass silently. */
static int bad_script(void *arg)
{
	uint32_t n;

	setenv("SSEG_FAKE_ACL_FAIL", (const char *)arg, 1);
	load("");
	rt.aclrtGetDeviceCount(&n);
	return 0;
}

static int zero = 0, one = 1, offset = 1000;

static const struct tu_case cases[] = {
	{ "init and context", init_and_context, NULL, 0 },
	{ "allocation", allocation, &zero, 0 },
	{ "allocation without HOST_NUMA", allocation, &one, 0 },
	{ "mapping", mapping, NULL, 0 },
	{ "PCIe link", links, &zero, 0 },
	{ "visible devices", links, &one, 0 },
	{ "fork", fork_rule, NULL, 0 },
	{ "aclInit order", init_order, NULL, 0 },
	{ "trust list", trust_list, &zero, 0 },
	{ "trust list with runtime pids", trust_list, &offset, 0 },
	{ "container pid", container_pid, NULL, 0 },
	{ "fabric off", fabric, &zero, 0 },
	{ "fabric on", fabric, &one, 0 },
	{ "host register", host_register, &one, 0 },
	{ "host register unsupported", host_register, &zero, 0 },
	{ "scripted failures", scripted, NULL, 0 },
	{ "bad script", bad_script, "aclrtMapMem:x:1", 128 + SIGABRT },
	{ "bad entry", bad_script, "aclrtNoSuchCall:1:1", 128 + SIGABRT },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	if (tu_run_cases(argc, argv, cases))
		return 1;
	printf("fake_acl: ok\n");
	return 0;
}
