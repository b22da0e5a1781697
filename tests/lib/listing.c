/* SPDX-License-Identifier: Apache-2.0 */
/* What `sharedseg ls` shows (listing.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listing.h"
#include "testutil.h"

char *listing(void)
{
	int n = sseg_list_json(NULL, 0);
	char *text;

	CHECK(n > 0);
	text = malloc((size_t)n + 1);
	CHECK(text && sseg_list_json(text, (size_t)n + 1) == n);
	return text;
}

const char *segment_of(const char *from, const char *name)
{
	char needle[160];

	snprintf(needle, sizeof(needle), "{\"name\":\"%s\"", name);
	return strstr(from, needle);
}

bool in_segment(const char *seg, const char *needle)
{
	const char *next = strstr(seg + 1, "{\"name\":");
	const char *at = strstr(seg, needle);

	return at && (!next || at < next);
}

bool has_pid(const char *seg, pid_t pid)
{
	char needle[32];

	snprintf(needle, sizeof(needle), "{\"pid\":%d,", (int)pid);
	return in_segment(seg, needle);
}

char *run_ls(const char *args, size_t *len)
{
	char cmd[512], *out = NULL;
	size_t cap = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%s/sharedseg ls %s", getenv("SSEG_BUILD_DIR"), args);
	p = popen(cmd, "r");
	CHECK(p);
	*len = 0;
	for (;;) {
		if (*len + 4096 + 1 > cap)
			CHECK((out = realloc(out, cap = cap * 2 + 8192)));
		size_t got = fread(out + *len, 1, 4096, p);

		if (!got)
			break;
		*len += got;
	}
	out[*len] = '\0';
	CHECK(pclose(p) == 0);
	return out;
}
