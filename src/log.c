/* SPDX-License-Identifier: Apache-2.0 */
/* Messages: to the application's callback, or to stderr. The default writer
 * never blocks: a line that a full pipe cannot take at once is dropped and
 * counted, so a stalled reader of stderr cannot stall the fd channel. */
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static int max_level = SSEG_LOG_WARN;
static sseg_log_fn log_fn;
static void *log_ctx;
static unsigned long dropped; /* default writer: lines a full stderr refused */
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sseg_ratelimit *held_list; /* causes with lines held back */

static const char *const level_names[] = { "error", "warn", "info", "debug" };
static const char *const off_names[] = { "off", "none" }; /* SSEG_LOG_OFF */

/* The user-facing environment: SHAREDSEG_<name>. Releases up to 0.2 read
 * some as SSEG_<name>; that spelling still counts, with one warning: LOG,
 * this file's own, and the names others declare (sseg_env_declare). */
#define ENV_MAX 32
static const char *env_names[ENV_MAX] = { "LOG" };
static int env_count = 1;    /* published after its name */
enum { ENV_LOG = 0 };        /* env_names[ENV_LOG] */
static int env_warned[ENV_MAX];
static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_env_old = -1; /* read_level found the old spelling: ENV_LOG */
static int log_env_bad;      /* read_level found a value that is no level */
static int log_env_bad_told; /* and it was said, here or in a parent */

#define ENV_PREFIX "SHAREDSEG_"
#define ENV_OLD_PREFIX "SSEG_"

static const char *env_value(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* The value and, where the old spelling is set, its index in env_names;
 * never logs (the log level itself is read through here). */
static const char *env_read(const char *name, int *old)
{
	const char *v = env_value(name), *suffix, *was;
	char old_name[64];

	*old = -1;
	if (strncmp(name, ENV_PREFIX, strlen(ENV_PREFIX)))
		return v;
	suffix = name + strlen(ENV_PREFIX);
	for (int i = 0; i < __atomic_load_n(&env_count, __ATOMIC_ACQUIRE); i++) {
		if (strcmp(suffix, env_names[i]))
			continue;
		snprintf(old_name, sizeof(old_name), ENV_OLD_PREFIX "%s", suffix);
		was = env_value(old_name);
		if (was)
			*old = (int)i;
		return v ? v : was;
	}
	return v;
}

static void env_warn(int i)
{
	if (i < 0 || __atomic_exchange_n(&env_warned[i], 1, __ATOMIC_RELAXED))
		return;
	sseg_log(SSEG_LOG_WARN, ENV_OLD_PREFIX "%s is deprecated: set " ENV_PREFIX "%s instead "
		 "(which wins where both are set)", env_names[i], env_names[i]);
}

void sseg_env_declare(const char *const *names)
{
	pthread_mutex_lock(&env_lock);
	for (; names && *names; names++) {
		int n = env_count, i;

		for (i = 0; i < n && strcmp(env_names[i], *names); i++)
			;
		if (i < n || n == ENV_MAX)
			continue;
		env_names[n] = *names;
		__atomic_store_n(&env_count, n + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&env_lock);
}

const char *sseg_env(const char *name)
{
	int old;
	const char *v = env_read(name, &old);

	env_warn(old);
	return v;
}

/* The level a value of SHAREDSEG_LOG names; false for none. */
static bool level_named(const char *value, int *level)
{
	for (size_t i = 0; i < ARRAY_SIZE(off_names); i++)
		if (!strcmp(value, off_names[i])) {
			*level = SSEG_LOG_OFF;
			return true;
		}
	for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
		if (!strcmp(value, level_names[i])) {
			*level = (int)i;
			return true;
		}
	return false;
}

static void read_level(void)
{
	const char *env = env_read(ENV_PREFIX "LOG", &log_env_old);
	int level;

	if (!env)
		return;
	if (level_named(env, &level))
		__atomic_store_n(&max_level, level, __ATOMIC_RELAXED);
	else
		log_env_bad = 1;
}

static void tell_bad_level(void);

void sseg_set_log_level(enum sseg_log_level level)
{
	pthread_once(&level_once, read_level);
	if (level < SSEG_LOG_OFF)
		level = SSEG_LOG_OFF;
	if (level > SSEG_LOG_DEBUG)
		level = SSEG_LOG_DEBUG;
	__atomic_store_n(&max_level, (int)level, __ATOMIC_RELAXED);
}

enum sseg_log_level sseg_log_level(void)
{
	pthread_once(&level_once, read_level);
	/* Told here, not in read_level: the warning itself asks for the level. */
	if (log_env_old == ENV_LOG)
		env_warn(ENV_LOG);
	tell_bad_level();
	return (enum sseg_log_level)__atomic_load_n(&max_level, __ATOMIC_RELAXED);
}

void sseg_set_log(sseg_log_fn fn, void *ctx)
{
	/* ctx first: a logging thread that sees the new fn sees its ctx. */
	__atomic_store_n(&log_ctx, ctx, __ATOMIC_RELEASE);
	__atomic_store_n(&log_fn, fn, __ATOMIC_RELEASE);
}

/* One write that the kernel takes whole or not at all: poll first (a pipe
 * with room for PIPE_BUF bytes takes a shorter line atomically). */
static void write_stderr(const char *line, size_t len)
{
	struct pollfd pfd = { .fd = STDERR_FILENO, .events = POLLOUT };
	unsigned long lost = __atomic_exchange_n(&dropped, 0, __ATOMIC_RELAXED);
	char note[96];

	if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLOUT)) {
		__atomic_add_fetch(&dropped, lost + 1, __ATOMIC_RELAXED);
		return;
	}
	if (lost) {
		int n = snprintf(note, sizeof(note),
				 "sharedseg[%d]: warning: %lu earlier line(s) dropped: stderr was full\n",
				 (int)getpid(), lost);
		if (write(STDERR_FILENO, note, (size_t)n) < 0)
			return;
	}
	if (write(STDERR_FILENO, line, len) < 0)
		__atomic_add_fetch(&dropped, 1, __ATOMIC_RELAXED);
}

