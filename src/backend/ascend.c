/* The ascend backend's place in the table until its driver lands: every
 * op answers that this build cannot serve it. */
#include <stdio.h>

#include "backend/backend.h"

static int ascend_probe(struct sseg_probe_backend *facts)
{
	facts->host_register = 0;
	snprintf(facts->reason, sizeof(facts->reason),
		 "not available: this build of sharedseg has no driver for it yet");
	return -EOPNOTSUPP;
}

const struct sseg_backend_ops sseg_ascend_ops = {
	.kind = SSEG_BACKEND_ASCEND,
	.name = "ascend",
	.caps = SSEG_CAP_PINNED | SSEG_CAP_DEVICES,
	.probe = ascend_probe,
};
