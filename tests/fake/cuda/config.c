/* SPDX-License-Identifier: Apache-2.0 */
/* What the fake tells the toolkit (fk_driver): its configuration string
 * (SSEG_FAKE_CUDA) and defaults, its entry point and error names; and the
 * configuration's questions (devices, NUMA nodes, peers, VMM). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake/kit/config.h"

static const char *const entry_names[] = {
#define FAKE_NAME(name, version, init) #name,
	FAKE_ENTRIES(FAKE_NAME)
#undef FAKE_NAME
};

static const struct fk_error error_names[] = {
#define FAKE_ERROR(name) { name, #name }
	FAKE_ERROR(CUDA_SUCCESS),
	FAKE_ERROR(CUDA_ERROR_INVALID_VALUE),
	FAKE_ERROR(CUDA_ERROR_OUT_OF_MEMORY),
	FAKE_ERROR(CUDA_ERROR_NOT_INITIALIZED),
	FAKE_ERROR(CUDA_ERROR_NO_DEVICE),
	FAKE_ERROR(CUDA_ERROR_INVALID_DEVICE),
	FAKE_ERROR(CUDA_ERROR_INVALID_CONTEXT),
	FAKE_ERROR(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED),
	FAKE_ERROR(CUDA_ERROR_OPERATING_SYSTEM),
	FAKE_ERROR(CUDA_ERROR_INVALID_HANDLE),
	FAKE_ERROR(CUDA_ERROR_NOT_FOUND),
	FAKE_ERROR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED),
	FAKE_ERROR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED),
	FAKE_ERROR(CUDA_ERROR_NOT_PERMITTED),
	FAKE_ERROR(CUDA_ERROR_NOT_SUPPORTED),
	FAKE_ERROR(CUDA_ERROR_UNKNOWN),
#undef FAKE_ERROR
};

/* The defaults: every rule the real driver enforces is on. */
static void start(void)
{
	struct fake_config *cfg = &fake.cfg;

	memset(cfg, 0, sizeof(*cfg));
	cfg->devices = 1;
	cfg->numa_count = 1;
	cfg->vmm = 1;
	cfg->imex_channel = 1;
	cfg->host_numa_vmm = 1;
	cfg->posix_fd = 1;
	cfg->need_ctx = 1;
	cfg->vmm_ctx = 1;
	memset(cfg->peer, 0xff, sizeof(cfg->peer));
	cfg->host_register = 1;
	cfg->ro_register = 1;
	cfg->uva = 1;
	cfg->host_pointer = 1;
	cfg->granularity = 2u << 20;
	cfg->driver = 13000;
	cfg->max_register = (512ull << 30) - 1;
	fake.handle_seq = 0xca5e000000000000ull;
}

struct numa_list {
	struct fake_config *cfg;
	int n;
};

static int add_node(void *ctx, char *item)
{
	struct numa_list *list = ctx;
	long node;

	if (fk_parse_long(item, 0, 1023, &node) < 0 || list->n == FAKE_MAX_NUMA)
		return -EINVAL;
	list->cfg->numa[list->n++] = (int)node;
	return 0;
}

static int parse_numa(struct fake_config *cfg, const char *text)
{
	struct numa_list list = { cfg, 0 };
	int rc = *text ? fk_split(text, ",", add_node, &list) : -EINVAL;

	if (rc == 0)
		cfg->numa_count = list.n;
	return rc;
}

static void set_peers(struct fake_config *cfg, int a, int b, int on)
{
	if (on) {
		cfg->peer[a] |= 1u << b;
		cfg->peer[b] |= 1u << a;
	} else {
		cfg->peer[a] &= ~(1u << b);
		cfg->peer[b] &= ~(1u << a);
	}
}

struct peer_list {
	struct fake_config *cfg;
	int on;
};

static int add_pair(void *ctx, char *item)
{
	const struct peer_list *list = ctx;
	int a, b, n = 0;

	if (sscanf(item, "%d-%d%n", &a, &b, &n) != 2 || item[n] || a < 0 || b < 0 ||
	    a >= FAKE_MAX_DEVICES || b >= FAKE_MAX_DEVICES)
		return -EINVAL;
	set_peers(list->cfg, a, b, list->on);
	return 0;
}

/* "0-1,2-3": pairs of devices, both ways, or "all" or "none". peer= lists
 * the pairs with access (no others), nopeer= removes pairs from the
 * current matrix. */
static int parse_peers(struct fake_config *cfg, const char *text, int on)
{
	struct peer_list list = { cfg, on };

	if (!*text)
		return -EINVAL;
	if (!strcmp(text, "all") || !strcmp(text, "none")) {
		int full = (strcmp(text, "all") == 0) == on; /* peer=all or nopeer=none */

		memset(cfg->peer, full ? 0xff : 0, sizeof(cfg->peer));
		return 0;
	}
	if (on)
		memset(cfg->peer, 0, sizeof(cfg->peer));
	return fk_split(text, ",", add_pair, &list);
}

