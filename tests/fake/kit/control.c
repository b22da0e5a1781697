/* SPDX-License-Identifier: Apache-2.0 */
/* The bodies behind every fake's control API. */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "config.h"
#include "control.h"
#include "core.h"
#include "names.h"
#include "script.h"

void fk_control_fail(const char *entry, int nth, int count, int err)
{
	int e = entry ? fk_entry_by_name(entry) : -1;

	fk_lock();
	if (!entry) {
		fk_script_clear();
	} else {
		long from = e >= 0 ? fk_calls(e) + nth : 0;

		if (count == 0 || nth < 1 ||
		    fk_script_add(e, from, count < 0 ? -1 : from + count - 1, err) < 0)
			fk_die("a failure scripted for", entry);
	}
	fk_unlock();
}

int fk_control_configure(const char *spec)
{
	int rc;

	fk_lock();
	rc = fk_config_apply(fk_driver.config, fk_driver.config_size, spec, fk_driver.set_key);
	fk_unlock();
	return rc;
}

long fk_control_calls(const char *entry)
{
	int e = entry ? fk_entry_by_name(entry) : -1;
	long calls = 0;

	if (entry && e < 0)
		return -1;
	fk_lock();
	for (int i = 0; i < fk_driver.nentries; i++)
		if (!entry || i == e)
			calls += fk_calls(i);
	fk_unlock();
	return calls;
}

void fk_control_reset(void)
{
	fk_lock();
	fk_counters_reset();
	fk_script_clear();
	if (fk_driver.reset)
		fk_driver.reset();
	fk_unlock();
}

int fk_control_nth(struct fk_table t, int i, void *slot)
{
	const void *found;

	fk_lock();
	found = fk_nth(t, i);
	if (found)
		memcpy(slot, found, t.stride);
	fk_unlock();
	return found ? 0 : -ENOENT;
}

int fk_sum(const int *counts, int n)
{
	int sum = 0;

	for (int i = 0; i < n; i++)
		sum += counts[i];
	return sum;
}
