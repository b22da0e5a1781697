/* SPDX-License-Identifier: Apache-2.0 */
/* Checks on a real Ascend NPU (run by tests/npu/run.sh; nothing here has
 * run on one yet): two processes share a segment (the ascend backend, or
 * memfd + aclrtHostRegister), the peer checks that the CPU can load and
 * store through its mapping (a fault is caught and reported, not fatal)
 * and reads what the owner wrote, and both copy the segment to and from
 * their device with aclrtMemcpy, timed side by side with an aclrtMallocHost
 * buffer of the same size. One JSON object per rank on stdout. A runtime
 * without the copy entry points (the project's fake) shares all the same:
 * "copies_skipped" says why nothing was measured, which is not a failure.
 *
 *   npu_check share ascend|memfd SIZE REPS
 * SHAREDSEG_ASCEND_FABRIC=0 keeps the ascend backend on the in-server handle.
 *
 *   npu_check stack
 * The raw runtime calls the backend's choices rest on (docs/ascend.md,
 * findings 1-4), each answer printed, whatever it is: aclrtMemSetAccess
 * with two descriptors and with one, a host entry on the owner and on a
 * peer, device access to host memory (HCCS or PCIe), and a peer's V1 and
 * V2 import of host memory. The peer is forked before either process uses
 * ACL (it does not work in a forked child). Exit 0 when every call
 * answered as the backend now expects. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sharedseg.h"

#define RANKS 2
#define H2D 1 /* ACL_MEMCPY_HOST_TO_DEVICE; the runtime decides from the pointers anyway */
#define D2H 2

static struct {
	int (*init)(const char *);
	int (*set_device)(int32_t);
	int (*malloc_dev)(void **, size_t, int);
	int (*free_dev)(void *);
	int (*malloc_host)(void **, size_t);
	int (*free_host)(void *);
	int (*memcpy)(void *, size_t, const void *, size_t, int);
} acl;

struct report {
	char error[512];
	char copies[160]; /* why the copies were not measured; empty: they were */
	int cpu_access; /* -1: not tried */
	int verified;
	double h2d, d2h, pinned_h2d, pinned_d2h; /* GB/s; 0: not measured */
	char handle[16];
	unsigned long long page_size;
	int chunks; /* host registration chunks */
	int device_addr; /* the segment has a device address */
};

/* The runtime the library would load: SHAREDSEG_ACL_LIBRARY, else the
 * name before 0.3, else the system's. */
static const char *acl_library(void)
{
	const char *path = getenv("SHAREDSEG_ACL_LIBRARY");

	if (!path || !*path)
		path = getenv("SSEG_ACL_LIBRARY");
	return path && *path ? path : "libascendcl.so";
}

static int load_acl(char *why, size_t len)
{
	const char *path = acl_library();
	void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);

	if (!lib) {
		snprintf(why, len, "no ACL runtime: %s", dlerror());
		return -1;
	}
	*(void **)&acl.init = dlsym(lib, "aclInit");
	*(void **)&acl.set_device = dlsym(lib, "aclrtSetDevice");
	*(void **)&acl.malloc_dev = dlsym(lib, "aclrtMalloc");
	*(void **)&acl.free_dev = dlsym(lib, "aclrtFree");
	*(void **)&acl.malloc_host = dlsym(lib, "aclrtMallocHost");
	*(void **)&acl.free_host = dlsym(lib, "aclrtFreeHost");
	*(void **)&acl.memcpy = dlsym(lib, "aclrtMemcpy");
	if (!acl.init || !acl.set_device || !acl.malloc_dev || !acl.free_dev ||
	    !acl.malloc_host || !acl.free_host || !acl.memcpy) {
		snprintf(why, len, "the ACL runtime %s lacks aclrtMalloc/aclrtMemcpy/aclrtMallocHost",
			 path && *path ? path : "libascendcl.so");
		return -1;
	}
	acl.init(NULL); /* 0, or ACL_ERROR_REPEAT_INITIALIZE after the library's */
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* GB/s of reps copies of size bytes, or 0 with why set on a failed copy. */
static double timed(void *dst, const void *src, size_t size, int kind, int reps, char *why,
		    size_t len)
{
	double t0 = now();
	int r;

	for (int i = 0; i <= reps; i++) {
		if (i == 1)
			t0 = now(); /* the first copy warms up */
		r = acl.memcpy(dst, size, src, size, kind);
		if (r) {
			snprintf(why, len, "aclrtMemcpy(%s) = %d", kind == H2D ? "H2D" : "D2H", r);
			return 0;
		}
	}
	return (double)size * reps / (now() - t0) / 1e9;
}

