/* SPDX-License-Identifier: Apache-2.0 */
/* Entry point and error names, looked up in the fake's own tables. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "names.h"

int fk_entry_by_name(const char *name)
{
	for (int i = 0; i < fk_driver.nentries; i++)
		if (strcmp(fk_driver.entries[i], name) == 0)
			return i;
	return -1;
}

const char *fk_entry_name(int entry)
{
	return fk_driver.entries[entry];
}

const char *fk_error_name(long code)
{
	for (size_t i = 0; i < fk_driver.nerrors; i++)
		if (fk_driver.errors[i].code == code)
			return fk_driver.errors[i].name;
	return NULL;
}

int fk_error_by_name(const char *text, long *code)
{
	char *end;

	for (size_t i = 0; i < fk_driver.nerrors; i++) {
		if (strcmp(fk_driver.errors[i].name, text) == 0) {
			*code = fk_driver.errors[i].code;
			return 0;
		}
	}
	*code = strtol(text, &end, 10);
	return end == text || *end || *code <= 0 || *code > fk_driver.max_error ? -EINVAL : 0;
}
