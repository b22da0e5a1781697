/* SPDX-License-Identifier: Apache-2.0 */
/* The control API every fake exports for the tests, under its own prefix
 * P: FK_CONTROL_DECLARE(sseg_fake_cuda) in the fake's public header
 * declares, and FK_CONTROL_DEFINE(sseg_fake_cuda, ...) in one of its files
 * defines:
 *
 *   void P_fail(const char *entry, int nth, int count, int err);
 *     Fails calls nth .. nth+count-1 of entry (its base name, "cuMemMap"),
 *     counted from now: nth 1 is the next call; count -1 fails every call
 *     from there. entry NULL clears every scripted failure. A bad entry or
 *     count aborts.
 *   int P_configure(const char *spec);
 *     Applies a configuration string (the fake's environment syntax) over
 *     the current one; 0, or -EINVAL with nothing changed.
 *   long P_calls(const char *entry);
 *     Calls of entry since the start or the last reset (NULL: of all
 *     entries; -1 for an unknown name).
 *   int P_bugs(void);
 *     Rule violations so far (the fake's header lists them); each is also
 *     told on stderr.
 *   void P_reset(void);
 *     Zeroes the call counters and the bug counter and clears scripted
 *     failures (and whatever the fake's reset hook adds); what the fake
 *     holds stays.
 *   int P_live_handles(void), P_live_reservations(void),
 *       P_live_mappings(void), P_live_registrations(void);
 *     What the fake holds in this process: physical memory handles
 *     (created or imported), address reservations, mappings, host
 *     registrations.
 *
 * FK_CONTROL_COUNT(name, expr) defines int name(void), expr read under the
 * lock; FK_CONTROL_NTH(name, table, type, field) defines
 * int name(int i, void **p, size_t *bytes, type *field): the i-th range of
 * table in address order, its start, size and field; 0, or -ENOENT. */
#ifndef SSEG_FAKEKIT_CONTROL_H
#define SSEG_FAKEKIT_CONTROL_H

#include <stddef.h>

#include "core.h"
#include "table.h"

#define FK_CONTROL_DECLARE(P)                                        \
	void P##_fail(const char *entry, int nth, int count, int err); \
	int P##_configure(const char *spec);                           \
	long P##_calls(const char *entry);                             \
	int P##_bugs(void);                                            \
	void P##_reset(void);                                          \
	int P##_live_handles(void);                                    \
	int P##_live_reservations(void);                               \
	int P##_live_mappings(void);                                   \
	int P##_live_registrations(void)

/* handles ... registrations: the fake's tables (arrays of slots, table.h). */
#define FK_CONTROL_DEFINE(P, handles, reservations, mappings, registrations) \
	FK_API void P##_fail(const char *entry, int nth, int count, int err)  \
	{                                                                    \
		fk_control_fail(entry, nth, count, err);                     \
	}                                                                    \
	FK_API int P##_configure(const char *spec)                           \
	{                                                                    \
		return fk_control_configure(spec);                           \
	}                                                                    \
	FK_API long P##_calls(const char *entry)                             \
	{                                                                    \
		return fk_control_calls(entry);                              \
	}                                                                    \
	FK_API void P##_reset(void)                                          \
	{                                                                    \
		fk_control_reset();                                          \
	}                                                                    \
	FK_CONTROL_COUNT(P##_bugs, fk_bugs())                                \
	FK_CONTROL_COUNT(P##_live_handles, fk_live(FK_TABLE(handles)))       \
	FK_CONTROL_COUNT(P##_live_reservations, fk_live(FK_TABLE(reservations))) \
	FK_CONTROL_COUNT(P##_live_mappings, fk_live(FK_TABLE(mappings)))     \
	FK_CONTROL_COUNT(P##_live_registrations, fk_live(FK_TABLE(registrations)))

#define FK_CONTROL_COUNT(name, expr) \
	FK_API int name(void)        \
	{                            \
		int count_;          \
		fk_lock();           \
		count_ = (expr);     \
		fk_unlock();         \
		return count_;       \
	}

#define FK_CONTROL_NTH(name, table, type, field)                                \
	FK_API int name(int i, void **p, size_t *bytes, type *field)            \
	{                                                                       \
		__typeof__((table)[0]) slot_;                                   \
		int rc_ = fk_control_nth(FK_TABLE(table), i, &slot_);           \
		if (rc_ == 0) {                                                 \
			*p = (void *)slot_.start;                               \
			*bytes = slot_.size;                                    \
			*field = (type)slot_.field;                             \
		}                                                               \
		return rc_;                                                     \
	}

/* What the definitions call. */
void fk_control_fail(const char *entry, int nth, int count, int err);
int fk_control_configure(const char *spec);
long fk_control_calls(const char *entry);
void fk_control_reset(void);
/* Copies the i-th slot of t in address order into slot: 0, or -ENOENT. */
int fk_control_nth(struct fk_table t, int i, void *slot);
/* The sum of n counts (references per device). */
int fk_sum(const int *counts, int n);

#endif