static void emit(enum sseg_log_level level, const char *message)
{
	sseg_log_fn fn = __atomic_load_n(&log_fn, __ATOMIC_ACQUIRE);
	char line[SSEG_ERR_MAX + 96];
	int n;

	if (fn) {
		fn(level, message, __atomic_load_n(&log_ctx, __ATOMIC_ACQUIRE));
		return;
	}
	n = snprintf(line, sizeof(line), "sharedseg[%d]: %s: %s\n", (int)getpid(),
		     level == SSEG_LOG_WARN ? "warning" : level_names[level], message);
	if (n >= (int)sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	write_stderr(line, (size_t)n);
}

/* Once per process (a forked child was told with its parent): the value
 * of SHAREDSEG_LOG (or the old spelling) that is no level, and the ones it
 * takes, from the names read_level knows. Straight to the writer: at load
 * the level is not read yet (read at first use), and never at warn's
 * expense when it is. */
static void tell_bad_value(const char *name, const char *value)
{
	const size_t n = ARRAY_SIZE(off_names) + ARRAY_SIZE(level_names);
	char accepted[128], message[SSEG_ERR_MAX];
	size_t used = 0;

	if (__atomic_exchange_n(&log_env_bad_told, 1, __ATOMIC_RELAXED))
		return;
	for (size_t i = 0; i < n && used < sizeof(accepted); i++)
		used += (size_t)snprintf(accepted + used, sizeof(accepted) - used, "%s%s",
					 !i ? "" : i + 1 < n ? ", " : " or ",
					 i < ARRAY_SIZE(off_names) ? off_names[i]
								   : level_names[i - ARRAY_SIZE(off_names)]);
	snprintf(message, sizeof(message), "%s=%s is not a log level and is ignored: it takes %s",
		 name, value, accepted);
	emit(SSEG_LOG_WARN, message);
}

/* The value and its name as the user set them, when they name no level. */
static bool bad_value(const char **name, const char **value)
{
	int level;

	*name = ENV_PREFIX "LOG";
	*value = env_value(*name);
	if (!*value) {
		*name = ENV_OLD_PREFIX "LOG";
		*value = env_value(*name);
	}
	return *value && !level_named(*value, &level);
}

static void tell_bad_level(void)
{
	const char *name, *value;

	if (log_env_bad && !__atomic_load_n(&log_env_bad_told, __ATOMIC_RELAXED) &&
	    __atomic_load_n(&max_level, __ATOMIC_RELAXED) >= SSEG_LOG_WARN &&
	    bad_value(&name, &value))
		tell_bad_value(name, value);
}

/* A program that never logs still hears of a value that is no level: told
 * when the library is loaded (the level itself is read at first use). */
__attribute__((constructor)) static void check_level_at_load(void)
{
	const char *name, *value;

	if (bad_value(&name, &value))
		tell_bad_value(name, value);
}

/* "250 ms", "3 s": an interval below a second is not "0 s". */
static void span_words(double s, char *buf, size_t len)
{
	if (s < 1.0)
		snprintf(buf, len, "%d ms", (int)(s * 1000.0 + 0.5));
	else
		snprintf(buf, len, "%.0f s", s);
}

struct held_line {
	enum sseg_log_level level;
	unsigned count;
	double span;
	char message[SSEG_ERR_MAX];
};

/* Takes rl off the held list. Under limit_lock. */
static void unlist(struct sseg_ratelimit *rl)
{
	struct sseg_ratelimit **at = &held_list;

	while (*at && *at != rl)
		at = &(*at)->next_held;
	if (*at)
		__atomic_store_n(at, rl->next_held, __ATOMIC_RELAXED);
	rl->next_held = NULL;
}

/* Takes a listed cause's count off the list, one whose interval has passed
 * unless all: its line then counts as the cause's line of that interval.
 * False when there is none. */
static bool take_held(bool all, struct held_line *h)
{
	double now = sseg_now();
	struct sseg_ratelimit *rl;

	pthread_mutex_lock(&limit_lock);
	for (rl = held_list; rl && !all && now - rl->last < rl->interval_s; rl = rl->next_held)
		;
	if (rl) {
		unlist(rl);
		h->level = rl->level;
		h->count = rl->held_back;
		h->span = now - rl->last;
		memcpy(h->message, rl->message, sizeof(h->message));
		rl->held_back = 0;
		rl->last = now;
	}
	pthread_mutex_unlock(&limit_lock);
	return rl != NULL;
}

static void flush_held(bool all)
{
	struct held_line h;

	while (__atomic_load_n(&held_list, __ATOMIC_RELAXED) && take_held(all, &h)) {
		char message[SSEG_ERR_MAX + 96], span[32];

		span_words(h.span, span, sizeof(span));
		snprintf(message, sizeof(message), "%s (%u like it in the last %s, held back)",
			 h.message, h.count, span);
		emit(h.level, message);
	}
}

void sseg_log_flush(void)
{
	flush_held(false);
}

/* A process that exits after a flood still tells its counts, due or not,
 * on stderr only: the application's callback may be gone by then (an
 * interpreter shutting down). */
__attribute__((destructor)) static void flush_at_exit(void)
{
	if (!__atomic_load_n(&log_fn, __ATOMIC_ACQUIRE))
		flush_held(true);
}

static void vlog(enum sseg_log_level level, const char *fmt, va_list ap)
{
	char message[SSEG_ERR_MAX + 64];

	if ((int)level > (int)sseg_log_level())
		return;
	vsnprintf(message, sizeof(message), fmt, ap);
	sseg_log_flush();
	emit(level, message);
}

void sseg_log(enum sseg_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, fmt, ap);
	va_end(ap);
}

