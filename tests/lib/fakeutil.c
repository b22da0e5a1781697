/* SPDX-License-Identifier: Apache-2.0 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakeutil.h"
#include "testutil.h"

void tu_fake_load(const char *config, struct tu_fake *fake)
{
	static const char *const names[] = {
		"fail", "configure", "calls", "live_handles", "live_reservations",
		"live_mappings", "live_registrations", "live_contexts", "bugs",
		"registration", "granted", "reset",
	};
	const char *path = tu_build_file("libsseg_fake_cuda.so");
	void *lib = tu_fake_open(path, "SHAREDSEG_CUDA_LIBRARY", "SSEG_FAKE_CUDA", config,
				 SSEG_BACKEND_CUDA);
	int (*proc)(const char *, void **, int, unsigned long long);

	_Static_assert(sizeof(names) / sizeof(names[0]) * sizeof(void *) ==
			       offsetof(struct tu_fake, ctx_get_current),
		       "one name per control function");
	tu_fake_resolve(lib, "sseg_fake_cuda_", names, (void **)fake,
			sizeof(names) / sizeof(names[0]));
	*(void **)&proc = dlsym(lib, "cuGetProcAddress");
	if (!proc || proc("cuCtxGetCurrent", (void **)&fake->ctx_get_current, 4000, 0)) {
		fprintf(stderr, "the fake driver has no cuCtxGetCurrent\n");
		exit(1);
	}
}

int tu_fake_clean(const struct tu_fake *fake)
{
	const struct tu_held held = {
		fake->live_handles, fake->live_reservations, fake->live_mappings,
		fake->live_registrations, fake->live_contexts, fake->bugs,
	};

	return tu_fake_idle("the fake driver", &held, "context(s)");
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
