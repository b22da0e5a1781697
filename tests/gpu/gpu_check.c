/* Checks on a real NVIDIA GPU (run by tests/gpu/run.sh; untested without
 * one): two processes share a segment (memfd + host registration, or the
 * cuda backend) and copy it to and from the device; the copy bandwidth is
 * measured side by side with a cuMemHostAlloc buffer of the same size; and
 * cuMemHostRegister is timed on 4 KiB against 2 MiB pages. One JSON object
 * per run on stdout.
 *
 *   gpu_check share memfd|cuda SIZE REPS
 *   gpu_check register SIZE REPS */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sharedseg.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;

static struct {
	CUresult (*init)(unsigned);
	CUresult (*ctx_retain)(CUcontext *, int);
	CUresult (*ctx_set)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free_dev)(CUdeviceptr);
	CUresult (*host_alloc)(void **, size_t, unsigned);
	CUresult (*free_host)(void *);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*host_register)(void *, size_t, unsigned);
	CUresult (*host_unregister)(void *);
} cu;

#define CU(call)                                                                  \
	do {                                                                      \
		CUresult r_ = (call);                                             \
		if (r_) {                                                         \
			fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #call, r_); \
			exit(1);                                                  \
		}                                                                 \
	} while (0)

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "libcuda.so.1 lacks %s\n", name);
		exit(1);
	}
	return p;
}

