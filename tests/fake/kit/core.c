/* SPDX-License-Identifier: Apache-2.0 */
/* One lock, loaded once: the defaults, the configuration and failure
 * script from the environment, then the counters behind it. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "core.h"
#include "script.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static long calls[FK_MAX_ENTRIES];
static int bugs;

static void fork_prepare(void)
{
	pthread_mutex_lock(&lock);
}

static void fork_done(void)
{
	pthread_mutex_unlock(&lock);
}

/* fork never copies the lock held, so a forked child can always reach the
 * control API (whether the driver itself still works there is a rule). */
static void load(void)
{
	const char *config = getenv(fk_driver.config_env);
	const char *failures = getenv(fk_driver.failures_env);

	pthread_atfork(fork_prepare, fork_done, fork_done);
	fk_driver.start();
	if (config && fk_config_apply(fk_driver.config, fk_driver.config_size, config,
				      fk_driver.set_key) < 0)
		fk_die(fk_driver.config_env, config);
	if (failures && fk_script_parse(failures) < 0)
		fk_die(fk_driver.failures_env, failures);
}

void fk_lock(void)
{
	pthread_once(&once, load);
	pthread_mutex_lock(&lock);
}

void fk_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

long fk_enter(int entry)
{
	fk_lock();
	return fk_script_match(entry, ++calls[entry]);
}

long fk_calls(int entry)
{
	return calls[entry];
}

void fk_counters_reset(void)
{
	memset(calls, 0, sizeof(calls));
	bugs = 0;
}

int fk_bugs(void)
{
	return bugs;
}

void fk_bug(const char *fmt, ...)
{
	va_list ap;

	bugs++;
	fprintf(stderr, "%s: bug: ", fk_driver.name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void fk_die(const char *what, const char *text)
{
	fprintf(stderr, "%s: cannot use %s \"%s\"\n", fk_driver.name, what, text);
	abort();
}
