/* Logging to stderr, filtered by SSEG_LOG (error, warn, info, debug). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "internal.h"

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static enum sseg_log_level max_level = SSEG_LOG_WARN;

static void read_level(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *env = getenv("SSEG_LOG");

	if (!env)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(env, names[i]))
			max_level = (enum sseg_log_level)i;
}

static void vlog(enum sseg_log_level level, const char *fmt, va_list ap)
{
	static const char *const tags[] = { "error", "warning", "info", "debug" };
	char line[SSEG_ERR_MAX + 64];
	int n;

	pthread_once(&level_once, read_level);
	if (level > max_level)
		return;
	n = snprintf(line, sizeof(line), "sharedseg[%d]: %s: ", (int)getpid(), tags[level]);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	fprintf(stderr, "%s\n", line);
}

void sseg_log(enum sseg_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

void sseg_log_throttled(double *last, double interval_s, enum sseg_log_level level,
			const char *fmt, ...)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	double now = sseg_now();
	bool due;
	va_list ap;

	pthread_mutex_lock(&lock);
	due = *last == 0 || now - *last >= interval_s;
	if (due)
		*last = now;
	pthread_mutex_unlock(&lock);
	if (!due)
		return;
	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}
