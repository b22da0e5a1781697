/* SPDX-License-Identifier: Apache-2.0 */
/* The fake driver's state and what every call passes first (the toolkit's
 * lock and script, then the driver's own rules on fork and cuInit), and
 * the control API the tests reach with dlsym. */
#include <errno.h>
#include <unistd.h>

#include "fake_cuda.h"
#include "fake/kit/control.h"
#include "sseg_fake_cuda.h"

struct fake_state fake;

static const unsigned char entry_needs_init[] = {
#define FAKE_INIT(name, version, init) init,
	FAKE_ENTRIES(FAKE_INIT)
#undef FAKE_INIT
};

/* CUDA does not survive fork: in a child of a process that initialized
 * it, cuInit and the calls that need it answer NOT_INITIALIZED (reported
 * for cuInit, cuDeviceGetCount and cuCtxSetCurrent; the CUDA guidelines
 * call any use before exec undefined). Version, error names and symbol
 * lookup need no initialization and keep working. */
static int forked_child(enum fake_entry entry)
{
	return fake.initialized && getpid() != fake.init_pid && !fake.cfg.fork_works &&
	       (entry_needs_init[entry] || entry == FE_cuInit);
}

CUresult fake_enter(enum fake_entry entry)
{
	CUresult rc = (CUresult)fk_enter(entry);

	if (rc == CUDA_SUCCESS && forked_child(entry))
		rc = CUDA_ERROR_NOT_INITIALIZED;
	if (rc == CUDA_SUCCESS && entry_needs_init[entry] && !fake.initialized)
		rc = CUDA_ERROR_NOT_INITIALIZED;
	return rc;
}

CUresult fake_leave(CUresult rc)
{
	fk_unlock();
	return rc;
}

/* ---- the control API, for tests that reach this instance with dlopen ---- */

FK_CONTROL_DEFINE(sseg_fake_cuda, fake.handles, fake.reservations, fake.mappings,
		  fake.registrations)
FK_CONTROL_COUNT(sseg_fake_cuda_live_contexts, fk_sum(fake.ctx_refs, FAKE_MAX_DEVICES))
/* A registration's CU_MEMHOSTREGISTER_* flags. */
FK_CONTROL_NTH(sseg_fake_cuda_registration, fake.registrations, unsigned, flags)

FK_API int sseg_fake_cuda_access(int device)
{
	int access;

	if (device < 0 || device >= FAKE_MAX_DEVICES)
		return 0;
	fk_lock();
	access = fake.access[device];
	fk_unlock();
	return access;
}

/* The devices granted access to the mapping that holds p, and the node
 * its last HOST_NUMA entry named. */
FK_API int sseg_fake_cuda_granted(const void *p, unsigned *devices, int *host_node)
{
	const struct fake_range *m;

	fk_lock();
	m = fk_slot_holding(FK_TABLE(fake.mappings), (uintptr_t)p);
	if (m) {
		*devices = m->granted;
		if (host_node)
			*host_node = m->host_node;
	}
	fk_unlock();
	return m ? 0 : -ENOENT;
}
