/* SPDX-License-Identifier: Apache-2.0 */
/* The library's JSON documents into memory (json_doc.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_doc.h"

int sseg_json_text(void (*doc)(struct sseg_json *j, const void *ctx), const void *ctx,
		   char **text, size_t *len)
{
	struct sseg_json j;
	FILE *f;

	*text = NULL;
	*len = 0;
	f = open_memstream(text, len);
	if (!f)
		return sseg_err(-ENOMEM, "out of memory");
	sseg_json_init(&j, f, SSEG_JSON_COMPACT);
	doc(&j, ctx);
	if (fclose(f) || !*text || *len > INT32_MAX) {
		free(*text);
		*text = NULL;
		return sseg_err(-ENOMEM, "out of memory");
	}
	return 0;
}

int sseg_json_render(void (*doc)(struct sseg_json *j, const void *ctx), const void *ctx,
		     char *buf, size_t len)
{
	char *text;
	size_t n;
	int rc;

	if (!buf && len)
		return sseg_err(-EINVAL, "no buffer for %zu bytes of JSON", len);
	rc = sseg_json_text(doc, ctx, &text, &n);
	if (rc)
		return rc;
	if (len) {
		size_t copy = n < len ? n : len - 1;

		memcpy(buf, text, copy);
		buf[copy] = '\0';
	}
	free(text);
	return (int)n;
}
