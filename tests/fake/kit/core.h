/* SPDX-License-Identifier: Apache-2.0 */
/* The core every fake driver library is built on: what the fake tells the
 * toolkit about its driver (struct fk_driver, one per library), the one
 * lock, the configuration and failure script read from the environment
 * once, the call counters and the bug counter. The toolkit names no driver;
 * each fake defines fk_driver and keeps its own rules in its own files. */
#ifndef SSEG_FAKEKIT_CORE_H
#define SSEG_FAKEKIT_CORE_H

#include <stddef.h>

#define FK_API __attribute__((visibility("default")))

/* Entry points a fake may count (its enum's values index the counters;
 * each fake asserts that its own fit). */
#define FK_MAX_ENTRIES 64

/* A driver's error code and its name, for scripts and error-name calls. */
struct fk_error {
	long code;
	const char *name;
};

struct fk_driver {
	const char *name;         /* "fake cuda": begins every message */
	const char *config_env;   /* the configuration string's variable */
	const char *failures_env; /* the failure script's variable */
	const char *const *entries; /* entry point base names, by the fake's enum */
	int nentries;
	const struct fk_error *errors;
	size_t nerrors;
	long max_error; /* the largest error number a script may give */
	void *config;   /* the fake's configuration: configure() applies over it */
	size_t config_size;
	/* One key=value applied to a configuration: 0, or -EINVAL. */
	int (*set_key)(void *config, const char *key, const char *value);
	/* Once, before the environment is read: the defaults. */
	void (*start)(void);
	/* Control reset: what the fake zeroes besides the counters; NULL none. */
	void (*reset)(void);
};

/* Defined by each fake. These fill the fields that go in pairs: the
 * variables (SSEG_FAKE_CUDA and SSEG_FAKE_CUDA_FAIL), the name and error
 * tables with their lengths, the configuration with its size. */
extern const struct fk_driver fk_driver;

#define FK_DRIVER_ENV(var) .config_env = var, .failures_env = var "_FAIL"
#define FK_DRIVER_ENTRIES(names) \
	.entries = (names), .nentries = (int)(sizeof(names) / sizeof((names)[0]))
#define FK_DRIVER_ERRORS(table) .errors = (table), .nerrors = sizeof(table) / sizeof((table)[0])
#define FK_DRIVER_CONFIG(cfg) .config = &(cfg), .config_size = sizeof(cfg)

/* Loads the fake once (start, then the environment; a malformed value
 * aborts), and takes or drops the lock. A fork never copies the lock held. */
void fk_lock(void);
void fk_unlock(void);

/* Takes the lock and counts a call of entry: the error a scripted failure
 * gives this call, or 0. The lock stays held. */
long fk_enter(int entry);

/* Calls of entry so far (callers hold the lock). */
long fk_calls(int entry);
/* The call counters and the bug counter back to 0 (callers hold the lock). */
void fk_counters_reset(void);
int fk_bugs(void);

/* A rule violation a correct caller never commits: counted and told. */
void fk_bug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A configuration or script with a typo must not pass silently. */
void fk_die(const char *what, const char *text) __attribute__((noreturn));

#endif