static void bandwidth(void *host, size_t size, int device, int reps, struct report *rp)
{
	void *dev = NULL, *pinned = NULL;
	int r = acl.set_device(device);

	if (!r)
		r = acl.malloc_dev(&dev, size, 0 /* ACL_MEM_MALLOC_HUGE_FIRST */);
	if (r) {
		snprintf(rp->error, sizeof(rp->error), "aclrtSetDevice/aclrtMalloc = %d", r);
		return;
	}
	rp->h2d = timed(dev, host, size, H2D, reps, rp->error, sizeof(rp->error));
	rp->d2h = timed(host, dev, size, D2H, reps, rp->error, sizeof(rp->error));
	if (!acl.malloc_host(&pinned, size)) {
		rp->pinned_h2d = timed(dev, pinned, size, H2D, reps, rp->error, sizeof(rp->error));
		rp->pinned_d2h = timed(pinned, dev, size, D2H, reps, rp->error, sizeof(rp->error));
		acl.free_host(pinned);
	}
	acl.free_dev(dev);
}

static sigjmp_buf fault;

static void on_fault(int sig)
{
	siglongjmp(fault, sig);
}

/* Whether the CPU may store and load through p: a fault is caught. */
static int cpu_can_touch(volatile unsigned char *p)
{
	struct sigaction sa = { .sa_handler = on_fault }, old_segv, old_bus;
	int ok = 0;

	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	if (!sigsetjmp(fault, 1)) {
		p[0] = p[0];
		ok = 1;
	}
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	return ok;
}

static int barrier(struct sseg_local_group *g)
{
	char mine = 1, all[RANKS];

	return sseg_local_allgather(&mine, all, 1, g);
}

static void use_segment(sseg_t *seg, struct sseg_local_group *g, int rank, int device, int reps,
			bool copies, struct report *rp)
{
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char *p = sseg_base(seg);
	size_t size = sseg_size(seg);

	sseg_info(seg, &info);
	snprintf(rp->handle, sizeof(rp->handle), "%s", info.handle_type);
	rp->page_size = info.page_size;
	rp->chunks = info.registered_chunks;
	rp->device_addr = info.device_addr != 0;
	rp->cpu_access = cpu_can_touch(p);
	if (rp->cpu_access && rank == 0)
		for (size_t i = 0; i < size; i += 4096)
			p[i] = (unsigned char)(i / 4096 * 7 + 1);
	barrier(g);
	rp->verified = rp->cpu_access;
	for (size_t i = 0; rp->verified && i < size; i += 4096)
		rp->verified = p[i] == (unsigned char)(i / 4096 * 7 + 1);
	barrier(g);
	if (copies)
		bandwidth(p, size, device, reps, rp);
	barrier(g); /* the owner keeps the segment until the peer is done */
}

/* Messages go into a JSON string: no quote or backslash of theirs survives. */
static void json_safe(char *s)
{
	for (; *s; s++)
		if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20)
			*s = '\'';
}

static void print_report(const char *backend, int rank, size_t size, struct report *rp)
{
	json_safe(rp->error);
	json_safe(rp->copies);
	printf("{\"check\": \"share\", \"backend\": \"%s\", \"rank\": %d, \"size\": %zu, "
	       "\"handle_type\": \"%s\", \"page_size\": %llu, \"registered_chunks\": %d, "
	       "\"device_addr\": %s, \"cpu_access\": %d, "
	       "\"verified\": %s, \"h2d_gbps\": %.2f, \"d2h_gbps\": %.2f, "
	       "\"pinned_h2d_gbps\": %.2f, \"pinned_d2h_gbps\": %.2f, \"copies_skipped\": \"%s\", "
	       "\"error\": \"%s\"}\n",
	       backend, rank, size, rp->handle, rp->page_size, rp->chunks,
	       rp->device_addr ? "true" : "false", rp->cpu_access,
	       rp->verified ? "true" : "false", rp->h2d, rp->d2h, rp->pinned_h2d, rp->pinned_d2h,
	       rp->copies, rp->error);
	fflush(stdout);
}

