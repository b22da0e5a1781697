/* SPDX-License-Identifier: Apache-2.0 */
/* The old path of backend/cuda/cuda_device.h, which tests/test_cuda_probe.c
 * still names; goes once that test includes the new path. */
#include "backend/cuda/cuda_device.h"
