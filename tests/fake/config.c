/* The configuration string (SSEG_FAKE_CUDA) and the driver's error names. */
#include <errno.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

static const struct {
	CUresult code;
	const char *name;
} error_names[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED" },
	{ CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE" },
	{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE" },
	{ CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT" },
	{ CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED" },
	{ CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM" },
	{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE" },
	{ CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND" },
	{ CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED" },
	{ CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED" },
	{ CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED" },
	{ CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED" },
	{ CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN" },
};

const char *fake_error_name(CUresult err)
{
	for (size_t i = 0; i < sizeof(error_names) / sizeof(error_names[0]); i++)
		if (error_names[i].code == err)
			return error_names[i].name;
	return NULL;
}

/* A name from the table or any decimal number. */
int fake_error_by_name(const char *text, CUresult *err)
{
	char *end;
	long code;

	for (size_t i = 0; i < sizeof(error_names) / sizeof(error_names[0]); i++) {
		if (strcmp(error_names[i].name, text) == 0) {
			*err = error_names[i].code;
			return 0;
		}
	}
	code = strtol(text, &end, 10);
	if (end == text || *end || code <= 0)
		return -EINVAL;
	*err = (CUresult)code;
	return 0;
}

static int parse_number(const char *text, unsigned long long *value)
{
	char *end;

	errno = 0;
	*value = strtoull(text, &end, 0);
	return end == text || *end || errno ? -EINVAL : 0;
}

static int parse_numa(struct fake_config *cfg, const char *list)
{
	char *copy = strdup(list), *save = NULL;
	int n = 0, rc = copy && *list ? 0 : -EINVAL;

	for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && rc == 0;
	     item = strtok_r(NULL, ",", &save)) {
		unsigned long long node;

		rc = parse_number(item, &node);
		if (rc == 0 && (n == FAKE_MAX_NUMA || node > 1023))
			rc = -EINVAL;
		if (rc == 0)
			cfg->numa[n++] = (int)node;
	}
	free(copy);
	if (rc == 0)
		cfg->numa_count = n;
	return rc;
}

static int set_int(int *field, unsigned long long value, int min, int max)
{
	if (value < (unsigned long long)min || value > (unsigned long long)max)
		return -EINVAL;
	*field = (int)value;
	return 0;
}

/* The on/off keys. */
static const struct {
	const char *key;
	size_t offset;
} flag_keys[] = {
#define FLAG(name) { #name, offsetof(struct fake_config, name) }
	FLAG(vmm),          FLAG(fabric),        FLAG(imex_channel),     FLAG(imex),
	FLAG(host_numa_vmm), FLAG(host_numa_blocked), FLAG(posix_fd),     FLAG(need_ctx),
	FLAG(vmm_ctx),      FLAG(host_register), FLAG(ro_register),      FLAG(register_aligned),
	FLAG(uva),          FLAG(map_offset),    FLAG(fork_works),       FLAG(host_pointer),
	FLAG(pageable_host_pt),
#undef FLAG
};

static int set_flag(struct fake_config *cfg, const char *key, unsigned long long v)
{
	for (size_t i = 0; i < sizeof(flag_keys) / sizeof(flag_keys[0]); i++)
		if (strcmp(key, flag_keys[i].key) == 0)
			return set_int((int *)((char *)cfg + flag_keys[i].offset), v, 0, 1);
	/* The older key: creating, exporting and importing all work, or
	 * none of it (no IMEX channel at all). */
	if (strcmp(key, "fabric_works") == 0 && v <= 1) {
		cfg->imex_channel = cfg->imex = (int)v;
		return 0;
	}
	return -EINVAL;
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

/* "0-1,2-3": pairs of devices, both ways, or "all" or "none". peer= lists
 * the pairs with access (no others), nopeer= removes pairs from the
 * current matrix. */
static int parse_peers(struct fake_config *cfg, const char *list, int on)
{
	char *copy = strdup(list), *save = NULL;
	int rc = copy && *list ? 0 : -EINVAL;

	if (rc == 0 && (!strcmp(list, "all") || !strcmp(list, "none"))) {
		int full = (strcmp(list, "all") == 0) == on; /* peer=all or nopeer=none */

		memset(cfg->peer, full ? 0xff : 0, sizeof(cfg->peer));
		free(copy);
		return 0;
	}
	if (rc == 0 && on)
		memset(cfg->peer, 0, sizeof(cfg->peer));
	for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && rc == 0;
	     item = strtok_r(NULL, ",", &save)) {
		int a, b, n = 0;

		if (sscanf(item, "%d-%d%n", &a, &b, &n) != 2 || item[n] || a < 0 || b < 0 ||
		    a >= FAKE_MAX_DEVICES || b >= FAKE_MAX_DEVICES)
			rc = -EINVAL;
		else
			set_peers(cfg, a, b, on);
	}
	free(copy);
	return rc;
}

static int set_key(struct fake_config *cfg, const char *key, const char *text)
{
	unsigned long long v;

	if (strcmp(key, "numa") == 0)
		return parse_numa(cfg, text);
	if (strcmp(key, "peer") == 0 || strcmp(key, "nopeer") == 0)
		return parse_peers(cfg, text, key[0] == 'p');
	if (parse_number(text, &v) < 0)
		return -EINVAL;
	if (strcmp(key, "devices") == 0)
		return set_int(&cfg->devices, v, 0, FAKE_MAX_DEVICES);
	if (strcmp(key, "driver") == 0)
		return set_int(&cfg->driver, v, 1, 999999);
	/* Any multiple of 4 KiB: tests need a driver that answers a granularity
	 * which is not a power of two. */
	if (strcmp(key, "granularity") == 0 && v >= 4096 && v % 4096 == 0) {
		cfg->granularity = v;
		return 0;
	}
	if (strcmp(key, "max_register") == 0 && v > 0) {
		cfg->max_register = v;
		return 0;
	}
	return set_flag(cfg, key, v);
}

/* "devices=2;numa=0,1;fabric=1": each key optional, applied over cfg; on
 * an error cfg is left as it was. */
int fake_parse_config(struct fake_config *cfg, const char *spec)
{
	struct fake_config next = *cfg;
	char *copy = strdup(spec), *save = NULL;
	int rc = copy ? 0 : -ENOMEM;

	for (char *item = copy ? strtok_r(copy, ";", &save) : NULL; item && rc == 0;
	     item = strtok_r(NULL, ";", &save)) {
		char *value = strchr(item, '=');

		if (!value) {
			rc = -EINVAL;
			break;
		}
		*value++ = '\0';
		rc = set_key(&next, item, value);
	}
	free(copy);
	if (rc == 0)
		*cfg = next;
	return rc;
}

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

int fake_aligned(uintptr_t value, size_t align)
{
	return value % align == 0;
}
