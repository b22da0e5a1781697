/* SPDX-License-Identifier: Apache-2.0 */
/* What a caller leaves to the operator, resolved once for the C tool, the
 * Python package and C callers: the environment's defaults for a segment's
 * settings, and the time its population may take. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const struct {
	const char *setting, *variable, *fallback;
} defaults[] = {
	{ "pages", "SHAREDSEG_PAGES", "auto" },
	{ "numa", "SHAREDSEG_NUMA", "none" },
	{ "populate", "SHAREDSEG_POPULATE", "owner" },
};

int sseg_setting_default(const char *setting, char *buf, size_t len, const char **source)
{
	sseg_err_clear();
	if (!setting || !buf || !len || !source)
		return sseg_err(-EINVAL, "sseg_setting_default: NULL argument");
	for (size_t i = 0; i < ARRAY_SIZE(defaults); i++) {
		const char *text = getenv(defaults[i].variable);
		size_t n;

		if (strcmp(setting, defaults[i].setting))
			continue;
		while (text && isspace((unsigned char)*text))
			text++;
		n = text ? strlen(text) : 0;
		while (n && isspace((unsigned char)text[n - 1]))
			n--;
		*source = n ? defaults[i].variable : "default";
		if (!n) {
			text = defaults[i].fallback;
			n = strlen(text);
		}
		if (n >= len)
			return sseg_err(-ENAMETOOLONG, "%s holds %zu bytes, more than %zu",
					defaults[i].variable, n, len - 1);
		memcpy(buf, text, n);
		buf[n] = '\0';
		return 0;
	}
	return sseg_err(-EINVAL, "'%s' is no setting with an operator's default (pages, numa, "
			"populate)", setting);
}

/* Seconds a GiB takes to make resident, with room for a slower host:
 * about 1 s/GiB was measured on 4 KiB pages with 4 threads; huge pages
 * fault 512 times fewer. */
#define BASE_S_PER_GIB 2.0
#define HUGE_S_PER_GIB 1.0

uint64_t sseg_population_allowance_ms(uint64_t size, enum sseg_pages pages,
				      enum sseg_populate populate)
{
	double per_gib = pages == SSEG_PAGES_BASE || pages == SSEG_PAGES_AUTO ? BASE_S_PER_GIB
									     : HUGE_S_PER_GIB;

	if (populate == SSEG_POPULATE_LAZY || populate == SSEG_POPULATE_BACKGROUND)
		return 0;
	return (uint64_t)(per_gib * 1000.0 * ((double)size / (double)(1ull << 30)));
}
