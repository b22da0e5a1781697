/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the ascend paths: the fake ACL runtime loaded through the
 * library's real loading path (SHAREDSEG_ACL_LIBRARY), and its control API. */
#ifndef SSEG_ACLUTIL_H
#define SSEG_ACLUTIL_H

#include "fake/ascend/sseg_fake_acl.h"

struct ta_fake {
	__typeof__(sseg_fake_acl_fail) *fail;
	__typeof__(sseg_fake_acl_configure) *configure;
	__typeof__(sseg_fake_acl_calls) *calls;
	__typeof__(sseg_fake_acl_live_handles) *live_handles;
	__typeof__(sseg_fake_acl_live_reservations) *live_reservations;
	__typeof__(sseg_fake_acl_live_mappings) *live_mappings;
	__typeof__(sseg_fake_acl_live_registrations) *live_registrations;
	__typeof__(sseg_fake_acl_live_devices) *live_devices;
	__typeof__(sseg_fake_acl_bugs) *bugs;
	__typeof__(sseg_fake_acl_registration) *registration;
	__typeof__(sseg_fake_acl_trusted) *trusted;
	__typeof__(sseg_fake_acl_reset) *reset;
	__typeof__(sseg_fake_acl_mapping) *mapping;
	__typeof__(sseg_fake_acl_init_config) *init_config;
};

/* build/libsseg_fake_acl.so (SSEG_BUILD_DIR); exits 1 when unset. */
const char *ta_fake_path(void);
/* Points SHAREDSEG_ACL_LIBRARY at the fake with this configuration (before the
 * library's first use of ACL), loads it through sseg_check_support() and fills
 * the control table. Exits 1 when the fake cannot be loaded. */
void ta_fake_load(const char *config, struct ta_fake *fake);
/* Nothing held in the fake and no rule broken; else says what. */
int ta_fake_clean(const struct ta_fake *fake);

#endif
