/* SPDX-License-Identifier: Apache-2.0 */
/* gpu_check env. */
#ifndef SSEG_GPU_ENV_H
#define SSEG_GPU_ENV_H

/* The exit status: 0, or 1 without a driver. */
int env_main(void);

#endif
