/* SPDX-License-Identifier: Apache-2.0 */
/* The skeleton of a device driver's host registration (struct
 * sseg_hostreg_ops): the state per device, the device's context around
 * every call, and the forked child that lets go without a driver call
 * (registrations belong to the process that made them, and drivers do not
 * work in a forked child). A driver fills struct sseg_devreg_driver; its
 * hostreg ops take the sseg_devreg_* ones below and add register_range,
 * device_pointer and what else is its own. */
#ifndef SSEG_BACKEND_DEVREG_H
#define SSEG_BACKEND_DEVREG_H

#include <sys/types.h>

#include "backend/backend.h"

/* The skeleton's part of a driver's state, its first member. */
struct sseg_devreg {
	const struct sseg_devreg_driver *drv;
	int ordinal;
	void *ctx;  /* the device's context */
	pid_t pid;  /* the process whose registrations these are */
};

struct sseg_devreg_driver {
	size_t state_size; /* the driver's state, struct sseg_devreg first */
	/* Validates reg->ordinal and takes the device: sets reg->ctx. */
	int (*open)(struct sseg_devreg *reg);
	int (*enter)(struct sseg_devreg *reg, void **saved);
	void (*leave)(struct sseg_devreg *reg, void *saved);
	int (*unregister_range)(struct sseg_devreg *reg, void *addr);
	/* Lets go of what open took. */
	int (*close)(struct sseg_devreg *reg);
};

/* The sseg_hostreg_ops the skeleton fills in a driver's table. */
#define SSEG_DEVREG_OPS                                                           \
	.enter = sseg_devreg_enter, .leave = sseg_devreg_leave,                    \
	.unregister_range = sseg_devreg_unregister, .close = sseg_devreg_close

/* sseg_hostreg_ops.open for drv's driver. */
SSEG_HIDDEN int sseg_devreg_open(const struct sseg_devreg_driver *drv, int ordinal, void **dev);
/* True in a child forked after open: no driver call. */
SSEG_HIDDEN bool sseg_devreg_forked(const struct sseg_devreg *reg);
SSEG_HIDDEN int sseg_devreg_enter(void *dev, void **saved);
SSEG_HIDDEN void sseg_devreg_leave(void *dev, void *saved);
SSEG_HIDDEN int sseg_devreg_unregister(void *dev, void *addr);
SSEG_HIDDEN int sseg_devreg_close(void *dev);

#endif
