#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakeutil.h"
#include "testutil.h"

#define SYM(field, name)                                                      \
	do {                                                                  \
		*(void **)&fake->field = dlsym(lib, name);                    \
		if (!fake->field) {                                           \
			fprintf(stderr, "the fake driver lacks %s\n", name);  \
			exit(1);                                              \
		}                                                             \
	} while (0)

void tu_fake_load(const char *config, struct tu_fake *fake)
{
	const char *build = getenv("SSEG_BUILD_DIR");
	char path[512];
	void *lib;

	if (!build) {
		fprintf(stderr, "SSEG_BUILD_DIR is not set (run through ctest)\n");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/libsseg_fake_cuda.so", build);
	setenv("SSEG_CUDA_LIBRARY", path, 1);
	setenv("SSEG_FAKE_CUDA", config, 1);
	if (sseg_supported(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO)) {
		fprintf(stderr, "the cuda backend does not load the fake: %s\n", sseg_last_error());
		exit(1);
	}
	lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!lib) {
		fprintf(stderr, "%s is not the library that was loaded: %s\n", path, dlerror());
		exit(1);
	}
	SYM(fail, "sseg_fake_cuda_fail");
	SYM(configure, "sseg_fake_cuda_configure");
	SYM(calls, "sseg_fake_cuda_calls");
	SYM(live_handles, "sseg_fake_cuda_live_handles");
	SYM(live_reservations, "sseg_fake_cuda_live_reservations");
	SYM(live_mappings, "sseg_fake_cuda_live_mappings");
	SYM(live_registrations, "sseg_fake_cuda_live_registrations");
	SYM(live_contexts, "sseg_fake_cuda_live_contexts");
	SYM(bugs, "sseg_fake_cuda_bugs");
	SYM(registration, "sseg_fake_cuda_registration");
	SYM(granted, "sseg_fake_cuda_granted");
	SYM(reset, "sseg_fake_cuda_reset");
	{
		int (*proc)(const char *, void **, int, unsigned long long) =
			(int (*)(const char *, void **, int, unsigned long long))dlsym(
				lib, "cuGetProcAddress");

		if (!proc || proc("cuCtxGetCurrent", (void **)&fake->ctx_get_current, 4000, 0)) {
			fprintf(stderr, "the fake driver has no cuCtxGetCurrent\n");
			exit(1);
		}
	}
}

int tu_fake_clean(const struct tu_fake *fake)
{
	int handles = fake->live_handles(), reservations = fake->live_reservations();
	int mappings = fake->live_mappings(), registrations = fake->live_registrations();
	int contexts = fake->live_contexts(), bugs = fake->bugs();

	if (!handles && !reservations && !mappings && !registrations && !contexts && !bugs)
		return 1;
	fprintf(stderr,
		"the fake driver still holds %d handle(s), %d reservation(s), %d mapping(s), "
		"%d registration(s), %d context(s); %d rule(s) broken\n",
		handles, reservations, mappings, registrations, contexts, bugs);
	return 0;
}

int tu_solo(const struct sseg_opts *opts, struct sseg_info *info)
{
	unsigned char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;
	int rc;

	rc = sseg_create(opts, &seg, blob);
	if (rc)
		return rc;
	CHECK_RC(sseg_complete(seg, blob), 0);
	info->sz = sizeof(*info);
	CHECK_RC(sseg_info(seg, info), 0);
	CHECK_RC(sseg_destroy(seg), 0);
	return 0;
}
