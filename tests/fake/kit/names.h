/* SPDX-License-Identifier: Apache-2.0 */
/* The names a fake's scripts and error calls use: its entry points and
 * its error codes (fk_driver's tables). */
#ifndef SSEG_FAKEKIT_NAMES_H
#define SSEG_FAKEKIT_NAMES_H

/* The entry's index, or -1. */
int fk_entry_by_name(const char *name);
const char *fk_entry_name(int entry);
/* The error's name, or NULL. */
const char *fk_error_name(long code);
/* A name from the table or any decimal number from 1 to the driver's
 * max_error: 0, or -EINVAL. */
int fk_error_by_name(const char *text, long *code);

#endif
