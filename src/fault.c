/* Fault injection: lets tests fail a chosen OS or driver call on its n-th
 * use, to prove that every failure path releases what it took and that
 * destroy resumes. Disarmed (one relaxed load) in normal use. */
#include <pthread.h>
#include <string.h>

#include "fault.h"

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static int fault_armed;
static char fault_site[32];
static int fault_skip, fault_count, fault_errno;

void sseg_test_fault(const char *site, int skip, int count, int err)
{
	pthread_mutex_lock(&fault_lock);
	if (site) {
		strncpy(fault_site, site, sizeof(fault_site) - 1);
		fault_site[sizeof(fault_site) - 1] = '\0';
	}
	fault_skip = skip;
	fault_count = count;
	fault_errno = err;
	__atomic_store_n(&fault_armed, site != NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fault_lock);
}

int sseg_fault(const char *site)
{
	int err = 0;

	if (!__atomic_load_n(&fault_armed, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&fault_lock);
	if (fault_armed && !strcmp(site, fault_site)) {
		if (fault_skip > 0) {
			fault_skip--;
		} else if (fault_count != 0) {
			err = fault_errno;
			if (fault_count > 0)
				fault_count--;
		}
	}
	pthread_mutex_unlock(&fault_lock);
	return err;
}
