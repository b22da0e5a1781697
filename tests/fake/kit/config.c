/* SPDX-License-Identifier: Apache-2.0 */
/* The "key=value;key=value" syntax, comma lists and numbers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int fk_split(const char *list, const char *sep, int (*item)(void *ctx, char *text), void *ctx)
{
	char *copy = strdup(list), *save = NULL;
	int rc = copy ? 0 : -ENOMEM;

	for (char *text = copy ? strtok_r(copy, sep, &save) : NULL; text && rc == 0;
	     text = strtok_r(NULL, sep, &save))
		rc = item(ctx, text);
	free(copy);
	return rc;
}

struct apply {
	void *config;
	int (*set_key)(void *config, const char *key, const char *value);
};

static int apply_pair(void *ctx, char *pair)
{
	const struct apply *a = ctx;
	char *value = strchr(pair, '=');

	if (!value)
		return -EINVAL;
	*value++ = '\0';
	return a->set_key(a->config, pair, value);
}

int fk_config_apply(void *config, size_t size, const char *spec,
		    int (*set_key)(void *config, const char *key, const char *value))
{
	struct apply next = { malloc(size), set_key };
	int rc = next.config ? 0 : -ENOMEM;

	if (rc == 0) {
		memcpy(next.config, config, size);
		rc = fk_split(spec, ";", apply_pair, &next);
	}
	if (rc == 0)
		memcpy(config, next.config, size);
	free(next.config);
	return rc;
}

int fk_parse_long(const char *text, long min, long max, long *value)
{
	char *end;

	errno = 0;
	*value = strtol(text, &end, 0);
	return end == text || *end || errno || *value < min || *value > max ? -EINVAL : 0;
}

int fk_parse_ull(const char *text, unsigned long long *value)
{
	char *end;

	errno = 0;
	*value = strtoull(text, &end, 0);
	return end == text || *end || errno ? -EINVAL : 0;
}

int fk_set_int_key(void *config, const struct fk_int_key *keys, size_t n, const char *key,
		   const char *text)
{
	long v;

	for (size_t i = 0; i < n; i++) {
		if (strcmp(keys[i].key, key) != 0)
			continue;
		if (fk_parse_long(text, keys[i].min, keys[i].max, &v) < 0)
			return -EINVAL;
		*(int *)((char *)config + keys[i].offset) = (int)v;
		return 0;
	}
	return -ENOENT;
}
