/* SPDX-License-Identifier: Apache-2.0 */
/* Checks for a machine with an NVIDIA GPU, run by tests/gpu/run.sh. Every
 * subcommand prints JSON lines and goes on past a refusal: what the driver
 * or a sandbox refuses is a result, reported with the driver's error name.
 * The driver is loaded the way the library loads it (SSEG_CUDA_LIBRARY may
 * name the project's fake driver, honoured only when uid == euid), so
 * test_gpu_check runs every subcommand without a GPU.
 *
 *   gpu_check env                      driver, devices, attributes, peers;
 *                                      what the OS and the driver refuse,
 *                                      each next to what the fake answers
 *   gpu_check variants SIZE            quick sharing variants, 2 ranks each
 *   gpu_check copy SIZE REPS           H2D/D2H of KV blocks (16, 64, 256 KiB)
 *                                      from a shared segment and from a
 *                                      cuMemHostAlloc buffer
 *   gpu_check register SIZE REPS RANKS cuMemHostRegister time per rank,
 *                                      4 KiB against 2 MiB HugeTLB pages
 *
 * Bench lines share the CPU benchmark's shape: {"schema": 1, "bench", ...}.
 * SSEG_GPU_PAGES (auto, base, thp, hugetlb-2M) sets the segments' pages;
 * base also skips the HugeTLB registration timing (tests use it to leave
 * the host's HugeTLB pool alone). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sharedseg.h"
/* The project's declarations of the driver ABI (checked against cuda.h by
 * test_cuda_abi); this program is not part of the library. */
#include "../../src/driver/cuda_abi.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define MAX_REPS 32
#define MAX_RANKS 8

typedef PFN_cuDeviceGetUuid_v2 PFN_cuDeviceGetUuid;

/* name, ABI version, required (else a check that needs it reports so) */
#define DRIVER(X)                                  \
	X(cuGetErrorName, 6000, 1)                 \
	X(cuInit, 2000, 1)                         \
	X(cuDriverGetVersion, 2020, 1)             \
	X(cuDeviceGetCount, 2000, 1)               \
	X(cuDeviceGet, 2000, 1)                    \
	X(cuDeviceGetAttribute, 2000, 1)           \
	X(cuDeviceCanAccessPeer, 4000, 1)          \
	X(cuDeviceGetUuid, 11040, 0)               \
	X(cuDevicePrimaryCtxRetain, 7000, 1)       \
	X(cuDevicePrimaryCtxRelease, 11000, 1)     \
	X(cuCtxSetCurrent, 4000, 1)                \
	X(cuCtxSynchronize, 2000, 1)               \
	X(cuMemAlloc, 3020, 1)                     \
	X(cuMemFree, 3020, 1)                      \
	X(cuMemHostAlloc, 2020, 1)                 \
	X(cuMemFreeHost, 2000, 1)                  \
	X(cuMemcpyHtoD, 3020, 1)                   \
	X(cuMemcpyDtoH, 3020, 1)                   \
	X(cuMemHostRegister, 6050, 1)              \
	X(cuMemHostUnregister, 4000, 1)            \
	X(cuMemHostGetDevicePointer, 3020, 1)      \
	X(cuMemGetAllocationGranularity, 10020, 0) \
	X(cuMemCreate, 10020, 0)                   \
	X(cuMemRelease, 10020, 0)                  \
	X(cuMemAddressReserve, 10020, 0)           \
	X(cuMemAddressFree, 10020, 0)              \
	X(cuMemMap, 10020, 0)                      \
	X(cuMemUnmap, 10020, 0)                    \
	X(cuMemSetAccess, 10020, 0)                \
	X(cuMemExportToShareableHandle, 10020, 0)  \
	X(cuMemImportFromShareableHandle, 10020, 0)

static struct {
#define FIELD(name, version, required) PFN_##name name;
	DRIVER(FIELD)
#undef FIELD
	const char *path;
	int version;
	int devices;
} cu;

/* ---- JSON lines ---- */

struct json {
	char buf[8192];
	size_t len;
};

static void j_put(struct json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void j_put(struct json *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->len >= sizeof(j->buf))
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->buf + j->len, sizeof(j->buf) - j->len, fmt, ap);
	va_end(ap);
	if (n > 0)
		j->len += (size_t)n;
}

static void j_key(struct json *j, const char *key)
{
	j_put(j, "%s\"%s\": ", j->len > 1 ? ", " : "", key);
}

static void j_str(struct json *j, const char *key, const char *value)
{
	j_key(j, key);
	j_put(j, "\"");
	for (const unsigned char *c = (const unsigned char *)value; *c; c++) {
		if (*c == '"' || *c == '\\')
			j_put(j, "\\%c", *c);
		else if (*c < 0x20)
			j_put(j, "\\u%04x", *c);
		else
			j_put(j, "%c", *c);
	}
	j_put(j, "\"");
}

static void j_int(struct json *j, const char *key, long long value)
{
	j_key(j, key);
	j_put(j, "%lld", value);
}

static void j_num(struct json *j, const char *key, double value)
{
	j_key(j, key);
	if (isfinite(value))
		j_put(j, "%.6g", value);
	else
		j_put(j, "null");
}

static void j_begin(struct json *j, const char *check)
{
	j->len = 0;
	j_put(j, "{");
	if (check)
		j_str(j, "check", check);
}

static void j_end(struct json *j)
{
	printf("%s}\n", j->buf);
	fflush(stdout);
}

/* ---- the driver ---- */

static const char *library_path(void)
{
	const char *env = getenv("SSEG_CUDA_LIBRARY");

	if (env && *env && getuid() == geteuid() && getgid() == getegid())
		return env;
	return "libcuda.so.1";
}

