/* SPDX-License-Identifier: Apache-2.0 */
/* The library's JSON documents as the tool prints them: asked for at the
 * size they need, and indented by the library's own writer (src/json.c). */
#include <errno.h>
#include <stdlib.h>

#include "cli.h"

void json_pretty(FILE *out, const char *text)
{
	struct sseg_json j;

	sseg_json_init(&j, out, SSEG_JSON_PRETTY);
	sseg_json_copy(&j, NULL, text);
	sseg_json_finish(&j);
}

char *json_library_text(int (*write)(const void *ctx, char *buf, size_t len), const void *ctx)
{
	char *text = NULL;
	int n, need = 0;

	do {
		free(text);
		need = need ? need * 2 : 65536;
		text = malloc((size_t)need);
		if (!text)
			return NULL;
		n = write(ctx, text, (size_t)need);
	} while (n >= need);
	if (n < 0) {
		free(text);
		errno = -n;
		return NULL;
	}
	return text;
}
