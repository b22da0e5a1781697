/* SPDX-License-Identifier: Apache-2.0 */
/* JSON lines: one object a line, built in memory, printed at once. */
#include <stdio.h>
#include <stdlib.h>

#include "lines.h"

void j_str(struct json *j, const char *key, const char *value)
{
	sseg_json_str(&j->w, key, value);
}

void j_int(struct json *j, const char *key, long long value)
{
	sseg_json_int(&j->w, key, value);
}

void j_num(struct json *j, const char *key, double value)
{
	sseg_json_double(&j->w, key, value);
}

void j_bool(struct json *j, const char *key, bool value)
{
	sseg_json_bool(&j->w, key, value);
}

void j_array_begin(struct json *j, const char *key)
{
	sseg_json_begin(&j->w, key, '[');
}

void j_array_end(struct json *j)
{
	sseg_json_end(&j->w, ']');
}

void j_begin(struct json *j, const char *check)
{
	FILE *f;

	j->text = NULL;
	j->len = 0;
	f = open_memstream(&j->text, &j->len);
	sseg_json_init(&j->w, f ? f : stdout, SSEG_JSON_LINE);
	sseg_json_begin(&j->w, NULL, '{');
	if (check)
		j_str(j, "check", check);
}

void j_end(struct json *j)
{
	sseg_json_end(&j->w, '}');
	if (j->w.out == stdout) { /* no memory for the line: written as it went */
		sseg_json_finish(&j->w);
		fflush(stdout);
		return;
	}
	fclose(j->w.out);
	if (j->text)
		printf("%s\n", j->text);
	fflush(stdout);
	free(j->text);
}