static int rank_main(const char *backend, size_t size, int reps, int rank)
{
	int memfd = !strcmp(backend, "memfd");
	SSEG_OPTS(o, .name = "npu-check", .size = size, .world_size = RANKS, .rank = rank,
		  .backend = memfd ? SSEG_BACKEND_MEMFD : SSEG_BACKEND_ASCEND,
		  .flags = memfd ? SSEG_F_HOST_REGISTER : 0, .device_backend = SSEG_BACKEND_ASCEND,
		  .pages = memfd ? SSEG_PAGES_BASE : SSEG_PAGES_AUTO, .timeout_ms = 60000);
	struct sseg_probe_backend facts = { .sz = sizeof(facts) };
	struct report rp = { .cpu_access = -1 };
	struct sseg_local_group *g = NULL;
	sseg_t *seg = NULL;

	bool copies;

	sseg_probe_backend(SSEG_BACKEND_ASCEND, &facts);
	o.device = facts.ndevices > 0 ? rank % facts.ndevices : 0;
	copies = load_acl(rp.copies, sizeof(rp.copies)) == 0;
	if (sseg_local_group_open("npu-check", rank, RANKS, 60000, &g))
		snprintf(rp.error, sizeof(rp.error), "%s", sseg_last_error());
	else if (sseg_open(&o, sseg_local_allgather, g, &seg) == 0)
		use_segment(seg, g, rank, o.device, reps, copies, &rp);
	else
		snprintf(rp.error, sizeof(rp.error), "%s", sseg_last_error());
	if (rp.error[0])
		fprintf(stderr, "rank %d: %s\n", rank, rp.error);
	print_report(backend, rank, size, &rp);
	if (seg && sseg_destroy(seg))
		fprintf(stderr, "destroy: %s\n", sseg_last_error());
	if (g)
		sseg_local_group_close(g);
	return rp.verified && !rp.error[0] ? 0 : 1;
}

/* ---- npu_check stack ---- */

static struct {
	int (*get_granularity)(void *, int, size_t *);
	int (*malloc_physical)(void **, size_t, const void *, uint64_t);
	int (*free_physical)(void *);
	int (*reserve)(void **, size_t, size_t, void *, uint64_t);
	int (*release)(void *);
	int (*map)(void *, size_t, size_t, void *, uint64_t);
	int (*unmap)(void *);
	int (*set_access)(void *, size_t, void *, size_t);
	int (*export_v1)(void *, int, uint64_t, uint64_t *);
	int (*set_pid)(uint64_t, int32_t *, size_t);
	int (*import_v1)(uint64_t, int32_t, void **);
	int (*import_v2)(void *, int, uint64_t, void **);
	int (*bare_tgid)(int32_t *);
	const char *(*recent)(void);
} vmm;

/* The layouts of acl_rt.h (src/driver/acl_abi.h). */
struct access_desc {
	int flags;
	uint32_t id;
	int type;
	unsigned char rsv[12];
};

struct mem_prop {
	int handle_type, allocation_type, attr;
	uint32_t id;
	int type;
	uint64_t reserve;
};

#define LOC_HOST 0
#define LOC_DEVICE 1
#define LOC_HOST_NUMA 4
#define ATTR_DDR_HUGE 2
#define READWRITE 3
#define SHARE_DEFAULT 1

