/* SPDX-License-Identifier: Apache-2.0 */
/* The host-registration skeleton (devreg.h). */
#include <stdlib.h>
#include <unistd.h>

#include "backend/devreg.h"

int sseg_devreg_open(const struct sseg_devreg_driver *drv, int ordinal, void **dev)
{
	struct sseg_devreg *reg = calloc(1, drv->state_size);
	int rc;

	if (!reg)
		return sseg_err(-ENOMEM, "out of memory");
	reg->drv = drv;
	reg->ordinal = ordinal;
	reg->pid = getpid();
	rc = drv->open(reg);
	if (rc) {
		free(reg);
		return rc;
	}
	*dev = reg;
	return 0;
}

bool sseg_devreg_forked(const struct sseg_devreg *reg)
{
	return getpid() != reg->pid;
}

int sseg_devreg_enter(void *dev, void **saved)
{
	struct sseg_devreg *reg = dev;

	*saved = NULL;
	return sseg_devreg_forked(reg) ? 0 : reg->drv->enter(reg, saved);
}

void sseg_devreg_leave(void *dev, void *saved)
{
	struct sseg_devreg *reg = dev;

	if (!sseg_devreg_forked(reg))
		reg->drv->leave(reg, saved);
}

int sseg_devreg_unregister(void *dev, void *addr)
{
	struct sseg_devreg *reg = dev;

	return sseg_devreg_forked(reg) ? 0 : reg->drv->unregister_range(reg, addr);
}

int sseg_devreg_close(void *dev)
{
	struct sseg_devreg *reg = dev;
	int rc = sseg_devreg_forked(reg) ? 0 : reg->drv->close(reg);

	if (!rc)
		free(reg);
	return rc;
}
