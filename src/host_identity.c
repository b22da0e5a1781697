/* SPDX-License-Identifier: Apache-2.0 */
/* Host identity for callers that pick one owner per host. */
#include <string.h>

#include "host_identity.h"

static __thread char host_override[16];
static __thread bool host_overridden;

void sseg_test_host(const char *boot)
{
	host_overridden = boot != NULL;
	memset(host_override, 0, sizeof(host_override));
	if (boot)
		memcpy(host_override, boot, strnlen(boot, sizeof(host_override)));
}

int sseg_host_id(struct sseg_os_host_id *id)
{
	int rc = sseg_os_host_id(id);

	if (!rc && host_overridden)
		memcpy(id->boot_id, host_override, sizeof(id->boot_id));
	return rc;
}

int sseg_host_identity(void *id)
{
	struct sseg_os_host_id h;
	uint8_t *p = id;
	int rc;

	if (!id)
		return sseg_err(-EINVAL, "sseg_host_identity needs a buffer");
	rc = sseg_host_id(&h);
	if (rc)
		return rc;
	memset(p, 0, SSEG_HOST_ID_SIZE);
	memcpy(p, h.boot_id, 16);
	for (int i = 0; i < 8; i++)
		p[16 + i] = (uint8_t)(h.netns >> (8 * i));
	for (int i = 0; i < 4; i++)
		p[24 + i] = (uint8_t)(h.uid >> (8 * i));
	return 0;
}

int sseg_host_owner(const void *ids, int world_size, int rank)
{
	const uint8_t *p = ids;

	if (!ids || world_size < 1 || rank < 0 || rank >= world_size)
		return sseg_err(-EINVAL, "sseg_host_owner: rank %d outside a group of %d", rank,
				world_size);
	for (int r = 0; r <= rank; r++)
		if (!memcmp(p + (size_t)r * SSEG_HOST_ID_SIZE, p + (size_t)rank * SSEG_HOST_ID_SIZE,
			    SSEG_HOST_ID_SIZE))
			return r;
	return rank; /* not reached: rank matches itself */
}
