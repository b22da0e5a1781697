/* SPDX-License-Identifier: Apache-2.0 */
/* What this machine cannot do answers -EOPNOTSUPP on every path that asks
 * the CUDA driver, as host registration always has: no driver at all, or
 * one without an entry point the library needs; sseg_check_support, create
 * with backend=cuda, sseg_probe_device and SSEG_F_HOST_REGISTER alike. A
 * driver that loads but brings up no device is -ENODEV. Each case in a
 * child: the driver is loaded once per process. */
#include <stdlib.h>
#include <string.h>

#include "runcases.h"
#include "testutil.h"

/* Every way in says errno err, with the driver's sentence. */
static void refused_everywhere(int err, const char *why)
{
	struct sseg_probe_device d = { .sz = sizeof(d) };
	unsigned char blob[SSEG_BLOB_SIZE];
	SSEG_OPTS(o, .name = "no-driver", .size = 4096, .world_size = 1,
		  .backend = SSEG_BACKEND_CUDA);
	sseg_t *seg = NULL;

	CHECK_RC(sseg_check_support(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO), err);
	CHECK_ERR_HAS(why);
	CHECK_RC(sseg_create(&o, &seg, blob), err);
	CHECK_ERR_HAS(why);
	CHECK_RC(sseg_probe_device(SSEG_BACKEND_CUDA, 0, &d), err);
	CHECK_ERR_HAS(why);
	o.backend = SSEG_BACKEND_MEMFD;
	o.flags = SSEG_F_HOST_REGISTER;
	o.device_backend = SSEG_BACKEND_CUDA;
	CHECK_RC(sseg_create(&o, &seg, blob), -EOPNOTSUPP);
	CHECK_ERR_HAS(why);
}

static int no_driver(void *arg)
{
	(void)arg;
	setenv("SHAREDSEG_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
	refused_everywhere(-EOPNOTSUPP, "no CUDA driver: /nonexistent/libcuda.so.1");
	return 0;
}

/* cuGetProcAddress finds nothing: the first required entry is missing. */
static int entry_missing(void *arg)
{
	(void)arg;
	setenv("SHAREDSEG_CUDA_LIBRARY", tu_build_file("libsseg_fake_cuda.so"), 1);
	setenv("SSEG_FAKE_CUDA_FAIL", "cuGetProcAddress:1-:CUDA_ERROR_NOT_FOUND", 1);
	refused_everywhere(-EOPNOTSUPP, "the CUDA driver lacks cuGetErrorName");
	return 0;
}

static int no_device(void *arg)
{
	(void)arg;
	setenv("SHAREDSEG_CUDA_LIBRARY", tu_build_file("libsseg_fake_cuda.so"), 1);
	setenv("SSEG_FAKE_CUDA", "devices=0", 1);
	refused_everywhere(-ENODEV, "cuInit failed: CUDA_ERROR_NO_DEVICE");
	return 0;
}

static const struct tu_case cases[] = {
	{ "no driver", no_driver, NULL, 0 },
	{ "an entry point missing", entry_missing, NULL, 0 },
	{ "no device", no_device, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	if (tu_run_cases(argc, argv, cases))
		return 1;
	printf("cuda_no_driver: ok\n");
	return 0;
}
