/* The fake runtime's state: configuration from the environment, call
 * counters, scripted failures, this thread's last message, the bug counter
 * and the one lock; and the control API the tests reach with dlsym. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_acl.h"
#include "sseg_fake_acl.h"

struct fake_state fake;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;
static __thread char recent[256];

static const unsigned char entry_before_init[] = {
#define FAKE_INIT(name, before_init) before_init,
	FAKE_ACL_ENTRIES(FAKE_INIT)
#undef FAKE_INIT
};

static void fork_prepare(void)
{
	pthread_mutex_lock(&fake_lock);
}

static void fork_done(void)
{
	pthread_mutex_unlock(&fake_lock);
}

static void load_once(void)
{
	pthread_atfork(fork_prepare, fork_done, fork_done);
	fake_load_env();
}

static void lock_loaded(void)
{
	pthread_once(&fake_once, load_once);
	pthread_mutex_lock(&fake_lock);
}

static aclError scripted_failure(enum fake_entry entry)
{
	long call = fake.calls[entry];

	for (int i = 0; i < fake.nrules; i++) {
		const struct fake_rule *r = &fake.rules[i];

		if (r->entry == entry && call >= r->from && (r->until < 0 || call <= r->until))
			return r->err;
	}
	return ACL_SUCCESS;
}

aclError fake_enter(enum fake_entry entry)
{
	aclError rc;

	lock_loaded();
	fake.calls[entry]++;
	recent[0] = '\0';
	rc = scripted_failure(entry);
	if (rc != ACL_SUCCESS)
		return fake_refuse(rc, "a failure scripted for this call");
	if (!entry_before_init[entry] && !fake.initialized)
		return fake_refuse(ACL_ERROR_UNINITIALIZE, "aclInit was not called");
	return ACL_SUCCESS;
}

aclError fake_leave(aclError rc)
{
	pthread_mutex_unlock(&fake_lock);
	return rc;
}

aclError fake_refuse(aclError rc, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(recent, sizeof(recent), "fake acl: ");

	va_start(ap, fmt);
	vsnprintf(recent + n, sizeof(recent) - (size_t)n, fmt, ap);
	va_end(ap);
	return rc;
}

void fake_bug(const char *fmt, ...)
{
	va_list ap;

	fake.bugs++;
	fputs("fake acl: bug: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int fake_add_rule(int entry, long from, long until, aclError err)
{
	if (entry < 0 || from < 1 || fake.nrules == FAKE_MAX_RULES)
		return -EINVAL;
	fake.rules[fake.nrules++] = (struct fake_rule){ entry, from, until, err };
	return 0;
}

/* The runtime's own: this thread's reason for its last failure. */
FAKE_API const char *aclGetRecentErrMsg(void)
{
	return recent;
}

/* ---- the control API, for tests that reach this instance with dlopen ---- */

FAKE_API void sseg_fake_acl_fail(const char *entry, int nth, int count, int err)
{
	int e = entry ? fake_entry_by_name(entry) : -1;

	lock_loaded();
	if (!entry) {
		fake.nrules = 0;
	} else {
		long from = e >= 0 ? fake.calls[e] + nth : 0;

		if (count == 0 || nth < 1 ||
		    fake_add_rule(e, from, count < 0 ? -1 : from + count - 1, err) < 0) {
			fprintf(stderr, "fake acl: cannot script a failure of \"%s\"\n", entry);
			abort();
		}
	}
	fake_leave(ACL_SUCCESS);
}

FAKE_API int sseg_fake_acl_configure(const char *spec)
{
	int rc;

	lock_loaded();
	rc = fake_parse_config(&fake.cfg, spec);
	fake_leave(ACL_SUCCESS);
	return rc;
}

FAKE_API long sseg_fake_acl_calls(const char *entry)
{
	int e = entry ? fake_entry_by_name(entry) : -1;
	long calls = 0;

	if (entry && e < 0)
		return -1;
	lock_loaded();
	for (int i = 0; i < FE_COUNT; i++)
		if (!entry || i == e)
			calls += fake.calls[i];
	fake_leave(ACL_SUCCESS);
	return calls;
}

static int locked_live(const struct fake_range *table)
{
	int live;

	lock_loaded();
	live = fake_range_live(table);
	fake_leave(ACL_SUCCESS);
	return live;
}

FAKE_API int sseg_fake_acl_live_handles(void)
{
	int live = 0;

	lock_loaded();
	for (int i = 0; i < FAKE_MAX_HANDLES; i++)
		live += fake.handles[i].id != 0;
	fake_leave(ACL_SUCCESS);
	return live;
}

FAKE_API int sseg_fake_acl_live_reservations(void)
{
	return locked_live(fake.reservations);
}

FAKE_API int sseg_fake_acl_live_mappings(void)
{
	return locked_live(fake.mappings);
}

FAKE_API int sseg_fake_acl_live_registrations(void)
{
	return locked_live(fake.registrations);
}

FAKE_API int sseg_fake_acl_live_devices(void)
{
	int refs = 0;

	lock_loaded();
	for (int i = 0; i < FAKE_MAX_DEVICES; i++)
		refs += fake.device_refs[i];
	fake_leave(ACL_SUCCESS);
	return refs;
}

FAKE_API int sseg_fake_acl_bugs(void)
{
	int bugs;

	lock_loaded();
	bugs = fake.bugs;
	fake_leave(ACL_SUCCESS);
	return bugs;
}

/* The i-th live registration in address order. */
FAKE_API int sseg_fake_acl_registration(int i, void **p, size_t *bytes, int *device)
{
	const struct fake_range *found = NULL;
	uintptr_t after = 0;

	lock_loaded();
	for (int k = 0; k <= i; k++, after = found->start + 1) {
		found = NULL;
		for (int j = 0; j < FAKE_MAX_RANGES; j++) {
			const struct fake_range *r = &fake.registrations[j];

			if (r->start && r->start >= after && (!found || r->start < found->start))
				found = r;
		}
		if (!found)
			break;
	}
	if (found && i >= 0) {
		*p = (void *)found->start;
		*bytes = found->size;
		*device = (int)found->devices;
	}
	fake_leave(ACL_SUCCESS);
	return found && i >= 0 ? 0 : -ENOENT;
}

FAKE_API int sseg_fake_acl_trusted(uint64_t shareable, int32_t *pids, int max)
{
	int n;

	lock_loaded();
	n = fake_trusted_of(shareable, pids, max);
	fake_leave(ACL_SUCCESS);
	return n;
}

FAKE_API void sseg_fake_acl_reset(void)
{
	lock_loaded();
	memset(fake.calls, 0, sizeof(fake.calls));
	fake.nrules = 0;
	fake.bugs = 0;
	fake_leave(ACL_SUCCESS);
}
