/* SPDX-License-Identifier: Apache-2.0 */
/* The shared library exports each renamed function under its new name in
 * the release that added it, and keeps the old name under the release that
 * had it: a program linked against 0.1 still loads and gets the same answer. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

typedef int (*count_fn)(void);
typedef int (*support_fn)(enum sseg_backend, enum sseg_pages);

static void *versioned(void *lib, const char *name, const char *version)
{
	void *sym = dlvsym(lib, name, version);

	if (!sym)
		fprintf(stderr, "%s@%s is not exported: %s\n", name, version, dlerror());
	return sym;
}

int main(void)
{
	const char *build = getenv("SSEG_BUILD_DIR");
	char path[4096];
	count_fn count_new, count_old;
	support_fn check_new, check_old;
	void *lib;

	if (!build) {
		fprintf(stderr, "SSEG_BUILD_DIR is not set (run through ctest)\n");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/libsharedseg.so.0", build);
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
		return 1;
	}
	count_new = (count_fn)versioned(lib, "sseg_pending_count", "SHAREDSEG_0.3");
	count_old = (count_fn)versioned(lib, "sseg_cleanup_pending", "SHAREDSEG_0.1");
	check_new = (support_fn)versioned(lib, "sseg_check_support", "SHAREDSEG_0.3");
	check_old = (support_fn)versioned(lib, "sseg_supported", "SHAREDSEG_0.1");
	CHECK(count_new && count_old && check_new && check_old);
	CHECK(count_new() == 0 && count_old() == 0);
	CHECK_RC(check_new(SSEG_BACKEND_MEMFD, SSEG_PAGES_BASE), 0);
	CHECK_RC(check_old(SSEG_BACKEND_MEMFD, SSEG_PAGES_BASE), 0);
	CHECK(check_new(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO) ==
	      check_old(SSEG_BACKEND_CUDA, SSEG_PAGES_AUTO));
	CHECK_RC(check_new((enum sseg_backend)99, SSEG_PAGES_AUTO), -EINVAL);
	CHECK_RC(check_old((enum sseg_backend)99, SSEG_PAGES_AUTO), -EINVAL);
	dlclose(lib);
	printf("symbol_versions: ok\n");
	return 0;
}