static const char *cu_name(CUresult r)
{
	static __thread char text[32];
	const char *name = NULL;

	if (cu.cuGetErrorName && cu.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
		return name;
	snprintf(text, sizeof(text), "CUresult %d", r);
	return text;
}

/* Every entry point through cuGetProcAddress, pinned to its ABI version. */
static int resolve_all(void *lib, char *why, size_t len)
{
	PFN_cuGetProcAddress_v2 proc = (PFN_cuGetProcAddress_v2)dlsym(lib, "cuGetProcAddress_v2");
	void *fn;
	int status;

	if (!proc) {
		snprintf(why, len, "%s has no cuGetProcAddress_v2 (driver older than 12.0)", cu.path);
		return -1;
	}
#define RESOLVE(name, version, required)                                                   \
	fn = NULL;                                                                         \
	status = -1;                                                                       \
	if (proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) \
		fn = NULL;                                                                 \
	if (!fn && required) {                                                             \
		snprintf(why, len, "the driver lacks %s", #name);                          \
		return -1;                                                                 \
	}                                                                                  \
	cu.name = (PFN_##name)fn;
	DRIVER(RESOLVE)
#undef RESOLVE
	return 0;
}

/* Loads and initializes the driver; a forked rank calls this itself, since
 * a child cannot use a driver its parent initialized. */
static int load_driver(char *why, size_t len)
{
	void *lib;
	CUresult r;

	cu.path = library_path();
	lib = dlopen(cu.path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(why, len, "no CUDA driver: %s", dlerror());
		return -1;
	}
	if (resolve_all(lib, why, len))
		return -1;
	r = cu.cuInit(0);
	if (r == CUDA_SUCCESS)
		r = cu.cuDriverGetVersion(&cu.version);
	if (r == CUDA_SUCCESS)
		r = cu.cuDeviceGetCount(&cu.devices);
	if (r != CUDA_SUCCESS) {
		snprintf(why, len, "cuInit or a device query failed: %s", cu_name(r));
		return -1;
	}
	return 0;
}

/* Makes device dev's primary context current on this thread. */
static CUresult enter_device(int dev)
{
	CUcontext ctx = NULL;
	CUresult r = cu.cuDevicePrimaryCtxRetain(&ctx, dev);

	return r == CUDA_SUCCESS ? cu.cuCtxSetCurrent(ctx) : r;
}

static int driver_or_report(const char *check)
{
	char why[256];
	struct json j;

	if (load_driver(why, sizeof(why)) == 0 && enter_device(0) == CUDA_SUCCESS)
		return 0;
	j_begin(&j, check);
	j_str(&j, "result", "fail");
	j_str(&j, "error", why);
	j_end(&j);
	return -1;
}

/* ---- small helpers ---- */

static enum sseg_pages pages_wanted(void)
{
	const char *env = getenv("SSEG_GPU_PAGES");
	enum sseg_pages pages = SSEG_PAGES_AUTO;

	if (env && sseg_parse_pages(env, &pages))
		pages = SSEG_PAGES_AUTO;
	return pages;
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

static const char *errno_name(int err)
{
	static __thread char text[24];

	switch (err) {
	case 0: return "ok";
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EINVAL: return "EINVAL";
	case ENOMEM: return "ENOMEM";
	case ENOSYS: return "ENOSYS";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EBUSY: return "EBUSY";
	case EFAULT: return "EFAULT";
	default: snprintf(text, sizeof(text), "errno %d", err); return text;
	}
}

/* Fills len bytes with a pattern that differs per page. */
static void pattern(unsigned char *p, size_t len)
{
	for (size_t off = 0; off < len; off += 4096)
		p[off] = (unsigned char)((off >> 12) * 131u + 7u);
}

static int pattern_holds(const unsigned char *p, size_t len)
{
	for (size_t off = 0; off < len; off += 4096)
		if (p[off] != (unsigned char)((off >> 12) * 131u + 7u))
			return 0;
	return 1;
}

/* ---- ranks: processes forked before any of them loads the driver ---- */

/* What a rank tells the parent: its verdict, or one series of samples.
 * Smaller than PIPE_BUF, so ranks write records whole into one pipe. */
struct record {
	int rank;
	int ok;
	char error[240];
	char handle_type[16];
	int registered_chunks;
	int readonly;
	char bench[24];
	char mechanism[40];
	char pages_requested[16];
	char pages_obtained[32];
	unsigned long long size;
	int reps;
	double values[MAX_REPS];
};

typedef int (*rank_fn)(int rank, void *arg, int out);

static void send_record(int out, const struct record *rec)
{
	if (write(out, rec, sizeof(*rec)) != (ssize_t)sizeof(*rec))
		perror("gpu_check: write to the parent");
}

static int read_records(int fd, struct record *records, int max)
{
	int n = 0;
	struct record rec;

	while (read(fd, &rec, sizeof(rec)) == (ssize_t)sizeof(rec))
		if (n < max)
			records[n++] = rec;
	return n;
}

/* Runs fn in n processes; returns how many failed, and their records. */
static int ranks_run(int n, rank_fn fn, void *arg, struct record *records, int max, int *nrec)
{
	pid_t pids[MAX_RANKS];
	int fds[2], failed = 0;

	if (pipe2(fds, O_CLOEXEC))
		return n;
	fflush(stdout);
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] == 0) {
			close(fds[0]);
			_exit(fn(r, arg, fds[1]));
		}
	}
	close(fds[1]);
	*nrec = read_records(fds[0], records, max);
	close(fds[0]);
	for (int r = 0; r < n; r++) {
		int st = 0;

		if (pids[r] < 0 || waitpid(pids[r], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			failed++;
	}
	return failed;
}

static void group_name(char *buf, size_t len, const char *what)
{
	static int seq;

	snprintf(buf, len, "gpu-check-%d-%s-%d", (int)getpid(), what, seq++);
}

static int barrier(struct sseg_local_group *g)
{
	char mine = 1, all[MAX_RANKS];

	return sseg_local_allgather(&mine, all, 1, g);
}

static void describe_pages(const struct sseg_info *info, char *buf, size_t len)
{
	snprintf(buf, len, "%s:%llu", sseg_pages_name(info->pages),
		 (unsigned long long)info->page_size);
}

/* ---- variants: quick sharing checks, two ranks each ---- */

struct variant {
	const char *name;
	enum sseg_backend backend;
	uint32_t flags;
	enum sseg_populate populate;
	int odd_layout; /* entries of 12345 bytes, 64-byte aligned, 2 MiB chunks */
};

static const struct variant variants[] = {
	{ "readonly-cuda", SSEG_BACKEND_CUDA, SSEG_F_READONLY_PEERS, SSEG_POPULATE_OWNER, 0 },
	{ "readonly-hostreg", SSEG_BACKEND_MEMFD, SSEG_F_READONLY_PEERS | SSEG_F_HOST_REGISTER,
	  SSEG_POPULATE_OWNER, 0 },
	{ "odd-layout-hostreg", SSEG_BACKEND_MEMFD, SSEG_F_HOST_REGISTER, SSEG_POPULATE_OWNER, 1 },
	{ "spread-cuda", SSEG_BACKEND_CUDA, 0, SSEG_POPULATE_SPREAD, 0 },
};

struct variant_job {
	const struct variant *v;
	unsigned long long size;
	char name[64];
};

/* What the device reads at the segment's start is what the owner wrote. */
static int device_view(const unsigned char *base, size_t len, char *why, size_t wlen)
{
	unsigned char *back = malloc(len);
	CUdeviceptr dev = 0;
	CUresult r = back ? cu.cuMemAlloc(&dev, len) : CUDA_ERROR_OUT_OF_MEMORY;
	int ok;

	if (r == CUDA_SUCCESS)
		r = cu.cuMemcpyHtoD(dev, base, len);
	if (r == CUDA_SUCCESS)
		r = cu.cuMemcpyDtoH(back, dev, len);
	ok = r == CUDA_SUCCESS && pattern_holds(back, len);
	if (r != CUDA_SUCCESS)
		snprintf(why, wlen, "device copy of the segment failed: %s", cu_name(r));
	else if (!ok)
		snprintf(why, wlen, "the device read other bytes than the owner wrote");
	if (dev)
		cu.cuMemFree(dev);
	free(back);
	return ok ? 0 : -1;
}

static int check_segment(sseg_t *seg, struct sseg_local_group *g, int rank, struct record *rec,
			 uint32_t flags)
{
	struct sseg_info info = { .sz = sizeof(info) };
	unsigned char *base = sseg_base(seg);
	size_t window;

	if (sseg_info(seg, &info) || barrier(g))
		return -1;
	if (info.is_owner)
		pattern(base, info.size);
	if (barrier(g))
		return -1;
	snprintf(rec->handle_type, sizeof(rec->handle_type), "%s", info.handle_type);
	rec->registered_chunks = info.registered_chunks;
	rec->readonly = info.readonly;
	if (!pattern_holds(base, info.size)) {
		snprintf(rec->error, sizeof(rec->error), "rank %d reads other bytes", rank);
		return -1;
	}
	if (!!info.readonly != (!info.is_owner && (flags & SSEG_F_READONLY_PEERS))) {
		snprintf(rec->error, sizeof(rec->error), "rank %d readonly=%d", rank, info.readonly);
		return -1;
	}
	window = info.size < 4 * MiB ? info.size : 4 * MiB;
	if (device_view(base, window, rec->error, sizeof(rec->error)))
		return -1;
	return barrier(g);
}

static int odd_layout(unsigned long long size, struct sseg_layout **layout)
{
	struct sseg_block_desc block = { .name = "kv", .bytes = 12345 };

	block.count = size / 12352; /* the 64-byte stride */
	return sseg_layout_create(&block, 1, SSEG_LAYOUT_GROUPED, 64, layout);
}

static int run_variant(struct variant_job *job, int rank, struct record *rec)
{
	const struct variant *v = job->v;
	struct sseg_layout *layout = NULL;
	struct sseg_local_group *g = NULL;
	sseg_t *seg = NULL;
	int rc = 0;

	if (load_driver(rec->error, sizeof(rec->error)) || enter_device(0))
		return -1;
	if (v->odd_layout)
		rc = odd_layout(job->size, &layout);
	SSEG_OPTS(o, .name = job->name, .size = layout ? 0 : job->size, .world_size = 2,
		  .rank = rank, .backend = v->backend, .flags = v->flags, .populate = v->populate,
		  .pages = v->backend == SSEG_BACKEND_MEMFD ? pages_wanted() : SSEG_PAGES_AUTO,
		  .layout = layout, .register_chunk = layout ? 2 * MiB : 0, .timeout_ms = 20000);
	if (!rc)
		rc = sseg_local_group_open(job->name, rank, 2, 20000, &g);
	if (!rc)
		rc = sseg_open(&o, sseg_local_allgather, g, &seg);
	if (!rc)
		rc = check_segment(seg, g, rank, rec, v->flags);
	if (rc && !rec->error[0])
		snprintf(rec->error, sizeof(rec->error), "%s", sseg_last_error());
	if (seg && sseg_destroy(seg) && !rc) {
		snprintf(rec->error, sizeof(rec->error), "destroy: %s", sseg_last_error());
		rc = -1;
	}
	if (g)
		sseg_local_group_close(g);
	sseg_layout_destroy(layout);
	return rc;
}

static int variant_rank(int rank, void *arg, int out)
{
	struct record rec = { .rank = rank };
	int rc = run_variant(arg, rank, &rec);

	rec.ok = rc == 0;
	send_record(out, &rec);
	return rc ? 1 : 0;
}

static int variants_main(unsigned long long size)
{
	struct record recs[MAX_RANKS] = { 0 };
	int failed_variants = 0;

	for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++) {
		struct variant_job job = { .v = &variants[i], .size = size };
		int nrec = 0, failed;
		struct json j;

		group_name(job.name, sizeof(job.name), "variant");
		failed = ranks_run(2, variant_rank, &job, recs, MAX_RANKS, &nrec);
		j_begin(&j, "variant");
		j_str(&j, "variant", variants[i].name);
		j_str(&j, "result", failed || nrec != 2 ? "fail" : "pass");
		j_int(&j, "ranks", 2);
		for (int r = 0; r < nrec; r++) {
			char key[32];

			snprintf(key, sizeof(key), "rank%d", recs[r].rank);
			j_str(&j, key, recs[r].ok ? recs[r].handle_type : recs[r].error);
		}
		if (nrec == 2)
			j_int(&j, "registered_chunks", recs[0].registered_chunks);
		j_end(&j);
		failed_variants += failed != 0;
	}
	return failed_variants ? 1 : 0;
}

/* ---- bench lines: samples from every rank, one line per series ---- */

static int same_series(const struct record *a, const struct record *b)
{
	return !strcmp(a->bench, b->bench) && !strcmp(a->mechanism, b->mechanism) &&
	       a->size == b->size;
}

static void print_series(const struct record *recs, int n, int first, const char *unit)
{
	double all[MAX_RANKS * MAX_REPS];
	int count = 0, ranks = 0;
	struct json j;

	for (int i = first; i < n; i++) {
		if (!same_series(&recs[i], &recs[first]))
			continue;
		ranks++;
		for (int k = 0; k < recs[i].reps && count < MAX_RANKS * MAX_REPS; k++)
			all[count++] = recs[i].values[k];
	}
	if (!count)
		return;
	qsort(all, (size_t)count, sizeof(all[0]), cmp_double);
	j_begin(&j, NULL);
	j_int(&j, "schema", 1);
	j_str(&j, "bench", recs[first].bench);
	j_str(&j, "mechanism", recs[first].mechanism);
	j_int(&j, "ranks", ranks);
	j_int(&j, "size", (long long)recs[first].size);
	j_str(&j, "pages_requested", recs[first].pages_requested);
	j_str(&j, "pages_obtained", recs[first].pages_obtained);
	j_str(&j, "unit", unit);
	j_num(&j, "min", all[0]);
	j_num(&j, "median", all[count / 2]);
	j_num(&j, "max", all[count - 1]);
	j_int(&j, "reps", recs[first].reps);
	j_end(&j);
}

/* One line per series, in the order the series first appear. */
static void print_all_series(const struct record *recs, int n, const char *unit)
{
	for (int i = 0; i < n; i++) {
		int seen = 0;

		for (int k = 0; k < i && !seen; k++)
			seen = recs[k].bench[0] && same_series(&recs[k], &recs[i]);
		if (recs[i].bench[0] && !seen)
			print_series(recs, n, i, unit);
	}
}

static void report_failures(const char *check, const struct record *recs, int n, int failed)
{
	struct json j;

	for (int i = 0; i < n; i++) {
		if (recs[i].ok || recs[i].bench[0])
			continue;
		j_begin(&j, check);
		j_str(&j, "result", "fail");
		j_int(&j, "rank", recs[i].rank);
		j_str(&j, "error", recs[i].error);
		j_end(&j);
	}
	if (failed && !n) {
		j_begin(&j, check);
		j_str(&j, "result", "fail");
		j_str(&j, "error", "the ranks died without a word");
		j_end(&j);
	}
}

/* ---- copy: KV blocks to and from the device ---- */

static const size_t block_sizes[] = { 16 * KiB, 64 * KiB, 256 * KiB };

struct copy_job {
	unsigned long long size;
	int reps;
	enum sseg_backend backend;
	const char *mechanism;
	int reference; /* also measure a cuMemHostAlloc buffer */
	char name[64];
};

/* n random block indices (a fixed sequence per rank and block size). */
static void pick_blocks(size_t *idx, size_t n, size_t nblocks, unsigned seed)
{
	unsigned long long x = 0x9e3779b97f4a7c15ull ^ seed;

	for (size_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		idx[i] = (size_t)((x >> 33) % nblocks);
	}
}

/* GB/s of each rep, copying every picked block one call at a time, after
 * one untimed pass (first touches, the driver's staging), as the CPU
 * benchmark's rows are. */
static CUresult time_blocks(int to_device, unsigned char *host, CUdeviceptr dev, size_t bs,
			    const size_t *idx, size_t n, struct record *rec)
{
	for (int rep = -1; rep < rec->reps; rep++) {
		double t0 = now();

		for (size_t i = 0; i < n; i++) {
			CUresult r = to_device ? cu.cuMemcpyHtoD(dev, host + idx[i] * bs, bs)
					       : cu.cuMemcpyDtoH(host + idx[i] * bs, dev, bs);

			if (r != CUDA_SUCCESS)
				return r;
		}
		if (rep >= 0)
			rec->values[rep] = (double)(n * bs) / (now() - t0) / 1e9;
	}
	return CUDA_SUCCESS;
}

/* Both directions, every block size, over one host buffer. */
static CUresult copy_series(unsigned char *host, size_t size, CUdeviceptr dev, int rank,
			    struct record *tmpl, int out)
{
	size_t idx[2048];

	for (size_t b = 0; b < sizeof(block_sizes) / sizeof(block_sizes[0]); b++) {
		size_t bs = block_sizes[b], n = size / bs < 2048 ? size / bs : 2048;

		pick_blocks(idx, n, size / bs, (unsigned)(rank * 31 + b));
		for (int dir = 1; dir >= 0; dir--) {
			struct record rec = *tmpl;
			CUresult r = time_blocks(dir, host, dev, bs, idx, n, &rec);

			if (r != CUDA_SUCCESS)
				return r;
			snprintf(rec.bench, sizeof(rec.bench), "%s_kv_block",
				 dir ? "h2d" : "d2h");
			rec.size = bs;
			send_record(out, &rec);
		}
	}
	return CUDA_SUCCESS;
}

static CUresult reference_series(size_t size, CUdeviceptr dev, int rank, int reps, int out)
{
	struct record tmpl = { .rank = rank, .ok = 1, .reps = reps };
	unsigned char *host = NULL;
	CUresult r = cu.cuMemHostAlloc((void **)&host, size, 0);

	if (r != CUDA_SUCCESS)
		return r;
	pattern(host, size);
	snprintf(tmpl.mechanism, sizeof(tmpl.mechanism), "cuMemHostAlloc");
	snprintf(tmpl.pages_requested, sizeof(tmpl.pages_requested), "-");
	snprintf(tmpl.pages_obtained, sizeof(tmpl.pages_obtained), "pinned");
	r = copy_series(host, size, dev, rank, &tmpl, out);
	cu.cuMemFreeHost(host);
	return r;
}

static int copy_segment(struct copy_job *job, sseg_t *seg, struct sseg_local_group *g, int rank,
			int out, struct record *fail)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct record tmpl = { .rank = rank, .ok = 1, .reps = job->reps };
	CUdeviceptr dev = 0;
	CUresult r;

	if (sseg_info(seg, &info) || barrier(g))
		return -1;
	if (info.is_owner)
		pattern(sseg_base(seg), info.size);
	snprintf(tmpl.mechanism, sizeof(tmpl.mechanism), "%s", job->mechanism);
	snprintf(tmpl.pages_requested, sizeof(tmpl.pages_requested), "%s",
		 sseg_pages_name(job->backend == SSEG_BACKEND_MEMFD ? pages_wanted()
								     : SSEG_PAGES_AUTO));
	describe_pages(&info, tmpl.pages_obtained, sizeof(tmpl.pages_obtained));
	r = cu.cuMemAlloc(&dev, block_sizes[2]);
	if (r == CUDA_SUCCESS && barrier(g) == 0)
		r = copy_series(sseg_base(seg), info.size, dev, rank, &tmpl, out);
	if (r == CUDA_SUCCESS && job->reference)
		r = reference_series(info.size, dev, rank, job->reps, out);
	if (dev)
		cu.cuMemFree(dev);
	if (r != CUDA_SUCCESS)
		snprintf(fail->error, sizeof(fail->error), "copy: %s", cu_name(r));
	return r == CUDA_SUCCESS ? barrier(g) : -1;
}

static int copy_rank(int rank, void *arg, int out)
{
	struct copy_job *job = arg;
	struct record fail = { .rank = rank };
	struct sseg_local_group *g = NULL;
	sseg_t *seg = NULL;
	int rc = -1;
	SSEG_OPTS(o, .name = job->name, .size = job->size, .world_size = 2, .rank = rank,
		  .backend = job->backend, .timeout_ms = 20000,
		  .pages = job->backend == SSEG_BACKEND_MEMFD ? pages_wanted() : SSEG_PAGES_AUTO,
		  .flags = job->backend == SSEG_BACKEND_MEMFD ? SSEG_F_HOST_REGISTER : 0);

	if (load_driver(fail.error, sizeof(fail.error)) == 0 && enter_device(0) == CUDA_SUCCESS &&
	    sseg_local_group_open(job->name, rank, 2, 20000, &g) == 0 &&
	    sseg_open(&o, sseg_local_allgather, g, &seg) == 0)
		rc = copy_segment(job, seg, g, rank, out, &fail);
	if (rc && !fail.error[0])
		snprintf(fail.error, sizeof(fail.error), "%s", sseg_last_error());
	if (seg)
		sseg_destroy(seg);
	if (g)
		sseg_local_group_close(g);
	if (rc)
		send_record(out, &fail);
	return rc ? 1 : 0;
}

static int copy_main(unsigned long long size, int reps)
{
	static const struct {
		enum sseg_backend backend;
		const char *mechanism;
	} kinds[] = {
		{ SSEG_BACKEND_MEMFD, "sharedseg-memfd-hostreg" },
		{ SSEG_BACKEND_CUDA, "sharedseg-cuda-vmm" },
	};
	struct record recs[64] = { 0 };
	int failures = 0;

	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		struct copy_job job = { .size = size, .reps = reps, .backend = kinds[k].backend,
					.mechanism = kinds[k].mechanism, .reference = k == 0 };
		int nrec = 0, failed;

		group_name(job.name, sizeof(job.name), "copy");
		failed = ranks_run(2, copy_rank, &job, recs, 64, &nrec);
		print_all_series(recs, nrec, "GB/s");
		report_failures("copy", recs, nrec, failed);
		failures += failed != 0;
	}
	return failures ? 1 : 0;
}

