/* SPDX-License-Identifier: Apache-2.0 */
/* A second process that imports the handles env exports. */
#ifndef SSEG_GPU_IMPORTER_H
#define SSEG_GPU_IMPORTER_H

#include <sys/types.h>

#include "driver.h"

/* Forks the importer (before this process loads the driver): its socket,
 * or -1. */
int helper_start(pid_t *pid);
/* What the importer's cuMemImportFromShareableHandle answers for handle
 * (an int fd, or a CUmemFabricHandle) on device. */
CUresult other_process_imports(int helper, int type, int device, const void *handle);

#endif