static void load_cuda(int device)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	CUcontext ctx;

	if (!lib) {
		fprintf(stderr, "no CUDA driver: %s\n", dlerror());
		exit(1);
	}
	*(void **)&cu.init = sym(lib, "cuInit");
	*(void **)&cu.ctx_retain = sym(lib, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.ctx_set = sym(lib, "cuCtxSetCurrent");
	*(void **)&cu.alloc = sym(lib, "cuMemAlloc_v2");
	*(void **)&cu.free_dev = sym(lib, "cuMemFree_v2");
	*(void **)&cu.host_alloc = sym(lib, "cuMemHostAlloc");
	*(void **)&cu.free_host = sym(lib, "cuMemFreeHost");
	*(void **)&cu.htod = sym(lib, "cuMemcpyHtoD_v2");
	*(void **)&cu.dtoh = sym(lib, "cuMemcpyDtoH_v2");
	*(void **)&cu.host_register = sym(lib, "cuMemHostRegister_v2");
	*(void **)&cu.host_unregister = sym(lib, "cuMemHostUnregister");
	CU(cu.init(0));
	CU(cu.ctx_retain(&ctx, device));
	CU(cu.ctx_set(ctx));
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* min and median GB/s over reps copies of size bytes. */
static void bandwidth(int htod, void *host, CUdeviceptr dev, size_t size, int reps, double *min_gbs,
		      double *med_gbs)
{
	double t[64];

	for (int i = 0; i < reps; i++) {
		double t0 = now();

		if (htod)
			CU(cu.htod(dev, host, size));
		else
			CU(cu.dtoh(host, dev, size));
		t[i] = now() - t0;
	}
	qsort(t, (size_t)reps, sizeof(t[0]), cmp_double);
	*min_gbs = size / t[reps - 1] / 1e9;
	*med_gbs = size / t[reps / 2] / 1e9;
}

static int barrier(struct sseg_local_group *g)
{
	char mine = 1, all[2];

	return sseg_local_allgather(&mine, all, 1, g);
}

static int share_rank(int rank, enum sseg_backend backend, size_t size, int reps, const char *name)
{
	SSEG_OPTS(o, .name = name, .size = size, .world_size = 2, .rank = rank,
		  .backend = backend,
		  .flags = backend == SSEG_BACKEND_MEMFD ? SSEG_F_HOST_REGISTER : 0);
	struct sseg_info info = { .sz = sizeof(info) };
	double h2d[2], d2h[2], ref_h2d[2], ref_d2h[2];
	struct sseg_local_group *g;
	unsigned char *p, *ref;
	CUdeviceptr dev;
	sseg_t *seg;
	int ok = 1;

	load_cuda(0);
	if (sseg_local_group_open(name, rank, 2, 60000, &g) ||
	    sseg_open(&o, sseg_local_allgather, g, &seg) || sseg_info(seg, &info)) {
		fprintf(stderr, "rank %d: %s\n", rank, sseg_last_error());
		return 1;
	}
	p = sseg_base(seg);
	if (rank == 0)
		for (size_t i = 0; i < size; i += 4096)
			p[i] = (unsigned char)(i >> 12);
	barrier(g);
	CU(cu.alloc(&dev, size));
	CU(cu.host_alloc((void **)&ref, size, 0));
	bandwidth(1, p, dev, size, reps, &h2d[0], &h2d[1]);
	CU(cu.dtoh(ref, dev, size)); /* the peer's view, through the GPU */
	for (size_t i = 0; i < size; i += 4096)
		ok &= ref[i] == (unsigned char)(i >> 12);
	bandwidth(1, ref, dev, size, reps, &ref_h2d[0], &ref_h2d[1]);
	bandwidth(0, ref, dev, size, reps, &ref_d2h[0], &ref_d2h[1]);
	barrier(g);
	if (rank == 0)
		bandwidth(0, p, dev, size, reps, &d2h[0], &d2h[1]);
	else
		d2h[0] = d2h[1] = 0;
	barrier(g);
	printf("{\"check\": \"share\", \"backend\": \"%s\", \"rank\": %d, \"size\": %zu, "
	       "\"handle_type\": \"%s\", \"device_addr\": %llu, \"registered_chunks\": %d, "
	       "\"verified\": %s, \"h2d_gbs\": [%.2f, %.2f], \"d2h_gbs\": [%.2f, %.2f], "
	       "\"hostalloc_h2d_gbs\": [%.2f, %.2f], \"hostalloc_d2h_gbs\": [%.2f, %.2f], "
	       "\"h2d_ratio_median\": %.3f}\n",
	       sseg_backend_name(backend), rank, size, info.handle_type,
	       (unsigned long long)info.device_addr, info.registered_chunks, ok ? "true" : "false",
	       h2d[0], h2d[1], d2h[0], d2h[1], ref_h2d[0], ref_h2d[1], ref_d2h[0], ref_d2h[1],
	       h2d[1] / ref_h2d[1]);
	fflush(stdout);
	CU(cu.free_dev(dev));
	CU(cu.free_host(ref));
	barrier(g);
	if (sseg_destroy(seg)) {
		fprintf(stderr, "rank %d: destroy: %s\n", rank, sseg_last_error());
		ok = 0;
	}
	sseg_local_group_close(g);
	return ok ? 0 : 1;
}

static int share(enum sseg_backend backend, size_t size, int reps)
{
	char name[64];
	pid_t pid[2];
	int failed = 0;

	snprintf(name, sizeof(name), "gpu-check-%d", (int)getpid());
	for (int r = 0; r < 2; r++) {
		pid[r] = fork();
		if (pid[r] == 0)
			_exit(share_rank(r, backend, size, reps, name));
	}
	for (int r = 0; r < 2; r++) {
		int st;

		waitpid(pid[r], &st, 0);
		failed |= !WIFEXITED(st) || WEXITSTATUS(st);
	}
	return failed;
}

/* cuMemHostRegister of a populated memfd mapping: 4 KiB pages, then HugeTLB
 * 2 MiB pages (the script reserves the pool). */
static double time_register(size_t size, int hugetlb, int reps)
{
	double best = 1e9;

	for (int i = 0; i < reps; i++) {
		int fd = memfd_create("gpu-check", hugetlb ? MFD_HUGETLB : 0);
		void *p;
		double t0;

		if (fd < 0 || ftruncate(fd, (off_t)size))
			return -1;
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
		close(fd);
		if (p == MAP_FAILED)
			return -1;
		t0 = now();
		CU(cu.host_register(p, size, 0x01 | 0x02));
		t0 = now() - t0;
		CU(cu.host_unregister(p));
		munmap(p, size);
		if (t0 < best)
			best = t0;
	}
	return best;
}

static int reg(size_t size, int reps)
{
	double base, huge;

	load_cuda(0);
	base = time_register(size, 0, reps);
	huge = time_register(size, 1, reps);
	printf("{\"check\": \"register\", \"size\": %zu, \"register_s_4k\": %.6f, "
	       "\"register_s_2m\": %.6f, \"ratio_4k_over_2m\": %.2f}\n",
	       size, base, huge, huge > 0 ? base / huge : -1);
	return base < 0 || huge < 0;
}

int main(int argc, char **argv)
{
	uint64_t size = 0;
	int reps = argc > 4 ? atoi(argv[4]) : 5;

	if (argc >= 3 && !strcmp(argv[1], "register") && !sseg_parse_size(argv[2], &size))
		return reg(size, argc > 3 ? atoi(argv[3]) : 3);
	if (argc >= 4 && !strcmp(argv[1], "share") && !sseg_parse_size(argv[3], &size) &&
	    reps > 0 && reps <= 64)
		return share(strcmp(argv[2], "cuda") ? SSEG_BACKEND_MEMFD : SSEG_BACKEND_CUDA,
			     size, reps);
	fprintf(stderr, "usage: gpu_check share memfd|cuda SIZE [REPS] | register SIZE [REPS]\n");
	return 2;
}
