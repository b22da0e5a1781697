/* SPDX-License-Identifier: Apache-2.0 */
/* What the library does not export: everything but SSEG_API. */
#ifndef SSEG_HIDDEN_H
#define SSEG_HIDDEN_H

#define SSEG_HIDDEN __attribute__((visibility("hidden")))

#endif
