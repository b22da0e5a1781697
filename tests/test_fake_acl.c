/* SPDX-License-Identifier: Apache-2.0 */
/* The fake ACL runtime on its own, driven through dlopen and dlsym as the
 * ascend backend drives libascendcl.so: each rule it enforces, in a child
 * that sets its own SSEG_FAKE_ACL before it loads the fake (the
 * configuration is read once per process); sharing is checked with
 * grandchildren that import what the child exported. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "aclutil.h"
#include "driver/acl_abi.h"
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
	X(aclrtMemImportFromShareableHandleV2) X(aclrtHostRegister) X(aclrtHostUnregister)

static struct {
#define FIELD(name) PFN_##name name;
	RUNTIME_ENTRIES(FIELD)
#undef FIELD
	PFN_aclGetRecentErrMsg recent;
	__typeof__(sseg_fake_acl_bugs) *bugs;
	__typeof__(sseg_fake_acl_calls) *calls;
	__typeof__(sseg_fake_acl_fail) *fail;
	__typeof__(sseg_fake_acl_trusted) *trusted;
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

/* Reserves, maps and grants the host and device 0; returns the address. */
static unsigned char *map_granted(aclrtDrvMemHandle h, size_t size)
{
	aclrtMemAccessDesc d[2] = { access_desc(ACL_MEM_LOCATION_TYPE_HOST, 0),
				    access_desc(ACL_MEM_LOCATION_TYPE_DEVICE, 0) };
	void *va = NULL;

	OK(rt.aclrtReserveMemAddress(&va, size, 0, NULL, 0));
	OK(rt.aclrtMapMem(va, size, 0, h, 0));
	OK(rt.aclrtMemSetAccess(va, size, d, 2));
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

static int allocation(void *arg)
{
	aclrtPhysicalMemProp p = host_prop(ACL_DDR_MEM_NORMAL);
	aclrtDrvMemHandle h;
	size_t gran = 0;
	int32_t pid = 0;

	(void)arg;
	start("bare_tgid_offset=100");
	OK(rt.aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran));
	CHECK(gran == 4096);
	p.memAttr = ACL_DDR_MEM_HUGE;
	OK(rt.aclrtMemGetAllocationGranularity(&p, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran));
	CHECK(gran == GRAN);
	EXPECT(rt.aclrtMallocPhysical(&h, GRAN + 4096, &p, 0), ACL_ERROR_RT_PARAM_INVALID);
	p.location.type = ACL_MEM_LOCATION_TYPE_HOST;
	EXPECT(rt.aclrtMallocPhysical(&h, GRAN, &p, 0), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
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

#define FAULTED 42

/* The sanitizers catch a fault themselves: this child's own handler
 * turns it into an exit status either way. */
static void on_fault(int sig)
{
	(void)sig;
	_exit(FAULTED);
}

static int touch(void *arg)
{
	struct sigaction sa = { .sa_handler = on_fault };

	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	((volatile unsigned char *)arg)[0] = 1;
	return 0;
}

static int mapping(void *arg)
{
	aclrtMemAccessDesc d[2] = { access_desc(ACL_MEM_LOCATION_TYPE_HOST, 0),
				    access_desc(ACL_MEM_LOCATION_TYPE_DEVICE, 0) };
	aclrtDrvMemHandle h;
	unsigned char *va = NULL;

	(void)arg;
	start("");
	h = allocate(2 * GRAN);
	EXPECT(rt.aclrtReserveMemAddress((void **)&va, 2 * GRAN, GRAN, NULL, 0),
	       ACL_ERROR_INVALID_PARAM); /* alignment is reserved: 0 */
	OK(rt.aclrtReserveMemAddress((void **)&va, 2 * GRAN, 0, NULL, 0));
	EXPECT(rt.aclrtMemSetAccess(va, 2 * GRAN, d, 2), ACL_ERROR_RT_PARAM_INVALID);
	EXPECT(rt.aclrtMapMem(va, GRAN, 0, h, 0), ACL_ERROR_RT_PARAM_INVALID);
	EXPECT(rt.aclrtMapMem(va, 2 * GRAN, GRAN, h, 0), ACL_ERROR_INVALID_PARAM);
	OK(rt.aclrtMapMem(va, 2 * GRAN, 0, h, 0));
	/* Mapped but not granted: the CPU faults. */
	CHECK(tu_wait(tu_fork(touch, va), 10000) == FAULTED);
	EXPECT(rt.aclrtMemSetAccess(va, GRAN, d, 2), ACL_ERROR_RT_PARAM_INVALID);
	d[0].flags = 0x1; /* READ: not supported */
	EXPECT(rt.aclrtMemSetAccess(va, 2 * GRAN, d, 2), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
	d[0] = access_desc(ACL_MEM_LOCATION_TYPE_HOST, 1);
	EXPECT(rt.aclrtMemSetAccess(va, 2 * GRAN, d, 2), ACL_ERROR_INVALID_PARAM);
	OK(rt.aclrtMemSetAccess(va, 2 * GRAN, &d[1], 1)); /* the device only */
	CHECK(tu_wait(tu_fork(touch, va), 10000) == FAULTED);
	d[0] = access_desc(ACL_MEM_LOCATION_TYPE_HOST, 0);
	OK(rt.aclrtMemSetAccess(va, 2 * GRAN, d, 2));
	va[2 * GRAN - 1] = 7;
	EXPECT(rt.aclrtReleaseMemAddress(va), ACL_ERROR_RT_PARAM_INVALID); /* still mapped */
	OK(rt.aclrtFreePhysical(h)); /* the mapping keeps the memory */
	CHECK(va[2 * GRAN - 1] == 7);
	unmap_release(va);
	CHECK(rt.bugs() == 1);
	return 0;
}

/* ---- sharing: a grandchild imports what this child exported ---- */

struct importer {
	uint64_t shareable;
	aclrtMemFabricHandle fabric;
	int use_fabric;
	int gate;         /* read end: wait for a byte before importing; -1 none */
	aclError expect;
};

static int import_main(void *arg)
{
	struct importer *im = arg;
	aclrtDrvMemHandle h = NULL;
	unsigned char *va;
	char go;

	OK(rt.aclrtSetDevice(0));
	if (im->gate >= 0 && read(im->gate, &go, 1) != 1)
		return 2;
	if (im->use_fabric)
		EXPECT(rt.aclrtMemImportFromShareableHandleV2(&im->fabric,
							      ACL_MEM_SHARE_HANDLE_TYPE_FABRIC, 0, &h),
		       im->expect);
	else
		EXPECT(rt.aclrtMemImportFromShareableHandle(im->shareable, 0, &h), im->expect);
	if (im->expect != ACL_SUCCESS)
		return 0;
	/* One handle per shareable handle in a process. */
	EXPECT(rt.aclrtMemImportFromShareableHandle(im->shareable, 0, &h),
	       im->use_fabric ? ACL_ERROR_RT_INVALID_HANDLE : ACL_ERROR_RT_PARAM_INVALID);
	va = map_granted(h, GRAN);
	CHECK(va[100] == 0x5a);
	va[101] = 0xa5;
	unmap_release(va);
	OK(rt.aclrtFreePhysical(h));
	return 0;
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

/* The trust list: nobody before SetPid, the named pid after it, and a
 * second SetPid replaces the first list. */
static int trust_list(void *arg)
{
	struct importer im = { .expect = ACL_ERROR_RT_NO_PERMISSION, .gate = -1 };
	const int offset = *(int *)arg;
	aclrtDrvMemHandle h, imported;
	unsigned char *va;
	int gate, gate2;
	int32_t pids[2], seen[4];
	pid_t a, b;

	start(offset ? "bare_tgid_offset=1000" : "");
	h = allocate(GRAN);
	va = map_granted(h, GRAN);
	va[100] = 0x5a;
	OK(rt.aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &im.shareable));
	EXPECT(rt.aclrtMemExportToShareableHandle(h, ACL_MEM_HANDLE_TYPE_NONE, 0, &im.shareable),
	       ACL_ERROR_RT_PARAM_INVALID); /* one export per handle */
	EXPECT(rt.aclrtMemImportFromShareableHandle(im.shareable, 0, &imported),
	       ACL_ERROR_RT_PARAM_INVALID); /* not in the exporting process */
	CHECK(tu_wait(tu_fork(import_main, &im), 10000) == 0); /* not admitted yet */
	a = spawn_importer(&im, &gate); /* admitted, then dropped from the list */
	im.expect = ACL_SUCCESS;
	b = spawn_importer(&im, &gate2);
	pids[0] = (int32_t)a + offset; /* the runtime's pid of each */
	pids[1] = (int32_t)b + offset;
	OK(rt.aclrtMemSetPidToShareableHandle(im.shareable, &pids[0], 1));
	OK(rt.aclrtMemSetPidToShareableHandle(im.shareable, &pids[1], 1)); /* replaces */
	CHECK(rt.trusted(im.shareable, seen, 4) == 1 && seen[0] == pids[1]);
	release_importer(gate2);
	CHECK(tu_wait(b, 10000) == 0);
	CHECK(va[101] == 0xa5);
	release_importer(gate);
	CHECK(tu_wait(a, 10000) == 0);
	unmap_release(va);
	OK(rt.aclrtFreePhysical(h));
	/* Freed by its exporter: nobody imports it any more. */
	im.expect = ACL_ERROR_RT_INVALID_HANDLE;
	im.gate = -1;
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
	start("bare_tgid_offset=1000");
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
	aclrtDrvMemHandle h, h2;
	unsigned char *va;

	start(enabled ? "fabric=1" : "fabric=0");
	h = allocate(GRAN);
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
	h2 = allocate(GRAN);
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
	       ACL_ERROR_RT_PARAM_INVALID);
	EXPECT(rt.aclrtHostUnregister(p + 4096), ACL_ERROR_RT_PARAM_INVALID);
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

static void run(const char *what, int (*fn)(void *), void *arg, int want)
{
	int st = tu_wait(tu_fork(fn, arg), 30000);

	if (st != want) {
		fprintf(stderr, "%s: exit status %d, expected %d\n", what, st, want);
		exit(1);
	}
}

int main(void)
{
	int zero = 0, one = 1, offset = 1000;

	run("init and context", init_and_context, NULL, 0);
	run("allocation", allocation, NULL, 0);
	run("mapping", mapping, NULL, 0);
	run("trust list", trust_list, &zero, 0);
	run("trust list with runtime pids", trust_list, &offset, 0);
	run("container pid", container_pid, NULL, 0);
	run("fabric off", fabric, &zero, 0);
	run("fabric on", fabric, &one, 0);
	run("host register", host_register, &one, 0);
	run("host register unsupported", host_register, &zero, 0);
	run("scripted failures", scripted, NULL, 0);
	run("bad script", bad_script, "aclrtMapMem:x:1", 128 + SIGABRT);
	run("bad entry", bad_script, "aclrtNoSuchCall:1:1", 128 + SIGABRT);
	printf("fake_acl: ok\n");
	return 0;
}