static int load_vmm(char *why, size_t len)
{
	const char *path = acl_library();
	void *lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	const char *names[] = { "aclrtMemGetAllocationGranularity", "aclrtMallocPhysical",
				"aclrtFreePhysical", "aclrtReserveMemAddress",
				"aclrtReleaseMemAddress", "aclrtMapMem", "aclrtUnmapMem",
				"aclrtMemSetAccess", "aclrtMemExportToShareableHandle",
				"aclrtMemSetPidToShareableHandle",
				"aclrtMemImportFromShareableHandle",
				"aclrtMemImportFromShareableHandleV2", "aclrtDeviceGetBareTgid",
				"aclGetRecentErrMsg" };
	void **fns = (void **)&vmm;

	if (!lib)
		return snprintf(why, len, "no ACL runtime: %s", dlerror()), -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!(fns[i] = dlsym(lib, names[i])))
			return snprintf(why, len, "the ACL runtime lacks %s", names[i]), -1;
	*(void **)&acl.init = dlsym(lib, "aclInit");
	*(void **)&acl.set_device = dlsym(lib, "aclrtSetDevice");
	if (!acl.init || !acl.set_device)
		return snprintf(why, len, "the ACL runtime lacks aclInit/aclrtSetDevice"), -1;
	acl.init(NULL); /* 0, or ACL_ERROR_REPEAT_INITIALIZE */
	return 0;
}

/* One answer of the runtime, as a JSON line; 1 when it is not the one the
 * backend expects. */
static int answer(const char *check, int rc, int expect_ok, const char *means)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "%s", rc ? vmm.recent() : "");
	json_safe(msg);
	printf("{\"check\": \"%s\", \"acl\": %d, \"as_expected\": %s, \"means\": \"%s\", "
	       "\"message\": \"%s\"}\n", check, rc, (rc == 0) == expect_ok ? "true" : "false",
	       means, msg);
	fflush(stdout);
	return (rc == 0) != expect_ok;
}

static struct access_desc desc_of(int type)
{
	struct access_desc d = { .flags = READWRITE, .type = type };

	return d;
}

/* Owner or peer: reserve and map h; *va, or 0 with the answer printed. */
static int map_it(void *h, size_t size, void **va, const char *who)
{
	char check[64];
	int rc = vmm.reserve(va, size, 0, NULL, 0);

	if (!rc)
		rc = vmm.map(*va, size, 0, h, 0);
	snprintf(check, sizeof(check), "stack-%s-map", who);
	return answer(check, rc, 1, "reserve and map");
}

/* What the owner hands the peer. */
struct offer {
	uint64_t shareable;
	uint64_t size;
};

static int stack_owner(int to_peer, int from_peer)
{
	struct mem_prop prop = { .attr = ATTR_DDR_HUGE, .type = LOC_HOST_NUMA };
	struct access_desc two[2] = { desc_of(LOC_HOST), desc_of(LOC_DEVICE) };
	struct offer offer = { 0 };
	size_t gran = 0;
	void *h = NULL, *va = NULL;
	int32_t peer = 0;
	int bad = 0, rc;
	char done;

	rc = vmm.get_granularity(&prop, 0, &gran);
	if (!rc && vmm.malloc_physical(&h, gran, &prop, 0)) {
		prop.type = LOC_HOST; /* older drivers: no HOST_NUMA */
		rc = vmm.malloc_physical(&h, gran, &prop, 0);
	}
	if (answer("stack-owner-allocate", rc, 1, "HOST_NUMA node 0, else HOST"))
		return 1;
	bad += map_it(h, gran, &va, "owner");
	bad += answer("stack-f1-two-descriptors", vmm.set_access(va, gran, two, 2), 0,
		      "finding 1: a second descriptor is read at byte 20 and refused");
	bad += answer("stack-f3-host-owner", vmm.set_access(va, gran, &two[0], 1), 1,
		      "finding 3: a host entry on the owner is skipped");
	bad += answer("stack-f2-device-owner", vmm.set_access(va, gran, &two[1], 1), 1,
		      "finding 2: refused on a PCIe-attached NPU (HCCS only)");
	rc = vmm.export_v1(h, 0, 0, &offer.shareable);
	bad += answer("stack-export", rc, 1, "in-server handle, pid validation on");
	if (read(from_peer, &peer, sizeof(peer)) == sizeof(peer) && !rc)
		bad += answer("stack-set-pid", vmm.set_pid(offer.shareable, &peer, 1), 1,
			      "the peer's pid on the trust list");
	offer.size = rc ? 0 : gran;
	if (write(to_peer, &offer, sizeof(offer)) != sizeof(offer) ||
	    read(from_peer, &done, 1) != 1)
		bad++;
	vmm.unmap(va);
	vmm.release(va);
	vmm.free_physical(h);
	return bad != 0;
}

