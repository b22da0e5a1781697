#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "aclutil.h"
#include "testutil.h"

const char *ta_fake_path(void)
{
	static char path[512];
	const char *build = getenv("SSEG_BUILD_DIR");

	if (!build) {
		fprintf(stderr, "SSEG_BUILD_DIR is not set (run through ctest)\n");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/libsseg_fake_acl.so", build);
	return path;
}

/* Each control function, by name, into its slot of struct ta_fake. */
static void resolve(void *lib, struct ta_fake *fake)
{
	static const char *const names[] = {
		"sseg_fake_acl_fail", "sseg_fake_acl_configure", "sseg_fake_acl_calls",
		"sseg_fake_acl_live_handles", "sseg_fake_acl_live_reservations",
		"sseg_fake_acl_live_mappings", "sseg_fake_acl_live_registrations",
		"sseg_fake_acl_live_devices", "sseg_fake_acl_bugs", "sseg_fake_acl_registration",
		"sseg_fake_acl_trusted", "sseg_fake_acl_reset",
	};
	void **slot = (void **)fake;

	_Static_assert(sizeof(names) / sizeof(names[0]) * sizeof(void *) == sizeof(*fake),
		       "one name per control function");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		slot[i] = dlsym(lib, names[i]);
		if (!slot[i]) {
			fprintf(stderr, "the fake ACL runtime lacks %s\n", names[i]);
			exit(1);
		}
	}
}

void ta_fake_load(const char *config, struct ta_fake *fake)
{
	const char *path = ta_fake_path();
	void *lib;

	setenv("SSEG_ACL_LIBRARY", path, 1);
	setenv("SSEG_FAKE_ACL", config, 1);
	if (sseg_supported(SSEG_BACKEND_ASCEND, SSEG_PAGES_AUTO)) {
		fprintf(stderr, "the ascend backend does not load the fake: %s\n", sseg_last_error());
		exit(1);
	}
	lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!lib) {
		fprintf(stderr, "%s is not the library that was loaded: %s\n", path, dlerror());
		exit(1);
	}
	resolve(lib, fake);
}

int ta_fake_clean(const struct ta_fake *fake)
{
	int handles = fake->live_handles(), reservations = fake->live_reservations();
	int mappings = fake->live_mappings(), registrations = fake->live_registrations();
	int devices = fake->live_devices(), bugs = fake->bugs();

	if (!handles && !reservations && !mappings && !registrations && !devices && !bugs)
		return 1;
	fprintf(stderr,
		"the fake ACL runtime still holds %d handle(s), %d reservation(s), %d mapping(s), "
		"%d registration(s), %d device reference(s); %d rule(s) broken\n",
		handles, reservations, mappings, registrations, devices, bugs);
	return 0;
}