/* ---- register: cuMemHostRegister time per rank ---- */

struct register_job {
	unsigned char *p; /* the parent's populated memfd mapping, inherited */
	unsigned long long size;
	int reps;
	int ranks;
	int *ready; /* shared: ranks holding a context, so all register at once */
	const char *pages_requested;
	char pages_obtained[32];
};

/* Waits (at most 30 s: a rank may have died) until every rank is ready. */
static void start_together(struct register_job *job)
{
	struct timespec nap = { 0, 1000000 };

	__atomic_add_fetch(job->ready, 1, __ATOMIC_SEQ_CST);
	for (int waited = 0; waited < 30000; waited++) {
		if (__atomic_load_n(job->ready, __ATOMIC_SEQ_CST) >= job->ranks)
			return;
		nanosleep(&nap, NULL);
	}
}

static int register_rank(int rank, void *arg, int out)
{
	struct register_job *job = arg;
	struct record rec = { .rank = rank, .ok = 1, .reps = job->reps, .size = job->size };
	CUresult r = CUDA_SUCCESS;

	if (load_driver(rec.error, sizeof(rec.error)) || enter_device(0) != CUDA_SUCCESS)
		r = CUDA_ERROR_NOT_INITIALIZED;
	start_together(job);
	for (int rep = 0; rep < job->reps && r == CUDA_SUCCESS; rep++) {
		double t0 = now();

		r = cu.cuMemHostRegister(job->p, job->size, CU_MEMHOSTREGISTER_PORTABLE |
							     CU_MEMHOSTREGISTER_DEVICEMAP);
		rec.values[rep] = now() - t0;
		if (r == CUDA_SUCCESS)
			r = cu.cuMemHostUnregister(job->p);
	}
	snprintf(rec.bench, sizeof(rec.bench), "host_register_time");
	snprintf(rec.mechanism, sizeof(rec.mechanism), "cuMemHostRegister");
	snprintf(rec.pages_requested, sizeof(rec.pages_requested), "%s", job->pages_requested);
	snprintf(rec.pages_obtained, sizeof(rec.pages_obtained), "%s", job->pages_obtained);
	if (r != CUDA_SUCCESS) {
		rec.ok = 0;
		rec.bench[0] = '\0';
		if (!rec.error[0])
			snprintf(rec.error, sizeof(rec.error), "cuMemHostRegister: %s", cu_name(r));
	}
	send_record(out, &rec);
	return rec.ok ? 0 : 1;
}

