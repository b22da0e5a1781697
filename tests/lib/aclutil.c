/* SPDX-License-Identifier: Apache-2.0 */
#include "aclutil.h"
#include "testutil.h"

const char *ta_fake_path(void)
{
	return tu_build_file("libsseg_fake_acl.so");
}

void ta_fake_load(const char *config, struct ta_fake *fake)
{
	static const char *const names[] = {
		"fail", "configure", "calls", "live_handles", "live_reservations",
		"live_mappings", "live_registrations", "live_devices", "bugs",
		"registration", "trusted", "reset", "mapping", "init_config",
	};
	void *lib = tu_fake_open(ta_fake_path(), "SHAREDSEG_ACL_LIBRARY", "SSEG_FAKE_ACL", config,
				 SSEG_BACKEND_ASCEND);

	_Static_assert(sizeof(names) / sizeof(names[0]) * sizeof(void *) == sizeof(*fake),
		       "one name per control function");
	tu_fake_resolve(lib, "sseg_fake_acl_", names, (void **)fake,
			sizeof(names) / sizeof(names[0]));
}

int ta_fake_clean(const struct ta_fake *fake)
{
	const struct tu_held held = {
		fake->live_handles, fake->live_reservations, fake->live_mappings,
		fake->live_registrations, fake->live_devices, fake->bugs,
	};

	return tu_fake_idle("the fake ACL runtime", &held, "device reference(s)");
}
