/* The fake driver's state: configuration from the environment, call
 * counters, scripted failures, the bug counter and the one lock. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"

struct fake_state fake;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t fake_once = PTHREAD_ONCE_INIT;

static const char *const entry_names[] = {
#define FAKE_NAME(name, version, init) #name,
	FAKE_ENTRIES(FAKE_NAME)
#undef FAKE_NAME
};

static const unsigned char entry_needs_init[] = {
#define FAKE_INIT(name, version, init) init,
	FAKE_ENTRIES(FAKE_INIT)
#undef FAKE_INIT
};

static void fake_default_config(struct fake_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->devices = 1;
	cfg->numa_count = 1;
	cfg->vmm = 1;
	cfg->imex_channel = 1;
	cfg->host_numa_vmm = 1;
	cfg->posix_fd = 1;
	cfg->need_ctx = 1;
	cfg->vmm_ctx = 1;
	memset(cfg->peer, 0xff, sizeof(cfg->peer));
	cfg->host_register = 1;
	cfg->ro_register = 1;
	cfg->uva = 1;
	cfg->host_pointer = 1;
	cfg->granularity = 2u << 20;
	cfg->driver = 13000;
	cfg->max_register = (512ull << 30) - 1;
}

/* A configuration or failure script with a typo must not pass silently. */
static void fake_die(const char *what, const char *text)
{
	fprintf(stderr, "fake cuda: cannot use %s \"%s\"\n", what, text);
	abort();
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&fake_lock);
}

static void fork_done(void)
{
	pthread_mutex_unlock(&fake_lock);
}

/* fork never copies the lock held, so a forked child can always reach the
 * control API (whether the driver itself still works there is a rule). */
static void fake_load_env(void)
{
	const char *config = getenv("SSEG_FAKE_CUDA");
	const char *failures = getenv("SSEG_FAKE_CUDA_FAIL");

	pthread_atfork(fork_prepare, fork_done, fork_done);
	fake_default_config(&fake.cfg);
	fake.handle_seq = 0xca5e000000000000ull;
	if (config && fake_parse_config(&fake.cfg, config) < 0)
		fake_die("SSEG_FAKE_CUDA", config);
	if (failures && fake_parse_failures(failures) < 0)
		fake_die("SSEG_FAKE_CUDA_FAIL", failures);
}

static void fake_lock_loaded(void)
{
	pthread_once(&fake_once, fake_load_env);
	pthread_mutex_lock(&fake_lock);
}

static CUresult scripted_failure(enum fake_entry entry)
{
	long call = fake.calls[entry];

	for (int i = 0; i < fake.nrules; i++) {
		const struct fake_rule *r = &fake.rules[i];

		if (r->entry == entry && call >= r->from && (r->until < 0 || call <= r->until))
			return r->err;
	}
	return CUDA_SUCCESS;
}

/* CUDA does not survive fork: in a child of a process that initialized
 * it, cuInit and the calls that need it answer NOT_INITIALIZED (reported
 * for cuInit, cuDeviceGetCount and cuCtxSetCurrent; the CUDA guidelines
 * call any use before exec undefined). Version, error names and symbol
 * lookup need no initialization and keep working. */
static int forked_child(enum fake_entry entry)
{
	return fake.initialized && getpid() != fake.init_pid && !fake.cfg.fork_works &&
	       (entry_needs_init[entry] || entry == FE_cuInit);
}

CUresult fake_enter(enum fake_entry entry)
{
	CUresult rc;

	fake_lock_loaded();
	fake.calls[entry]++;
	rc = scripted_failure(entry);
	if (rc == CUDA_SUCCESS && forked_child(entry))
		rc = CUDA_ERROR_NOT_INITIALIZED;
	if (rc == CUDA_SUCCESS && entry_needs_init[entry] && !fake.initialized)
		rc = CUDA_ERROR_NOT_INITIALIZED;
	return rc;
}

CUresult fake_leave(CUresult rc)
{
	pthread_mutex_unlock(&fake_lock);
	return rc;
}

