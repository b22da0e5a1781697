/* The configuration string (SSEG_FAKE_ACL), the failure script
 * (SSEG_FAKE_ACL_FAIL) and the names they use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_acl.h"

static const char *const entry_names[] = {
#define FAKE_NAME(name, before_init) #name,
	FAKE_ACL_ENTRIES(FAKE_NAME)
#undef FAKE_NAME
};

static const struct {
	aclError code;
	const char *name;
} error_names[] = {
#define FAKE_ERROR(name, value) { name, #name },
	SSEG_ACL_ERRORS(FAKE_ERROR)
#undef FAKE_ERROR
};

int fake_entry_by_name(const char *name)
{
	for (int i = 0; i < FE_COUNT; i++)
		if (strcmp(entry_names[i], name) == 0)
			return i;
	return -1;
}

/* A name from the table or any positive decimal number. */
static int error_by_name(const char *text, aclError *err)
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
	if (end == text || *end || code <= 0 || code > 999999)
		return -EINVAL;
	*err = (aclError)code;
	return 0;
}

/* "aclrtMapMem:2:ACL_ERROR_RT_MEMORY_ALLOCATION": the 2nd call; "1-": the
 * 1st call on; "2-4": calls 2 to 4. */
static int parse_rule(char *text)
{
	char *save = NULL, *entry = strtok_r(text, ":", &save);
	char *calls = strtok_r(NULL, ":", &save), *error = strtok_r(NULL, ":", &save);
	char *end;
	long from, until;
	aclError err;

	if (!entry || !calls || !error || strtok_r(NULL, ":", &save) || error_by_name(error, &err))
		return -EINVAL;
	from = strtol(calls, &end, 10);
	until = from;
	if (end[0] == '-' && end[1] == '\0') {
		until = -1;
		end++;
	} else if (end[0] == '-') {
		until = strtol(end + 1, &end, 10);
	}
	if (end == calls || *end || (until >= 0 && until < from))
		return -EINVAL;
	return fake_add_rule(fake_entry_by_name(entry), from, until, err);
}

int fake_parse_failures(const char *spec)
{
	char *copy = strdup(spec), *save = NULL;
	int rc = copy ? 0 : -ENOMEM;

	for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && rc == 0;
	     item = strtok_r(NULL, ",", &save))
		rc = parse_rule(item);
	free(copy);
	return rc;
}

static int parse_long(const char *text, long min, long max, long *value)
{
	char *end;

	errno = 0;
	*value = strtol(text, &end, 0);
	return end == text || *end || errno || *value < min || *value > max ? -EINVAL : 0;
}

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

static int set_key(struct fake_config *cfg, const char *key, const char *text)
{
	long v;

	if (strcmp(key, "version") == 0)
		return parse_version(text, cfg->version);
	if (strcmp(key, "granularity") == 0) {
		/* A power of two from 4 KiB: the runtime's granularity is a page size. */
		if (parse_long(text, 4096, 1l << 30, &v) || (v & (v - 1)))
			return -EINVAL;
		cfg->granularity = (size_t)v;
		return 0;
	}
	if (strcmp(key, "bare_tgid_offset") == 0) {
		if (parse_long(text, 0, 1 << 20, &v))
			return -EINVAL;
		cfg->bare_tgid_offset = (int)v;
		return 0;
	}
	if (strcmp(key, "devices") == 0) {
		if (parse_long(text, 0, FAKE_MAX_DEVICES, &v))
			return -EINVAL;
		cfg->devices = (int)v;
		return 0;
	}
	if (parse_long(text, 0, 1, &v))
		return -EINVAL;
	if (strcmp(key, "fabric") == 0)
		cfg->fabric = (int)v;
	else if (strcmp(key, "host_register") == 0)
		cfg->host_register = (int)v;
	else if (strcmp(key, "need_ctx") == 0)
		cfg->need_ctx = (int)v;
	else
		return -EINVAL;
	return 0;
}

/* "devices=2;fabric=1": each key optional, applied over cfg; on an error
 * cfg is left as it was. */
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

/* A configuration or failure script with a typo must not pass silently. */
static void die(const char *what, const char *text)
{
	fprintf(stderr, "fake acl: cannot use %s \"%s\"\n", what, text);
	abort();
}

void fake_load_env(void)
{
	const char *config = getenv("SSEG_FAKE_ACL");
	const char *failures = getenv("SSEG_FAKE_ACL_FAIL");

	fake.cfg = (struct fake_config){ .devices = 1, .version = { 1, 0, 0 },
					 .granularity = 2u << 20, .host_register = 1,
					 .need_ctx = 1 };
	fake.handle_seq = 0xac10000;
	if (config && fake_parse_config(&fake.cfg, config) < 0)
		die("SSEG_FAKE_ACL", config);
	if (failures && fake_parse_failures(failures) < 0)
		die("SSEG_FAKE_ACL_FAIL", failures);
}
