/* SPDX-License-Identifier: Apache-2.0 */
/* A test program's cases, told by name: `test_fake_acl` runs them all,
 * `test_fake_acl "trust list"` that one. */
#ifndef SSEG_TU_RUNCASES_H
#define SSEG_TU_RUNCASES_H

/* How long one case may run before it counts as failed ($SSEG_CASE_TIMEOUT_MS
 * where set). */
#define TU_CASE_TIMEOUT_MS 60000

struct tu_case {
	const char *name;
	int (*fn)(void *arg); /* runs in a child of its own; returns its exit status */
	void *arg;
	int want; /* the status it must end with: 0, or 128 + a signal it must die of */
};

/* Runs the cases named in argv[1..], or every case of the table (ended by
 * an entry whose name is NULL) when none is named, each in a fresh child;
 * prints "ok NAME" for each that ended as it must and says how each other
 * one ended. Returns 0 when every case run passed, 1 when one failed or
 * when a name is no case of the table (the sentence lists the cases; then
 * none runs). */
int tu_run_cases(int argc, char **argv, const struct tu_case *cases);

#endif
