/* SPDX-License-Identifier: Apache-2.0 */
/* Options are checked before anything is taken, each with its own message;
 * the options struct can grow without breaking older callers. */
#include <string.h>

#include "testutil.h"

static void rejects(struct sseg_opts o, int err, const char *needle)
{
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg = NULL;

	CHECK_RC(sseg_create(&o, &seg, blob), err);
	CHECK_ERR_HAS(needle);
	CHECK(seg == NULL);
}

static void bad_options(void)
{
	SSEG_OPTS(ok, .name = "opts", .size = 4096, .world_size = 2, .rank = 1);
	struct sseg_opts o;
	char long_name[80];

	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	o = ok, o.name = NULL;
	rejects(o, -EINVAL, "name must be 1 to 63 bytes, got 0");
	o = ok, o.name = long_name;
	rejects(o, -EINVAL, "got 79");
	o = ok, o.world_size = 0;
	rejects(o, -EINVAL, "world_size=0");
	o = ok, o.rank = 2;
	rejects(o, -EINVAL, "rank=2 is outside 0..1");
	o = ok, o.owner_rank = -1;
	rejects(o, -EINVAL, "owner_rank=-1");
	o = ok, o.size = 0;
	rejects(o, -EINVAL, "size is 0");
	o = ok, o.pages = 17;
	rejects(o, -EINVAL, "pages=17");
	o = ok, o.backend = 9;
	rejects(o, -EINVAL, "backend=9");
	o = ok, o.populate = 5;
	rejects(o, -EINVAL, "populate=5");
	o = ok, o.flags = 1u << 20;
	rejects(o, -EINVAL, "unknown bits");
	o = ok, o.backend = SSEG_BACKEND_CUDA, o.flags = SSEG_F_HOST_REGISTER;
	rejects(o, -EINVAL, "cuda-backend memory is pinned already");
	o = ok, o.device = -1;
	rejects(o, -EINVAL, "device=-1");
	o = ok, o.register_chunk = 4096;
	rejects(o, -EINVAL, "register_chunk=4096");
	o = ok, o.numa = SSEG_NUMA_NODE, o.numa_node = 64;
	rejects(o, -EINVAL, "numa_node=64");
	o = ok, o.backend = SSEG_BACKEND_CUDA;
	rejects(o, -EOPNOTSUPP, "backend cuda: not available: no CUDA driver");
	o = ok, o.timeout_ms = -5;
	rejects(o, -EINVAL, "timeout_ms=-5");
	o = ok, o.sz = 8;
	rejects(o, -EINVAL, "SSEG_OPTS");
}

/* A caller built against a newer, bigger struct: fine while the fields we
 * do not know are zero, refused when one is set. */
static void bigger_struct(void)
{
	struct {
		struct sseg_opts o;
		uint64_t newer_field;
	} big;
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;

	memset(&big, 0, sizeof(big));
	big.o = (struct sseg_opts){ .sz = sizeof(big), .name = "opts-big", .size = 4096,
				    .world_size = 1, .pages = SSEG_PAGES_BASE };
	CHECK_RC(sseg_create(&big.o, &seg, blob), 0);
	CHECK_RC(sseg_complete(seg, blob), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	big.newer_field = 1;
	CHECK_RC(sseg_create(&big.o, &seg, blob), -E2BIG);
	CHECK_ERR_HAS("newer sharedseg");
}

static void supported_and_probe(void)
{
	struct sseg_probe p = { .sz = sizeof(p) };

	CHECK_RC(sseg_check_support(SSEG_BACKEND_MEMFD, SSEG_PAGES_BASE), 0);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_AUTO, SSEG_PAGES_AUTO), 0);
	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("backend cuda: not available: no CUDA driver");
	CHECK_RC(sseg_check_support((enum sseg_backend)99, SSEG_PAGES_AUTO), -EINVAL);
	CHECK_ERR_HAS("backend=99 is not a backend");
	/* The 0.1 name gives the same answers. */
	CHECK_RC(sseg_supported(SSEG_BACKEND_MEMFD, SSEG_PAGES_BASE), 0);
	CHECK_RC(sseg_supported(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), -EOPNOTSUPP);
	CHECK_ERR_HAS("backend cuda: not available: no CUDA driver");
	CHECK_RC(sseg_probe(0, &p), 0);
	CHECK(p.sz == sizeof(p));
	CHECK(p.memfd_ok && p.sealing_ok && p.kernel[0]);
	CHECK(p.nnodes >= 1 && (p.node_mask & 1));
	CHECK(p.auto_size == 1ull << 30 && p.auto_reason[0]);
	CHECK(p.mem_available > 0);
}

/* Backends are listed one by one until -ENOENT; devices likewise. */
static void probe_backends(void)
{
	struct sseg_probe_backend f = { .sz = sizeof(f) };
	struct sseg_probe_device d = { .sz = sizeof(d) };
	int n = 0;

	for (int b = SSEG_BACKEND_MEMFD; !sseg_probe_backend((enum sseg_backend)b, &f); b++) {
		CHECK(f.sz == sizeof(f) && f.backend == (enum sseg_backend)b);
		CHECK(!strcmp(f.name, sseg_backend_name(f.backend)));
		CHECK(f.available == (b == SSEG_BACKEND_MEMFD));
		CHECK(f.reason[0]);
		n++;
	}
	CHECK(n == 3);
	CHECK_RC(sseg_probe_backend(SSEG_BACKEND_AUTO, &f), -ENOENT);
	CHECK_RC(sseg_probe_backend(SSEG_BACKEND_ASCEND, &f), 0);
	CHECK(strstr(f.reason, "not available"));
	CHECK_RC(sseg_probe_device(SSEG_BACKEND_MEMFD, 0, &d), -EOPNOTSUPP);
	CHECK_RC(sseg_probe_device(SSEG_BACKEND_CUDA, 0, &d), -EOPNOTSUPP);
	/* A struct from an older build: only its part is written. */
	f.sz = offsetof(struct sseg_probe_backend, driver);
	CHECK_RC(sseg_probe_backend(SSEG_BACKEND_MEMFD, &f), 0);
	CHECK(f.sz == offsetof(struct sseg_probe_backend, driver));
}

/* Host registration without a driver fails in create, saying why. */
static void register_without_driver(void)
{
	SSEG_OPTS(o, .name = "opts-reg", .size = 4096, .world_size = 1,
		  .flags = SSEG_F_HOST_REGISTER);

	rejects(o, -EOPNOTSUPP, "SSEG_F_HOST_REGISTER: needs a device driver that can pin host "
				"memory, and none is usable here (cuda: no CUDA driver");
}

int main(void)
{
	/* No driver, whatever this machine has: the answer is fixed at first use. */
	setenv("SHAREDSEG_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
	register_without_driver();
	bad_options();
	bigger_struct();
	supported_and_probe();
	probe_backends();
	printf("opts: ok\n");
	return 0;
}