static int add_no_vmm(void *ctx, char *item)
{
	struct fake_config *cfg = ctx;
	long dev;

	if (fk_parse_long(item, 0, FAKE_MAX_DEVICES - 1, &dev) < 0)
		return -EINVAL;
	cfg->no_vmm |= 1u << dev;
	return 0;
}

/* "2,3": the devices without VMM (an older GPU beside newer ones), or
 * "none". */
static int parse_no_vmm(struct fake_config *cfg, const char *text)
{
	cfg->no_vmm = 0;
	if (!strcmp(text, "none"))
		return 0;
	return *text ? fk_split(text, ",", add_no_vmm, cfg) : -EINVAL;
}

/* The keys whose value is a number in a range: the on/off ones, the
 * device count and the driver version. */
static const struct fk_int_key int_keys[] = {
#define FLAG(name) FK_INT_KEY(struct fake_config, name, 0, 1)
	FLAG(vmm),          FLAG(fabric),        FLAG(imex_channel),     FLAG(imex),
	FLAG(host_numa_vmm), FLAG(host_numa_blocked), FLAG(posix_fd),     FLAG(need_ctx),
	FLAG(vmm_ctx),      FLAG(host_register), FLAG(ro_register),      FLAG(register_aligned),
	FLAG(uva),          FLAG(map_offset),    FLAG(fork_works),       FLAG(host_pointer),
	FLAG(pageable_host_pt),
#undef FLAG
	FK_INT_KEY(struct fake_config, devices, 0, FAKE_MAX_DEVICES),
	FK_INT_KEY(struct fake_config, driver, 1, 999999),
};

static int set_size(size_t *field, const char *text, unsigned long long min,
		    unsigned long long multiple)
{
	unsigned long long v;

	if (fk_parse_ull(text, &v) < 0 || v < min || v % multiple)
		return -EINVAL;
	*field = v;
	return 0;
}

static int set_key(void *config, const char *key, const char *text)
{
	struct fake_config *cfg = config;
	long v;

	if (strcmp(key, "numa") == 0)
		return parse_numa(cfg, text);
	if (strcmp(key, "peer") == 0 || strcmp(key, "nopeer") == 0)
		return parse_peers(cfg, text, key[0] == 'p');
	if (strcmp(key, "novmm") == 0)
		return parse_no_vmm(cfg, text);
	/* Any multiple of 4 KiB: tests need a driver that answers a granularity
	 * which is not a power of two. */
	if (strcmp(key, "granularity") == 0)
		return set_size(&cfg->granularity, text, 4096, 4096);
	if (strcmp(key, "max_register") == 0)
		return set_size(&cfg->max_register, text, 1, 1);
	/* The older key: creating, exporting and importing all work, or
	 * none of it (no IMEX channel at all). */
	if (strcmp(key, "fabric_works") == 0) {
		if (fk_parse_long(text, 0, 1, &v) < 0)
			return -EINVAL;
		cfg->imex_channel = cfg->imex = (int)v;
		return 0;
	}
	return fk_set_int_key(cfg, int_keys, sizeof(int_keys) / sizeof(int_keys[0]), key, text)
		       ? -EINVAL
		       : 0;
}

/* sseg_fake_cuda_reset also forgets which devices the last
 * cuMemSetAccess granted. */
static void reset_access(void)
{
	memset(fake.access, 0, sizeof(fake.access));
}

const struct fk_driver fk_driver = {
	.name = "fake cuda",
	FK_DRIVER_ENV("SSEG_FAKE_CUDA"),
	FK_DRIVER_ENTRIES(entry_names),
	FK_DRIVER_ERRORS(error_names),
	.max_error = LONG_MAX,
	FK_DRIVER_CONFIG(fake.cfg),
	.set_key = set_key,
	.start = start,
	.reset = reset_access,
};

int fake_device_valid(int dev)
{
	return dev >= 0 && dev < fake.cfg.devices;
}

int fake_numa_valid(int node)
{
	for (int i = 0; i < fake.cfg.numa_count; i++)
		if (fake.cfg.numa[i] == node)
			return 1;
	return 0;
}

int fake_peer_access(int dev, int owner)
{
	return owner < 0 || dev == owner || (fake.cfg.peer[dev] >> owner) & 1;
}

int fake_device_vmm(int dev)
{
	return fake.cfg.vmm && !((fake.cfg.no_vmm >> dev) & 1);
}

int fake_aligned(uintptr_t value, size_t align)
{
	return value % align == 0;
}
