/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection: lets tests fail a chosen OS or driver call on its n-th
 * use, to prove that every failure path releases what it took and that
 * destroy resumes. A few sites can be armed at once. Disarmed (one relaxed
 * load) in normal use. */
#include <pthread.h>
#include <string.h>

#include "fault.h"

#define SITES 4

struct site {
	char name[32];
	int skip, count, err;
};

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static int fault_armed;
static struct site sites[SITES];
static void (*fault_hook)(const char *site);

void sseg_test_fault_hook(void (*hook)(const char *site))
{
	__atomic_store_n(&fault_hook, hook, __ATOMIC_RELEASE);
}

/* The site armed under name; "" finds a free slot. */
static struct site *find(const char *name)
{
	for (int i = 0; i < SITES; i++)
		if (!strcmp(sites[i].name, name))
			return &sites[i];
	return NULL;
}

void sseg_test_fault(const char *site, int skip, int count, int err)
{
	struct site *s;

	pthread_mutex_lock(&fault_lock);
	if (!site) {
		memset(sites, 0, sizeof(sites));
	} else if ((s = find(site)) || (s = find(""))) {
		strncpy(s->name, site, sizeof(s->name) - 1);
		s->skip = skip;
		s->count = count;
		s->err = err;
	}
	__atomic_store_n(&fault_armed, site != NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fault_lock);
}

int sseg_fault(const char *name)
{
	void (*hook)(const char *site) = __atomic_load_n(&fault_hook, __ATOMIC_ACQUIRE);
	struct site *s;
	int err = 0;

	if (hook)
		hook(name);
	if (!__atomic_load_n(&fault_armed, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&fault_lock);
	s = name[0] ? find(name) : NULL;
	if (s && s->skip > 0) {
		s->skip--;
	} else if (s && s->count != 0) {
		err = s->err;
		if (s->count > 0)
			s->count--;
	}
	pthread_mutex_unlock(&fault_lock);
	return err;
}
