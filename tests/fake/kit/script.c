/* SPDX-License-Identifier: Apache-2.0 */
/* The failure script: rules by entry point and call number. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "names.h"
#include "script.h"

struct rule {
	int entry;
	long from;
	long until;
	long err;
};

static struct rule rules[FK_MAX_RULES];
static int nrules;

int fk_script_add(int entry, long from, long until, long err)
{
	if (entry < 0 || from < 1 || nrules == FK_MAX_RULES)
		return -EINVAL;
	rules[nrules++] = (struct rule){ entry, from, until, err };
	return 0;
}

long fk_script_match(int entry, long call)
{
	for (int i = 0; i < nrules; i++) {
		const struct rule *r = &rules[i];

		if (r->entry == entry && call >= r->from && (r->until < 0 || call <= r->until))
			return r->err;
	}
	return 0;
}

void fk_script_clear(void)
{
	nrules = 0;
}

/* "2": the 2nd call; "1-": the 1st call on; "2-4": calls 2 to 4. */
static int parse_calls(const char *calls, long *from, long *until)
{
	char *end;

	*from = strtol(calls, &end, 10);
	*until = *from;
	if (end[0] == '-' && end[1] == '\0') {
		*until = -1;
		end++;
	} else if (end[0] == '-') {
		*until = strtol(end + 1, &end, 10);
	}
	return end == calls || *end || (*until >= 0 && *until < *from) ? -EINVAL : 0;
}

static int parse_rule(void *unused, char *text)
{
	char *save = NULL, *entry = strtok_r(text, ":", &save);
	char *calls = strtok_r(NULL, ":", &save), *error = strtok_r(NULL, ":", &save);
	long from, until, err;

	(void)unused;
	if (!entry || !calls || !error || strtok_r(NULL, ":", &save) ||
	    fk_error_by_name(error, &err) < 0 || parse_calls(calls, &from, &until) < 0)
		return -EINVAL;
	return fk_script_add(fk_entry_by_name(entry), from, until, err);
}

int fk_script_parse(const char *spec)
{
	return fk_split(spec, ",", parse_rule, NULL);
}
