/* SPDX-License-Identifier: Apache-2.0 */
/* Scripted failures: calls from..until (until -1: forever) of an entry
 * point fail with an error. Callers hold the lock. */
#ifndef SSEG_FAKEKIT_SCRIPT_H
#define SSEG_FAKEKIT_SCRIPT_H

#define FK_MAX_RULES 64

/* 0, or -EINVAL for an unknown entry (< 0), a call before the first, or a
 * full script. */
int fk_script_add(int entry, long from, long until, long err);
/* "cuMemMap:2:CUDA_ERROR_OUT_OF_MEMORY,cuMemUnmap:1-:999": entry:calls:error,
 * calls N, N- (from N on) or N-M, the error a name or a number. 0, or
 * -EINVAL (rules before the bad one stay). */
int fk_script_parse(const char *spec);
/* The error of the first rule that covers call number call of entry; 0. */
long fk_script_match(int entry, long call);
void fk_script_clear(void);

#endif