/* The page size the kernel maps [p, p+len) with, from smaps. */
static void pages_of(const void *p, char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[256];
	unsigned long start, end, kb;
	int inside = 0;

	snprintf(buf, len, "unknown");
	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &start, &end) == 2)
			inside = (uintptr_t)p >= start && (uintptr_t)p < end;
		else if (inside && sscanf(line, "KernelPageSize: %lu kB", &kb) == 1)
			snprintf(buf, len, "%s:%lu", kb == 4 ? "base" : "hugetlb", kb * 1024);
		else if (inside && sscanf(line, "ShmemPmdMapped: %lu kB", &kb) == 1 && kb)
			snprintf(buf, len, "thp:2097152");
	}
	if (f)
		fclose(f);
}

/* A populated shared mapping of size bytes, on 4 KiB or HugeTLB pages. */
static unsigned char *populated(unsigned long long size, int hugetlb, int *err)
{
	int fd = memfd_create("gpu-check-register", MFD_CLOEXEC | (hugetlb ? MFD_HUGETLB : 0));
	void *p = MAP_FAILED;

	*err = 0;
	if (fd < 0 || ftruncate(fd, (off_t)size))
		*err = errno;
	else
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (!*err && p == MAP_FAILED)
		*err = errno;
	if (fd >= 0)
		close(fd);
	return p == MAP_FAILED ? NULL : p;
}

