/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration strings ("devices=2;fabric=1"), their lists and numbers. */
#ifndef SSEG_FAKEKIT_CONFIG_H
#define SSEG_FAKEKIT_CONFIG_H

#include <stddef.h>

/* Applies spec over the size bytes at config, key by key (each key
 * optional); on an error config is left as it was. 0, or -EINVAL (a pair
 * without '=' or a key set_key refuses) or -ENOMEM. */
int fk_config_apply(void *config, size_t size, const char *spec,
		    int (*set_key)(void *config, const char *key, const char *value));

/* Calls item on each non-empty piece of list between separators (sep:
 * the separator characters), stopping at the first that does not answer
 * 0: that answer, 0, or -ENOMEM. */
int fk_split(const char *list, const char *sep, int (*item)(void *ctx, char *text), void *ctx);

/* A whole number (decimal, 0x hex, 0 octal) from min to max: 0, or -EINVAL. */
int fk_parse_long(const char *text, long min, long max, long *value);
/* Any whole number an unsigned long long holds: 0, or -EINVAL. */
int fk_parse_ull(const char *text, unsigned long long *value);

/* A key whose value is an int field of the configuration, min to max. */
struct fk_int_key {
	const char *key;
	size_t offset;
	long min;
	long max;
};

#define FK_INT_KEY(type, field, min, max) { #field, offsetof(type, field), min, max }

/* Sets the field key names: 0, -EINVAL for a value out of its range, or
 * -ENOENT for a key not in keys. */
int fk_set_int_key(void *config, const struct fk_int_key *keys, size_t n, const char *key,
		   const char *text);

#endif
