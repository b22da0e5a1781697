/* SPDX-License-Identifier: Apache-2.0 */
/* What the fake tells the toolkit (fk_driver): its configuration string
 * (SSEG_FAKE_ACL) and defaults, its entry point and error names. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_acl.h"
#include "fake/kit/config.h"

static const char *const entry_names[] = {
#define FAKE_NAME(name, before_init) #name,
	FAKE_ACL_ENTRIES(FAKE_NAME)
#undef FAKE_NAME
};

static const struct fk_error error_names[] = {
#define FAKE_ERROR(name, value) { name, #name },
	SSEG_ACL_ERRORS(FAKE_ERROR)
#undef FAKE_ERROR
};

static int parse_version(const char *text, int version[3])
{
	int major, minor, patch, n = 0;

	if (sscanf(text, "%d.%d.%d%n", &major, &minor, &patch, &n) != 3 || text[n] ||
	    major < 0 || minor < 0 || patch < 0 || major > 999 || minor > 999 || patch > 999)
		return -EINVAL;
	version[0] = major;
	version[1] = minor;
	version[2] = patch;
	return 0;
}

/* 0 or 1, or the step that refuses 1 GiB pages: map, access, export. */
static int parse_huge1g(const char *text, int *huge1g)
{
	static const char *const steps[] = {
		[FAKE_HUGE1G_MALLOC] = "0", [FAKE_HUGE1G_WORKS] = "1",
		[FAKE_HUGE1G_MAP] = "map", [FAKE_HUGE1G_ACCESS] = "access",
		[FAKE_HUGE1G_EXPORT] = "export",
	};

	for (int i = 0; i < (int)(sizeof(steps) / sizeof(steps[0])); i++)
		if (strcmp(text, steps[i]) == 0) {
			*huge1g = i;
			return 0;
		}
	return -EINVAL;
}

static const struct fk_int_key int_keys[] = {
	FK_INT_KEY(struct fake_config, devices, 0, FAKE_MAX_DEVICES),
	FK_INT_KEY(struct fake_config, bare_tgid_offset, 0, 1 << 20),
	FK_INT_KEY(struct fake_config, fabric, 0, 1),
	FK_INT_KEY(struct fake_config, host_register, 0, 1),
	FK_INT_KEY(struct fake_config, need_ctx, 0, 1),
	FK_INT_KEY(struct fake_config, need_init, 0, 1),
	FK_INT_KEY(struct fake_config, hccs, 0, 1),
	FK_INT_KEY(struct fake_config, host_numa, 0, 1),
	FK_INT_KEY(struct fake_config, v1_host_import, 0, 1),
	FK_INT_KEY(struct fake_config, fork_works, 0, 1),
};

static int set_key(void *config, const char *key, const char *text)
{
	struct fake_config *cfg = config;
	long v;

	if (strcmp(key, "version") == 0)
		return parse_version(text, cfg->version);
	if (strcmp(key, "huge1g") == 0)
		return parse_huge1g(text, &cfg->huge1g);
	if (strcmp(key, "granularity") == 0) {
		/* A power of two from 4 KiB: the runtime's granularity is a page size. */
		if (fk_parse_long(text, 4096, 1l << 30, &v) || (v & (v - 1)))
			return -EINVAL;
		cfg->granularity = (size_t)v;
		return 0;
	}
	return fk_set_int_key(cfg, int_keys, sizeof(int_keys) / sizeof(int_keys[0]), key, text)
		       ? -EINVAL
		       : 0;
}

/* ASCEND_RT_VISIBLE_DEVICES, as the runtime reads it: the user's ordinal
 * i is logical device visible[i]; unset, every device in order. */
static void read_visible(void)
{
	const char *env = getenv("ASCEND_RT_VISIBLE_DEVICES");
	char *end;
	long id;

	fake.nvisible = 0;
	while (env && *env && fake.nvisible < FAKE_MAX_DEVICES) {
		id = strtol(env, &end, 10);
		if (end == env || id < 0 || id >= FAKE_MAX_DEVICES)
			fk_die("ASCEND_RT_VISIBLE_DEVICES", env);
		fake.visible[fake.nvisible++] = (int)id;
		env = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			fk_die("ASCEND_RT_VISIBLE_DEVICES", end);
	}
	if (!env)
		fake.nvisible = -1; /* every device */
}

/* One device, version 1.0.0, 2 MiB granularity, no fabric handles (as on
 * A2), host registration supported, the runtime's pid getpid(), a context
 * and aclInit needed, devices on HCCS, HOST_NUMA allocations, the V1
 * import of host memory failing as the current runtime's does, no 1 GiB
 * host pages, no runtime in a forked child. */
static void start(void)
{
	fake.cfg = (struct fake_config){ .devices = 1, .version = { 1, 0, 0 },
					 .granularity = 2u << 20, .host_register = 1,
					 .need_ctx = 1, .need_init = 1, .hccs = 1,
					 .host_numa = 1 };
	fake.handle_seq = 0xac10000;
	fake.pid = getpid();
	read_visible();
}

const struct fk_driver fk_driver = {
	.name = "fake acl",
	FK_DRIVER_ENV("SSEG_FAKE_ACL"),
	FK_DRIVER_ENTRIES(entry_names),
	FK_DRIVER_ERRORS(error_names),
	.max_error = 999999,
	FK_DRIVER_CONFIG(fake.cfg),
	.set_key = set_key,
	.start = start,
};