static void register_skipped(const char *pages, const char *why)
{
	struct json j;

	j_begin(&j, "register");
	j_str(&j, "pages_requested", pages);
	j_str(&j, "result", "skipped");
	j_str(&j, "error", why);
	j_end(&j);
}

static int register_pages(unsigned long long size, int reps, int ranks, int hugetlb)
{
	struct register_job job = { .size = size, .reps = reps, .ranks = ranks,
				    .pages_requested = hugetlb ? "hugetlb-2M" : "base" };
	struct record recs[MAX_RANKS] = { 0 };
	int err, nrec = 0, failed;

	job.p = populated(size, hugetlb, &err);
	if (!job.p) {
		register_skipped(job.pages_requested,
				 err == ENOMEM ? "no free HugeTLB pages for the size (ENOMEM)"
					       : errno_name(err));
		return hugetlb ? 0 : 1;
	}
	pages_of(job.p, job.pages_obtained, sizeof(job.pages_obtained));
	job.ready = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
	if (job.ready == MAP_FAILED)
		return 1;
	*job.ready = 0;
	failed = ranks_run(ranks, register_rank, &job, recs, MAX_RANKS, &nrec);
	print_all_series(recs, nrec, "s");
	report_failures("register", recs, nrec, failed);
	munmap(job.ready, sizeof(int));
	munmap(job.p, size);
	return failed ? 1 : 0;
}

static int register_main(unsigned long long size, int reps, int ranks)
{
	int rc = register_pages(size, reps, ranks, 0);

	if (pages_wanted() == SSEG_PAGES_BASE) {
		register_skipped("hugetlb-2M", "SSEG_GPU_PAGES=base");
		return rc;
	}
	return register_pages(size, reps, ranks, 1) | rc;
}

/* ---- env: the driver, the devices, and what is refused ---- */

static const struct {
	int attrib;
	const char *name;
} attributes[] = {
	{ CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "unified_addressing" },
	{ CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, "host_pointer_for_registered" },
	{ CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, "host_register" },
	{ CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, "pageable_host_page_tables" },
	{ CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "vmm" },
	{ CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, "posix_fd_handles" },
	{ CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, "read_only_host_register" },
	{ CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, "fabric_handles" },
	{ CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, "host_numa_id" },
	{ CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, "host_numa_vmm" },
};

/* The attribute's value; *r says whether the driver gave one. */
static int attribute(int dev, int attrib, CUresult *r)
{
	int value = 0;

	*r = cu.cuDeviceGetAttribute(&value, attrib, dev);
	return value;
}

