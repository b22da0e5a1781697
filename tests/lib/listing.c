/* SPDX-License-Identifier: Apache-2.0 */
/* What `sharedseg ls` shows (listing.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "list_doc.h"
#include "listing.h"
#include "testutil.h"

char *listing_of(const struct sseg_list *l)
{
	struct sseg_json j;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	CHECK(f != NULL);
	sseg_json_init(&j, f, SSEG_JSON_COMPACT);
	sseg_list_document(&j, l);
	CHECK(fclose(f) == 0 && text);
	return text;
}

char *listing_now(void)
{
	struct sseg_list l;
	char *text;

	CHECK_RC(sseg_list_scan(&l), 0);
	text = listing_of(&l);
	sseg_list_free(&l);
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
