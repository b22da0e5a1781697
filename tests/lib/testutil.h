/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the test executables: checks that exit 1 with the library's
 * last error, process helpers, and machine knobs that are restored. */
#ifndef SSEG_TESTUTIL_H
#define SSEG_TESTUTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "sharedseg.h"

#define TU_SKIP 77

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n  last error: %s\n", \
				__FILE__, __LINE__, #cond, sseg_last_error());         \
			exit(1);                                                       \
		}                                                                      \
	} while (0)

/* expr must return exactly expect (0 or a negative errno). */
#define CHECK_RC(expr, expect)                                                               \
	do {                                                                                 \
		int rc_ = (expr);                                                            \
		if (rc_ != (expect)) {                                                       \
			fprintf(stderr, "%s:%d: %s returned %d, expected %d\n  last error: %s\n", \
				__FILE__, __LINE__, #expr, rc_, (expect), sseg_last_error());  \
			exit(1);                                                             \
		}                                                                            \
	} while (0)

/* The last error must contain needle. */
#define CHECK_ERR_HAS(needle) CHECK(tu_error_has(needle))

int tu_error_has(const char *needle);

/* A group name unique to this process and call: "prefix-<pid>-<n>". */
void tu_name(char *buf, size_t len, const char *prefix);
/* In a mount namespace of this process's own, uid's default runtime
 * directory (/tmp/sharedseg-UID) becomes root's, as a squatter who made it
 * first would leave it: a tmpfs of root's mounted over it, seen by this
 * process and its children only. Root only; exits the test on failure. */
void tu_rundir_taken(unsigned uid);

/* The path of the local group name's rendezvous socket, in this user's
 * runtime directory (a name of file-name bytes). */
void tu_group_socket(const char *name, char *buf, size_t len);

/* Forks a child that runs fn(arg) and exits with its return value. */
pid_t tu_fork(int (*fn)(void *arg), void *arg);
/* Waits for pid up to timeout_ms; returns its exit status, 128+signal when
 * killed by a signal, or -1 on timeout (the child is then killed). */
int tu_wait(pid_t pid, int timeout_ms);

/* Machine knobs (sysfs/procfs files). tu_knob_set remembers the current
 * value (the bracketed one for choice files) and writes value; the first
 * call registers an atexit handler that restores everything changed. */
int tu_knob_set(const char *path, const char *value);
/* Tests that change or depend on machine-wide knobs hold this lock (taken
 * by tu_knob_set and tu_hugetlb_reserve) until they exit, so test runs in
 * two build trees never see each other's settings. */
void tu_lock_machine(void);
void tu_knobs_restore(void);

/* HugeTLB 2 MiB pool: make at least n pages free (restored at exit).
 * Returns 0, or TU_SKIP when the machine cannot. */
int tu_hugetlb_reserve(unsigned n);

/* A one-rank segment of 2 MiB on backend (base pages for memfd, else the
 * backend's choice), created and completed; exits 1 when it cannot. */
sseg_t *tu_one_rank(const char *name, enum sseg_backend backend);

/* The cleanup-pending contract, the same on every backend. A segment
 * whose teardown keeps failing (the fake's fail(entry, 1, -1, err) refuses
 * every call of the teardown's entry point, fail(NULL, 0, 0, 0) lets it
 * work again) fails destroy with -EIO twice, saying failure, then goes to
 * the pending list (-EINPROGRESS); three unrelated creates (memfd, backend,
 * memfd) go on, each retrying it in vain; the library logs it exactly
 * once; once the driver works again the next create finishes it. first
 * gets the logged line. */
struct tu_pending {
	const char *name; /* the segment that goes pending */
	enum sseg_backend backend;
	void (*fail)(const char *entry, int nth, int count, int err); /* fake/kit/control.h */
	const char *entry;
	int err;
	const char *failure;
};
void tu_pending_contract(const struct tu_pending *p, char *first, size_t len);

/* ---- the fake drivers the tests build (fake/kit/control.h) ---- */

/* The library file (libsseg_fake_cuda.so) in the build directory
 * (SSEG_BUILD_DIR); exits 1 when that is not set. */
const char *tu_build_file(const char *file);
/* Loads the fake at path through the library's real loading path: lib_env
 * (SHAREDSEG_CUDA_LIBRARY) points at it, config_env carries config, and
 * sseg_check_support(backend) loads it. Returns the instance the library
 * loaded, for dlsym; exits 1 when it cannot. */
void *tu_fake_open(const char *path, const char *lib_env, const char *config_env,
		   const char *config, enum sseg_backend backend);
/* dlsym of prefix + each name into slots[i], in order; exits 1 naming
 * the one the fake lacks. */
void tu_fake_resolve(void *lib, const char *prefix, const char *const *names, void **slots,
		     size_t n);
/* A fake's counters: live handles, reservations, mappings and
 * registrations, one more it keeps (named by what), and its bugs. */
struct tu_held {
	int (*handles)(void);
	int (*reservations)(void);
	int (*mappings)(void);
	int (*registrations)(void);
	int (*more)(void);
	int (*bugs)(void);
};
/* 1 when every counter is 0; else says on stderr what who still holds. */
int tu_fake_idle(const char *who, const struct tu_held *held, const char *what);

/* A pattern byte for offset off of a segment written by rank. */
static inline unsigned char tu_pattern(int rank, unsigned long long off)
{
	return (unsigned char)((off * 131u + (unsigned)rank * 7u + (off >> 12)) & 0xff);
}

#endif

/* ---- several ranks as threads of this process ---- */

struct tu_rank {
	struct sseg_opts opts; /* sz, name, rank, world_size, ... set by the test */
	const char *host;      /* simulated host (boot id override), or NULL */
	sseg_t *seg;           /* result */
	int create_rc;
	int complete_rc;
	char error[512];       /* the rank's sseg_last_error() after its failure */
};

/* Every rank creates in its own thread, the blobs are gathered, then every
 * rank completes in its own thread. Ranks whose create failed contribute
 * their failure blob. Returns the number of ranks that failed. */
int tu_run_inproc(struct tu_rank *ranks, int n);
/* Creates every rank (in threads) and returns the gathered blobs
 * (malloc'ed, n * SSEG_BLOB_SIZE) without completing. */
unsigned char *tu_create_inproc(struct tu_rank *ranks, int n);
void tu_destroy_all(struct tu_rank *ranks, int n);

/* Counts of this process's open fds and mappings, to prove nothing leaked. */
int tu_count_fds(void);
/* CLOCK_MONOTONIC seconds. */
double tu_now(void);
/* Sleeps ms milliseconds. */
void tu_nap_ms(int ms);
struct tu_maps {
	int memfd;             /* memfd mappings */
	uint64_t window_bytes; /* anonymous PROT_NONE bytes (address windows) */
};
struct tu_maps tu_maps(void);
/* True when no memfd mapping and no window (beyond allocator noise) was
 * added between the two snapshots; says what was left otherwise. */
int tu_maps_same(struct tu_maps before, struct tu_maps after);

/* A shell command line's exit status; 128 when it did not exit. */
int tu_shell(const char *cmd);
/* The prepared script (tests/gpu/run.sh, tests/npu/run.sh: from the source tree) with
 * OUT=out_dir and these environment assignments, its output kept in
 * out_dir/stdout; its exit status. */
int tu_run_script(const char *script, const char *out_dir, const char *assignments);
/* Lines of a JSON lines file holding needle (and also, unless NULL); -1
 * when a line is not one object. */
int tu_jsonl_count(const char *path, const char *needle, const char *also);