void fake_bug(const char *fmt, ...)
{
	va_list ap;

	fake.bugs++;
	fputs("fake cuda: bug: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int fake_entry_by_name(const char *name)
{
	for (int i = 0; i < FE_COUNT; i++)
		if (strcmp(entry_names[i], name) == 0)
			return i;
	return -1;
}

const char *fake_entry_name(enum fake_entry entry)
{
	return entry_names[entry];
}

static int add_rule(int entry, long from, long until, CUresult err)
{
	if (entry < 0 || from < 1 || fake.nrules == FAKE_MAX_RULES)
		return -EINVAL;
	fake.rules[fake.nrules++] = (struct fake_rule){ entry, from, until, err };
	return 0;
}

/* "cuMemMap:2:CUDA_ERROR_OUT_OF_MEMORY": the 2nd call; "1-": the 1st call
 * on; "2-4": calls 2 to 4. The error is a name or a number. */
static int parse_rule(char *text)
{
	char *save = NULL, *entry = strtok_r(text, ":", &save);
	char *calls = strtok_r(NULL, ":", &save), *error = strtok_r(NULL, ":", &save);
	char *end;
	long from, until;
	CUresult err;

	if (!entry || !calls || !error || strtok_r(NULL, ":", &save) ||
	    fake_error_by_name(error, &err) < 0)
		return -EINVAL;
	from = strtol(calls, &end, 10);
	until = from;
	if (end[0] == '-' && end[1] == '\0') {
		until = -1;
		end++;
	} else if (end[0] == '-') {
		until = strtol(end + 1, &end, 10);
	}
	if (end == calls || *end || (until >= 0 && until < from))
		return -EINVAL;
	return add_rule(fake_entry_by_name(entry), from, until, err);
}

int fake_parse_failures(const char *spec)
{
	char *copy = strdup(spec), *save = NULL;
	int rc = copy ? 0 : -ENOMEM;

	for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && rc == 0;
	     item = strtok_r(NULL, ",", &save))
		rc = parse_rule(item);
	free(copy);
	return rc;
}

/* ---- the control API, for tests that reach this instance with dlopen ---- */

FAKE_API void sseg_fake_cuda_fail(const char *entry, int nth, int count, int err)
{
	int e = entry ? fake_entry_by_name(entry) : -1;

	fake_lock_loaded();
	if (!entry) {
		fake.nrules = 0;
	} else {
		long from = e >= 0 ? fake.calls[e] + nth : 0;

		if (count == 0 || nth < 1 || add_rule(e, from, count < 0 ? -1 : from + count - 1, err) < 0)
			fake_die("sseg_fake_cuda_fail entry", entry);
	}
	fake_leave(CUDA_SUCCESS);
}

FAKE_API int sseg_fake_cuda_configure(const char *spec)
{
	int rc;

	fake_lock_loaded();
	rc = fake_parse_config(&fake.cfg, spec);
	fake_leave(CUDA_SUCCESS);
	return rc;
}

FAKE_API long sseg_fake_cuda_calls(const char *entry)
{
	int e = entry ? fake_entry_by_name(entry) : -1;
	long calls = 0;

	if (entry && e < 0)
		return -1;
	fake_lock_loaded();
	for (int i = 0; i < FE_COUNT; i++)
		if (!entry || i == e)
			calls += fake.calls[i];
	fake_leave(CUDA_SUCCESS);
	return calls;
}

static int locked_count(const int *value)
{
	int copy;

	fake_lock_loaded();
	copy = *value;
	fake_leave(CUDA_SUCCESS);
	return copy;
}

static int locked_live(const struct fake_range *table, int n)
{
	int live;

	fake_lock_loaded();
	live = fake_range_live(table, n);
	fake_leave(CUDA_SUCCESS);
	return live;
}

FAKE_API int sseg_fake_cuda_live_handles(void)
{
	int live = 0;

	fake_lock_loaded();
	for (int i = 0; i < FAKE_MAX_HANDLES; i++)
		live += fake.handles[i].id != 0;
	fake_leave(CUDA_SUCCESS);
	return live;
}

FAKE_API int sseg_fake_cuda_live_reservations(void)
{
	return locked_live(fake.reservations, FAKE_MAX_RESERVATIONS);
}

FAKE_API int sseg_fake_cuda_live_mappings(void)
{
	return locked_live(fake.mappings, FAKE_MAX_MAPPINGS);
}

FAKE_API int sseg_fake_cuda_live_registrations(void)
{
	return locked_live(fake.registrations, FAKE_MAX_REGISTRATIONS);
}

FAKE_API int sseg_fake_cuda_live_contexts(void)
{
	int refs = 0;

	fake_lock_loaded();
	for (int i = 0; i < FAKE_MAX_DEVICES; i++)
		refs += fake.ctx_refs[i];
	fake_leave(CUDA_SUCCESS);
	return refs;
}

FAKE_API int sseg_fake_cuda_bugs(void)
{
	return locked_count(&fake.bugs);
}

FAKE_API int sseg_fake_cuda_access(int device)
{
	if (device < 0 || device >= FAKE_MAX_DEVICES)
		return 0;
	return locked_count(&fake.access[device]);
}

/* The devices granted access to the mapping that holds p, and the node
 * its last HOST_NUMA entry named. */
FAKE_API int sseg_fake_cuda_granted(const void *p, unsigned *devices, int *host_node)
{
	const struct fake_range *m = NULL;
	uintptr_t at = (uintptr_t)p;

	fake_lock_loaded();
	for (int i = 0; i < FAKE_MAX_MAPPINGS && !m; i++)
		if (fake.mappings[i].start && at - fake.mappings[i].start < fake.mappings[i].size)
			m = &fake.mappings[i];
	if (m) {
		*devices = m->granted;
		if (host_node)
			*host_node = m->host_node;
	}
	fake_leave(CUDA_SUCCESS);
	return m ? 0 : -ENOENT;
}

/* The i-th live registration in address order. */
FAKE_API int sseg_fake_cuda_registration(int i, void **p, size_t *bytes, unsigned *flags)
{
	const struct fake_range *found = NULL;
	uintptr_t after = 0;

	fake_lock_loaded();
	for (int k = 0; k <= i; k++, after = found->start + 1) {
		found = NULL;
		for (int j = 0; j < FAKE_MAX_REGISTRATIONS; j++) {
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
		*flags = found->flags;
	}
	fake_leave(CUDA_SUCCESS);
	return found && i >= 0 ? 0 : -ENOENT;
}

FAKE_API void sseg_fake_cuda_reset(void)
{
	fake_lock_loaded();
	memset(fake.calls, 0, sizeof(fake.calls));
	memset(fake.access, 0, sizeof(fake.access));
	fake.nrules = 0;
	fake.bugs = 0;
	fake_leave(CUDA_SUCCESS);
}