static void env_device(int dev)
{
	CUuuid uuid;
	CUresult r = cu.cuDeviceGetUuid ? cu.cuDeviceGetUuid(&uuid, dev) : CUDA_ERROR_NOT_FOUND;
	const unsigned char *u = (const unsigned char *)uuid.bytes;
	char text[48];
	struct json j;

	j_begin(&j, "device");
	j_int(&j, "ordinal", dev);
	snprintf(text, sizeof(text), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
	j_str(&j, "uuid", r == CUDA_SUCCESS ? text : cu_name(r));
	for (size_t i = 0; i < sizeof(attributes) / sizeof(attributes[0]); i++) {
		int value = attribute(dev, attributes[i].attrib, &r);

		if (r == CUDA_SUCCESS)
			j_int(&j, attributes[i].name, value);
		else
			j_str(&j, attributes[i].name, cu_name(r));
	}
	j_end(&j);
}

static void env_peers(void)
{
	struct json j;

	j_begin(&j, "peers");
	j_key(&j, "can_access_peer");
	j_put(&j, "[");
	for (int a = 0; a < cu.devices; a++) {
		j_put(&j, "%s[", a ? ", " : "");
		for (int b = 0; b < cu.devices; b++) {
			int can = -1;

			cu.cuDeviceCanAccessPeer(&can, a, b);
			j_put(&j, "%s%d", b ? ", " : "", can);
		}
		j_put(&j, "]");
	}
	j_put(&j, "]");
	j_end(&j);
}

/* -- what the OS refuses (seccomp, gVisor, Firecracker kernels) -- */

static void os_line(const char *what, int err, const char *skip_why)
{
	struct json j;

	j_begin(&j, "os");
	j_str(&j, "what", what);
	j_str(&j, "result", skip_why ? "skipped" : err ? "refused" : "ok");
	if (skip_why || err)
		j_str(&j, "error", skip_why ? skip_why : errno_name(err));
	j_end(&j);
}

/* A 2 MiB memfd mapping; flags go to memfd_create. */
static void *memfd_map(unsigned flags, int *fd, int *err)
{
	void *p = MAP_FAILED;

	*fd = memfd_create("gpu-check-probe", MFD_CLOEXEC | flags);
	*err = *fd < 0 || ftruncate(*fd, 2 * MiB) ? errno : 0;
	if (!*err)
		p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (!*err && p == MAP_FAILED)
		*err = errno;
	return p == MAP_FAILED ? NULL : p;
}

static void probe_populate_write(void)
{
	int fd, err;
	void *p = memfd_map(0, &fd, &err);

	if (p && madvise(p, 2 * MiB, MADV_POPULATE_WRITE))
		err = errno;
	os_line("madv_populate_write", err, NULL);
	if (p)
		munmap(p, 2 * MiB);
	if (fd >= 0)
		close(fd);
}

static void probe_seals(const char *what, int seals)
{
	int fd = memfd_create("gpu-check-seal", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int err = fd < 0 || fcntl(fd, F_ADD_SEALS, seals) ? errno : 0;

	os_line(what, err, NULL);
	if (fd >= 0)
		close(fd);
}

/* MFD_HUGETLB itself, then a page: no free page is not a refusal. */
static void probe_hugetlb(void)
{
	int fd = memfd_create("gpu-check-huge", MFD_CLOEXEC | MFD_HUGETLB), err = 0;
	void *p = MAP_FAILED;

	if (fd < 0 || ftruncate(fd, 2 * MiB))
		err = errno;
	else
		p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (fd >= 0 && !err && p == MAP_FAILED && errno == ENOMEM)
		os_line("mfd_hugetlb", 0, "no free 2 MiB HugeTLB page");
	else
		os_line("mfd_hugetlb", err ? err : p == MAP_FAILED ? errno : 0, NULL);
	if (p != MAP_FAILED)
		munmap(p, 2 * MiB);
	if (fd >= 0)
		close(fd);
}

/* Docker's and containerd's seccomp profiles refuse these without
 * CAP_SYS_NICE; the driver's HOST_NUMA allocations are said to need them. */
static void probe_mempolicy(void)
{
	int mode = 0, err;
	void *p;

	err = syscall(SYS_get_mempolicy, &mode, NULL, 0, NULL, 0) ? errno : 0;
	os_line("get_mempolicy", err, NULL);
	p = mmap(NULL, 2 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	err = p == MAP_FAILED || syscall(SYS_mbind, p, 2 * MiB, 0 /* MPOL_DEFAULT */, NULL, 0, 0)
		      ? errno : 0;
	os_line("mbind", err, NULL);
	if (p != MAP_FAILED)
		munmap(p, 2 * MiB);
}

static void env_os(void)
{
	probe_populate_write();
	probe_seals("memfd_seals", F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	probe_seals("memfd_seal_future_write", F_SEAL_FUTURE_WRITE);
	probe_hugetlb();
	probe_mempolicy();
}

/* -- what the driver refuses, next to what the fake driver answers -- */

static void rule_line(const char *rule, const char *call, CUresult got, CUresult fake)
{
	struct json j;

	j_begin(&j, "rule");
	j_str(&j, "rule", rule);
	j_str(&j, "call", call);
	j_str(&j, "result", cu_name(got));
	j_str(&j, "fake", cu_name(fake));
	j_key(&j, "matches_fake");
	j_put(&j, got == fake ? "true" : "false");
	j_end(&j);
}

/* A process that imports what env exports: forked before env loads the
 * driver, since a forked child of an initialized process cannot use it. */
struct import_req {
	int type;
	int device;
	CUmemFabricHandle fabric;
};

static int send_fd_msg(int sock, const void *msg, size_t len, int fd)
{
	char control[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { (void *)msg, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (fd >= 0) {
		m.msg_control = control;
		m.msg_controllen = sizeof(control);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &m, 0) == (ssize_t)len ? 0 : -1;
}

static int recv_fd_msg(int sock, void *msg, size_t len, int *fd)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { msg, len };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
			    .msg_controllen = sizeof(control) };
	struct cmsghdr *c;

	if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != (ssize_t)len)
		return -1;
	c = CMSG_FIRSTHDR(&m);
	*fd = -1;
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(c), sizeof(int));
	return 0;
}

static CUresult helper_import(const struct import_req *req, int fd)
{
	CUmemGenericAllocationHandle handle;
	void *os = req->type == CU_MEM_HANDLE_TYPE_FABRIC ? (void *)&req->fabric
							  : (void *)(uintptr_t)fd;
	CUresult r = enter_device(req->device);

	if (r == CUDA_SUCCESS)
		r = cu.cuMemImportFromShareableHandle(&handle, os, req->type);
	if (r == CUDA_SUCCESS)
		cu.cuMemRelease(handle);
	return r;
}

static int helper_main(int sock)
{
	char why[256];
	int loaded = -1, fd;
	struct import_req req;

	while (recv_fd_msg(sock, &req, sizeof(req), &fd) == 0) {
		CUresult r = CUDA_ERROR_NOT_INITIALIZED;

		if (loaded < 0)
			loaded = load_driver(why, sizeof(why)) == 0;
		if (loaded && cu.cuMemImportFromShareableHandle)
			r = helper_import(&req, fd);
		if (fd >= 0)
			close(fd);
		if (write(sock, &r, sizeof(r)) != sizeof(r))
			break;
	}
	return 0;
}

static int helper_start(pid_t *pid)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	fflush(stdout);
	*pid = fork();
	if (*pid == 0) {
		close(sv[0]);
		_exit(helper_main(sv[1]));
	}
	close(sv[1]);
	return sv[0];
}

static CUresult other_process_imports(int helper, int type, int device, const void *handle)
{
	struct import_req req = { .type = type, .device = device };
	CUresult r = CUDA_ERROR_UNKNOWN;
	int fd = -1;

	if (type == CU_MEM_HANDLE_TYPE_FABRIC)
		memcpy(&req.fabric, handle, sizeof(req.fabric));
	else
		fd = *(const int *)handle;
	if (helper < 0 || send_fd_msg(helper, &req, sizeof(req), fd) ||
	    read(helper, &r, sizeof(r)) != sizeof(r))
		return CUDA_ERROR_UNKNOWN;
	return r;
}

/* The VMM calls with no current context (the fake: INVALID_CONTEXT). */
static void rules_without_context(const CUmemAllocationProp *prop, size_t gran)
{
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr va = 0;
	size_t g = 0;
	CUresult rg, rc, rr;

	cu.cuCtxSetCurrent(NULL);
	rg = cu.cuMemGetAllocationGranularity(&g, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	rc = cu.cuMemCreate(&h, gran, prop, 0);
	rr = cu.cuMemAddressReserve(&va, gran, 0, 0, 0);
	enter_device(0);
	if (rc == CUDA_SUCCESS)
		cu.cuMemRelease(h);
	if (rr == CUDA_SUCCESS)
		cu.cuMemAddressFree(va, gran);
	rule_line("vmm_needs_context", "cuMemGetAllocationGranularity", rg,
		  CUDA_ERROR_INVALID_CONTEXT);
	rule_line("vmm_needs_context", "cuMemCreate", rc, CUDA_ERROR_INVALID_CONTEXT);
	rule_line("vmm_needs_context", "cuMemAddressReserve", rr, CUDA_ERROR_INVALID_CONTEXT);
}

/* Device 0's host node, as the library places its segments (-1: 0). */
static int host_node(void)
{
	CUresult r;
	int node = attribute(0, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, &r);

	return r != CUDA_SUCCESS || node < 0 ? 0 : node;
}

/* One HOST_NUMA allocation of 2 granules, reserved and mapped at va. */
struct vmm {
	CUmemAllocationProp prop;
	size_t gran;
	CUmemGenericAllocationHandle handle;
	CUdeviceptr va;
	int mapped;
};

/* Whether every other device can reach device 0's memory. */
static int all_peers_of_0(void)
{
	int all = 1;

	for (int d = 1; d < cu.devices; d++) {
		int can = 0;

		cu.cuDeviceCanAccessPeer(&can, d, 0);
		all = all && can;
	}
	return all;
}

static CUresult access_every_device(const struct vmm *m, int host_node)
{
	CUmemAccessDesc desc[1 + 64];
	size_t n = 0;

	desc[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_HOST_NUMA, host_node },
				       CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	for (int d = 0; d < cu.devices && n < 65; d++)
		desc[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, d },
					       CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	return cu.cuMemSetAccess(m->va, 2 * m->gran, desc, n);
}

static CUresult access_one(const struct vmm *m, CUmemLocationType type, int id)
{
	CUmemAccessDesc desc = { { type, id }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };

	return cu.cuMemSetAccess(m->va, 2 * m->gran, &desc, 1);
}

/* As the library grants: the host, the own device, then each other device
 * alone; the fake refuses a device without peer access to the memory's
 * (the creating context's device, 0) with 217, which the docs do not name. */
static void rules_access_one_by_one(const struct vmm *m)
{
	char call[64];
	int can;

	rule_line("access_host_alone", "cuMemSetAccess(HOST_NUMA)",
		  access_one(m, CU_MEM_LOCATION_TYPE_HOST_NUMA, m->prop.location.id), CUDA_SUCCESS);
	rule_line("access_own_device_alone", "cuMemSetAccess(device 0)",
		  access_one(m, CU_MEM_LOCATION_TYPE_DEVICE, 0), CUDA_SUCCESS);
	for (int d = 1; d < cu.devices; d++) {
		can = 0;
		cu.cuDeviceCanAccessPeer(&can, d, 0);
		snprintf(call, sizeof(call), "cuMemSetAccess(device %d alone)", d);
		rule_line(can ? "access_peer_device" : "access_no_peer_device", call,
			  access_one(m, CU_MEM_LOCATION_TYPE_DEVICE, d),
			  can ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	}
}

static void rules_mapping(struct vmm *m)
{
	CUresult r;

	r = cu.cuMemMap(m->va, m->gran, m->gran, m->handle, 0);
	rule_line("map_offset_zero", "cuMemMap(offset=granularity)", r, CUDA_ERROR_INVALID_VALUE);
	if (r == CUDA_SUCCESS)
		cu.cuMemUnmap(m->va, m->gran);
	m->mapped = cu.cuMemMap(m->va, 2 * m->gran, 0, m->handle, 0) == CUDA_SUCCESS;
	if (!m->mapped)
		return;
	/* "CUmemLocation::id is ignored" for HOST_NUMA access entries. One
	 * call for every device fails whole where a pair lacks peer access
	 * (217 in the field reports; the fake applies none of the list). */
	r = access_every_device(m, 77);
	rule_line("host_numa_access_id_ignored", "cuMemSetAccess(HOST_NUMA id 77 + devices)", r,
		  all_peers_of_0() ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	r = access_every_device(m, m->prop.location.id);
	rule_line("access_every_device", "cuMemSetAccess(host + every device)", r,
		  all_peers_of_0() ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	rules_access_one_by_one(m);
}

static void rules_import(struct vmm *m, int helper)
{
	int fd = -1, can = 0;
	CUresult r;

	r = cu.cuMemExportToShareableHandle(&fd, m->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
					    0);
	rule_line("posix_fd_export", "cuMemExportToShareableHandle(POSIX fd)", r, CUDA_SUCCESS);
	if (r != CUDA_SUCCESS)
		return;
	r = other_process_imports(helper, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0, &fd);
	rule_line("posix_fd_import", "cuMemImportFromShareableHandle(POSIX fd, device 0)", r,
		  CUDA_SUCCESS);
	if (cu.devices > 1) {
		cu.cuDeviceCanAccessPeer(&can, 1, 0);
		r = other_process_imports(helper, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1, &fd);
		rule_line(can ? "posix_fd_import_peer" : "posix_fd_import_no_peer",
			  "cuMemImportFromShareableHandle(POSIX fd, device 1)", r,
			  can ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	}
	close(fd);
}

static void vmm_release(struct vmm *m)
{
	if (m->mapped)
		cu.cuMemUnmap(m->va, 2 * m->gran);
	if (m->va)
		cu.cuMemAddressFree(m->va, 2 * m->gran);
	if (m->handle)
		cu.cuMemRelease(m->handle);
}

/* HOST_NUMA allocations: created, mapped at offset 0, access, sharing. */
static void rules_host_numa(int helper)
{
	struct vmm m = { .prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				   .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
				   .location = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 } } };
	CUresult r;

	m.prop.location.id = host_node();
	r = cu.cuMemGetAllocationGranularity(&m.gran, &m.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (r != CUDA_SUCCESS)
		m.gran = 2 * MiB;
	rules_without_context(&m.prop, m.gran);
	r = cu.cuMemCreate(&m.handle, 2 * m.gran, &m.prop, 0);
	rule_line("host_numa_create", "cuMemCreate(HOST_NUMA)", r, CUDA_SUCCESS);
	if (r != CUDA_SUCCESS)
		return;
	if (cu.cuMemAddressReserve(&m.va, 2 * m.gran, 0, 0, 0) == CUDA_SUCCESS)
		rules_mapping(&m);
	rules_import(&m, helper);
	vmm_release(&m);
}

/* Fabric handles: the fake's model is a channel for create and export,
 * and importing from another process needs the same channel (imex=0). */
/* One granule with a fabric handle type: what the attribute promises. */
static CUresult fabric_create(const CUmemAllocationProp *prop, CUmemGenericAllocationHandle *h,
			      const char *rule, const char *call)
{
	size_t gran = 2 * MiB;
	CUresult r;
	int attr = attribute(0, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED, &r);

	attr = r == CUDA_SUCCESS && attr;
	cu.cuMemGetAllocationGranularity(&gran, prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	r = cu.cuMemCreate(h, gran, prop, 0);
	rule_line(rule, call, r, attr ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
	return r;
}

static void rules_fabric(int helper)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUmemGenericAllocationHandle h = 0, imported;
	CUmemFabricHandle fabric;
	CUresult r;

	if (fabric_create(&prop, &h, "fabric_create", "cuMemCreate(FABRIC)") != CUDA_SUCCESS)
		return;
	r = cu.cuMemExportToShareableHandle(&fabric, h, CU_MEM_HANDLE_TYPE_FABRIC, 0);
	rule_line("fabric_export", "cuMemExportToShareableHandle(FABRIC)", r, CUDA_SUCCESS);
	if (r == CUDA_SUCCESS) {
		r = cu.cuMemImportFromShareableHandle(&imported, &fabric, CU_MEM_HANDLE_TYPE_FABRIC);
		rule_line("fabric_import_self", "cuMemImportFromShareableHandle(FABRIC)", r,
			  CUDA_SUCCESS);
		if (r == CUDA_SUCCESS)
			cu.cuMemRelease(imported);
		r = other_process_imports(helper, CU_MEM_HANDLE_TYPE_FABRIC, 0, &fabric);
		rule_line("fabric_import_other_process", "cuMemImportFromShareableHandle(FABRIC)",
			  r, CUDA_ERROR_NOT_PERMITTED);
	}
	cu.cuMemRelease(h);
}

/* The library's fabric probe, as it runs: HOST_NUMA memory with both
 * handle types, exported as fabric and imported again by this process. */
static void rules_fabric_host_numa(void)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC |
							     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
				     .location = { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 } };
	CUmemGenericAllocationHandle h = 0, imported;
	CUmemFabricHandle fabric;
	CUresult r;

	prop.location.id = host_node();
	if (fabric_create(&prop, &h, "fabric_fd_host_numa_create",
			  "cuMemCreate(HOST_NUMA, FABRIC|POSIX_FD)") != CUDA_SUCCESS)
		return;
	r = cu.cuMemExportToShareableHandle(&fabric, h, CU_MEM_HANDLE_TYPE_FABRIC, 0);
	if (r == CUDA_SUCCESS)
		r = cu.cuMemImportFromShareableHandle(&imported, &fabric, CU_MEM_HANDLE_TYPE_FABRIC);
	rule_line("fabric_fd_host_numa_roundtrip", "export + import (FABRIC, HOST_NUMA)", r,
		  CUDA_SUCCESS);
	if (r == CUDA_SUCCESS)
		cu.cuMemRelease(imported);
	cu.cuMemRelease(h);
}

/* A HOST_NUMA access entry for memory created on a device: refused. */
static void rules_device_memory(void)
{
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUmemAccessDesc host = { { CU_MEM_LOCATION_TYPE_HOST_NUMA, 0 },
				 CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	CUmemGenericAllocationHandle h;
	CUdeviceptr va = 0;
	size_t gran = 2 * MiB;
	CUresult r;

	cu.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
	if (cu.cuMemCreate(&h, gran, &prop, 0) != CUDA_SUCCESS)
		return;
	if (cu.cuMemAddressReserve(&va, gran, 0, 0, 0) == CUDA_SUCCESS &&
	    cu.cuMemMap(va, gran, 0, h, 0) == CUDA_SUCCESS) {
		r = cu.cuMemSetAccess(va, gran, &host, 1);
		rule_line("host_numa_access_device_memory", "cuMemSetAccess(HOST_NUMA)", r,
			  CUDA_ERROR_INVALID_VALUE);
		cu.cuMemUnmap(va, gran);
	}
	if (va)
		cu.cuMemAddressFree(va, gran);
	cu.cuMemRelease(h);
}

/* Host registration: an address inside a page (gVisor's nvproxy and the
 * kernel module's ioctl take page-aligned ones only; the API sets none),
 * READ_ONLY, and a device pointer without DEVICEMAP. */
/* Memory the CPU may only read (a read-only peer's mapping): cuda.h makes
 * READ_ONLY required without attribute 100; the code without it is the
 * fake's guess (INVALID_VALUE). */
static void rules_register_read_only_mapping(void)
{
	unsigned char *p = mmap(NULL, 2 * MiB, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
				-1, 0);
	CUresult r, r100, r113;
	int pageable = attribute(0, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
				 &r100);
	int ro = attribute(0, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, &r113);

	if (p == MAP_FAILED)
		return;
	pageable = r100 == CUDA_SUCCESS && pageable;
	r = cu.cuMemHostRegister(p, 2 * MiB, CU_MEMHOSTREGISTER_PORTABLE);
	rule_line("register_read_only_mapping_plain", "cuMemHostRegister(PROT_READ memory)", r,
		  pageable ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p);
	r = cu.cuMemHostRegister(p, 2 * MiB, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_READ_ONLY);
	rule_line("register_read_only_mapping_flag", "cuMemHostRegister(PROT_READ, READ_ONLY)", r,
		  r113 == CUDA_SUCCESS && ro ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p);
	munmap(p, 2 * MiB);
}

/* destroy's quiesce: cuCtxSynchronize on the current context, and none. */
static void rules_synchronize(void)
{
	rule_line("ctx_synchronize", "cuCtxSynchronize", cu.cuCtxSynchronize(), CUDA_SUCCESS);
	cu.cuCtxSetCurrent(NULL);
	rule_line("ctx_synchronize_no_context", "cuCtxSynchronize without a context",
		  cu.cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
	enter_device(0);
}

/* What the library itself concludes from its real probes (a create under
 * the primary context per device and node) and sseg_supported. */
static void library_probe(void)
{
	int rc = sseg_supported(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO);
	char why[512];
	struct json j;

	snprintf(why, sizeof(why), "%s", rc ? sseg_last_error() : "available");
	for (int d = 0; d < cu.devices; d++) {
		struct sseg_probe_device g = { .sz = sizeof(g) };

		j_begin(&j, "library_probe");
		j_int(&j, "ordinal", d);
		if (sseg_probe_device(SSEG_BACKEND_CUDA, d, &g)) {
			j_str(&j, "error", sseg_last_error());
		} else {
			j_str(&j, "uuid", g.uuid);
			j_int(&j, "host_vmm", g.host_vmm);
			j_int(&j, "host_vmm_works", g.host_vmm_works);
			j_int(&j, "fabric_claimed", g.fabric_claimed);
			j_int(&j, "fabric_works", g.fabric_works);
			j_int(&j, "host_register", g.host_register);
			j_int(&j, "host_register_readonly", g.host_register_readonly);
		}
		j_str(&j, "supported", why);
		j_end(&j);
	}
}

static void rules_register(void)
{
	unsigned char *p = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	CUdeviceptr dptr = 0;
	CUresult r, attr_r;
	int ro = attribute(0, CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, &attr_r);

	if (p == MAP_FAILED)
		return;
	r = cu.cuMemHostRegister(p + 100, MiB, CU_MEMHOSTREGISTER_PORTABLE);
	rule_line("register_unaligned", "cuMemHostRegister(page + 100)", r, CUDA_SUCCESS);
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p + 100);
	r = cu.cuMemHostRegister(p, MiB, CU_MEMHOSTREGISTER_READ_ONLY);
	rule_line("register_read_only", "cuMemHostRegister(READ_ONLY)", r,
		  attr_r == CUDA_SUCCESS && ro ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
	if (r == CUDA_SUCCESS)
		cu.cuMemHostUnregister(p);
	r = cu.cuMemHostRegister(p, MiB, CU_MEMHOSTREGISTER_PORTABLE);
	if (r == CUDA_SUCCESS) {
		r = cu.cuMemHostGetDevicePointer(&dptr, p, 0);
		rule_line(dptr == (CUdeviceptr)(uintptr_t)p ? "device_pointer_without_devicemap"
							    : "device_pointer_differs",
			  "cuMemHostGetDevicePointer(no DEVICEMAP)", r, CUDA_SUCCESS);
		cu.cuMemHostUnregister(p);
	}
	munmap(p, 4 * MiB);
}

static void rules_attributes(void)
{
	CUresult r;

	attribute(0, 9999, &r);
	rule_line("unknown_attribute", "cuDeviceGetAttribute(9999)", r, CUDA_ERROR_INVALID_VALUE);
	attribute(0, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, &r);
	rule_line("attribute_141_needs_12090", "cuDeviceGetAttribute(141)", r,
		  cu.version >= 12090 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

/* A child forked after cuInit (the fake: NOT_INITIALIZED). */
static void rules_fork(void)
{
	int fds[2], count = 0;
	CUresult r = CUDA_ERROR_UNKNOWN;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		r = cu.cuDeviceGetCount(&count);
		_exit(write(fds[1], &r, sizeof(r)) == sizeof(r) ? 0 : 1);
	}
	close(fds[1]);
	if (pid < 0 || read(fds[0], &r, sizeof(r)) != sizeof(r))
		r = CUDA_ERROR_UNKNOWN;
	close(fds[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	rule_line("fork_child", "cuDeviceGetCount in a forked child", r,
		  CUDA_ERROR_NOT_INITIALIZED);
}

static int env_main(void)
{
	pid_t helper_pid = -1;
	int helper = helper_start(&helper_pid); /* before the driver is loaded here */
	struct json j;

	env_os();
	if (driver_or_report("driver")) {
		if (helper >= 0)
			close(helper);
		return 1;
	}
	j_begin(&j, "driver");
	j_str(&j, "result", "pass");
	j_str(&j, "library", cu.path);
	j_int(&j, "driver_version", cu.version);
	j_int(&j, "devices", cu.devices);
	j_end(&j);
	for (int d = 0; d < cu.devices; d++)
		env_device(d);
	env_peers();
	rules_attributes();
	rules_register();
	rules_register_read_only_mapping();
	rules_synchronize();
	if (cu.cuMemCreate) {
		rules_host_numa(helper);
		rules_fabric(helper);
		rules_fabric_host_numa();
		rules_device_memory();
	}
	rules_fork();
	library_probe();
	close(helper);
	if (helper_pid > 0)
		waitpid(helper_pid, NULL, 0);
	return 0;
}

/* ---- main ---- */

static int usage(void)
{
	fprintf(stderr, "usage: gpu_check env | variants SIZE | copy SIZE REPS | "
			"register SIZE REPS RANKS\n");
	return 2;
}

static int count_arg(const char *text, int max)
{
	int n = atoi(text);

	return n >= 1 && n <= max ? n : -1;
}

int main(int argc, char **argv)
{
	uint64_t size = 0;
	int reps, ranks;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "env"))
		return env_main();
	if (argc < 3 || sseg_parse_size(argv[2], &size) || size < 4 * MiB)
		return usage();
	if (argc == 3 && !strcmp(argv[1], "variants"))
		return variants_main(size);
	reps = argc >= 4 ? count_arg(argv[3], MAX_REPS) : -1;
	if (argc == 4 && !strcmp(argv[1], "copy") && reps > 0)
		return copy_main(size, reps);
	ranks = argc == 5 ? count_arg(argv[4], MAX_RANKS) : -1;
	if (argc == 5 && !strcmp(argv[1], "register") && reps > 0 && ranks > 0)
		return register_main(size, reps, ranks);
	return usage();
}
