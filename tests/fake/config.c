/* The configuration string (SSEG_FAKE_CUDA) and the driver's error names. */
#include <errno.h>
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
	{ FAKE_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT" },
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

static int set_flag(int *flag, unsigned long long value)
{
	return set_int(flag, value, 0, 1);
}

static int set_key(struct fake_config *cfg, const char *key, const char *text)
{
	unsigned long long v;

	if (strcmp(key, "numa") == 0)
		return parse_numa(cfg, text);
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
	if (strcmp(key, "vmm") == 0)
		return set_flag(&cfg->vmm, v);
	if (strcmp(key, "fabric") == 0)
		return set_flag(&cfg->fabric, v);
	if (strcmp(key, "fabric_works") == 0)
		return set_flag(&cfg->fabric_works, v);
	if (strcmp(key, "host_numa_vmm") == 0)
		return set_flag(&cfg->host_numa_vmm, v);
	if (strcmp(key, "posix_fd") == 0)
		return set_flag(&cfg->posix_fd, v);
	if (strcmp(key, "need_ctx") == 0)
		return set_flag(&cfg->need_ctx, v);
	return -EINVAL;
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

int fake_aligned(uintptr_t value, size_t align)
{
	return value % align == 0;
}
