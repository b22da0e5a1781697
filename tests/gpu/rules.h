/* SPDX-License-Identifier: Apache-2.0 */
/* The "rule" lines of gpu_check env. */
#ifndef SSEG_GPU_RULES_H
#define SSEG_GPU_RULES_H

/* Every rule line, with device 0's context current; helper is the
 * importer's socket. */
void rules_check(int helper);

#endif