static int stack_peer_mapped(void *h, size_t size)
{
	struct access_desc host = desc_of(LOC_HOST), dev = desc_of(LOC_DEVICE);
	void *va = NULL;
	int bad = map_it(h, size, &va, "peer");

	if (bad)
		return bad;
	bad += answer("stack-f3-host-peer", vmm.set_access(va, size, &host, 1), 0,
		      "finding 3: a host entry on imported host memory is refused (h2h map)");
	bad += answer("stack-f2-device-peer", vmm.set_access(va, size, &dev, 1), 1,
		      "finding 2: refused on a PCIe-attached NPU (HCCS only)");
	printf("{\"check\": \"stack-peer-cpu\", \"cpu_access\": %d}\n", cpu_can_touch(va));
	fflush(stdout);
	vmm.unmap(va);
	vmm.release(va);
	return bad;
}

static int stack_peer(int to_owner, int from_owner)
{
	struct offer offer = { 0 };
	void *h1 = NULL, *h2 = NULL;
	int32_t tgid = 0;
	int bad = 0, rc;

	vmm.bare_tgid(&tgid);
	if (write(to_owner, &tgid, sizeof(tgid)) != sizeof(tgid) ||
	    read(from_owner, &offer, sizeof(offer)) != sizeof(offer) || !offer.size)
		return 1;
	rc = vmm.import_v1(offer.shareable, 0, &h1);
	answer("stack-f4-import-v1", rc, 0,
	       "finding 4: V1 enables P2P with the host's id as a device (informative)");
	if (!rc)
		vmm.free_physical(h1);
	rc = vmm.import_v2(&offer.shareable, SHARE_DEFAULT, 0, &h2);
	bad += answer("stack-f4-import-v2-default", rc, 1,
		      "finding 4: V2 skips EnableP2P for host memory");
	if (!rc) {
		bad += stack_peer_mapped(h2, offer.size);
		vmm.free_physical(h2);
	}
	if (write(to_owner, "d", 1) != 1)
		bad++;
	return bad != 0;
}

static int stack_main(void)
{
	int down[2], up[2], st = 0, bad;
	char why[256];
	pid_t peer;

	if (pipe(down) || pipe(up))
		return 2;
	fflush(stdout);
	peer = fork(); /* before either process uses ACL */
	if (peer == 0) {
		close(down[1]);
		close(up[0]);
		if (load_vmm(why, sizeof(why)) || acl.set_device(0)) {
			fprintf(stderr, "peer: %s\n", why);
			_exit(1);
		}
		_exit(stack_peer(up[1], down[0]));
	}
	close(down[0]);
	close(up[1]);
	if (load_vmm(why, sizeof(why)) || acl.set_device(0)) {
		fprintf(stderr, "owner: %s\n", why);
		close(down[1]);
		waitpid(peer, &st, 0);
		return 1;
	}
	bad = stack_owner(down[1], up[0]);
	close(down[1]);
	waitpid(peer, &st, 0);
	return bad || !WIFEXITED(st) || WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
	uint64_t size = 0;
	pid_t pids[RANKS];
	int failed = 0;

	if (argc == 2 && !strcmp(argv[1], "stack"))
		return stack_main();
	if (argc != 5 || strcmp(argv[1], "share") || sseg_parse_size(argv[3], &size) ||
	    atoi(argv[4]) < 1) {
		fprintf(stderr, "usage: npu_check share ascend|memfd SIZE REPS | stack\n");
		return 2;
	}
	for (int r = 0; r < RANKS; r++) {
		fflush(stdout);
		pids[r] = fork();
		if (pids[r] == 0)
			_exit(rank_main(argv[2], size, atoi(argv[4]), r));
	}
	for (int r = 0; r < RANKS; r++) {
		int st = 0;

		waitpid(pids[r], &st, 0);
		failed |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	return failed;
}