/* Counts one line held back and keeps its words for sseg_log_flush. */
static void hold_back(struct sseg_ratelimit *rl, enum sseg_log_level level, const char *fmt,
		      va_list ap)
{
	if (rl->held_back++ == 0) {
		rl->next_held = held_list;
		__atomic_store_n(&held_list, rl, __ATOMIC_RELAXED);
	}
	rl->level = level;
	vsnprintf(rl->message, sizeof(rl->message), fmt, ap);
}

void sseg_log_limited(struct sseg_ratelimit *rl, double interval_s, enum sseg_log_level level,
		      const char *fmt, ...)
{
	char message[SSEG_ERR_MAX], span[32];
	double now = sseg_now(), since = 0;
	unsigned held = 0;
	bool due;
	va_list ap;

	if ((int)level > (int)sseg_log_level())
		return;
	va_start(ap, fmt);
	pthread_mutex_lock(&limit_lock);
	rl->interval_s = interval_s;
	due = rl->last == 0 || now - rl->last >= interval_s;
	if (due) {
		since = now - rl->last;
		rl->last = now;
		held = rl->held_back;
		rl->held_back = 0;
		unlist(rl);
	} else {
		hold_back(rl, level, fmt, ap);
	}
	pthread_mutex_unlock(&limit_lock);
	if (due)
		vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	if (!due)
		return;
	span_words(since, span, sizeof(span));
	if (held)
		sseg_log(level, "%s (and %u more like it in the last %s)", message, held, span);
	else
		sseg_log(level, "%s", message);
}
