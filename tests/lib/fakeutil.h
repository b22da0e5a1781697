/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of the CUDA paths: load the fake driver through the library's real
 * loading path and reach its control functions. */
#ifndef SSEG_FAKEUTIL_H
#define SSEG_FAKEUTIL_H

#include "fake/cuda/sseg_fake_cuda.h"
#include "sharedseg.h"

struct tu_fake {
	__typeof__(sseg_fake_cuda_fail) *fail;
	__typeof__(sseg_fake_cuda_configure) *configure;
	__typeof__(sseg_fake_cuda_calls) *calls;
	__typeof__(sseg_fake_cuda_live_handles) *live_handles;
	__typeof__(sseg_fake_cuda_live_reservations) *live_reservations;
	__typeof__(sseg_fake_cuda_live_mappings) *live_mappings;
	__typeof__(sseg_fake_cuda_live_registrations) *live_registrations;
	__typeof__(sseg_fake_cuda_live_contexts) *live_contexts;
	__typeof__(sseg_fake_cuda_bugs) *bugs;
	__typeof__(sseg_fake_cuda_registration) *registration;
	__typeof__(sseg_fake_cuda_granted) *granted;
	__typeof__(sseg_fake_cuda_reset) *reset;
	/* The driver's own cuCtxGetCurrent: which context this thread has. */
	int (*ctx_get_current)(void **ctx);
};

/* Points SHAREDSEG_CUDA_LIBRARY at the fake with this configuration (before the
 * library's first use of CUDA), loads it through sseg_check_support() and fills
 * the control table. Exits 1 when the fake is missing. */
void tu_fake_load(const char *config, struct tu_fake *fake);
/* Nothing alive in the driver and no rule broken. */
int tu_fake_clean(const struct tu_fake *fake);
/* A one-rank segment: created, completed, described into info, destroyed.
 * Returns create's result (complete and destroy must succeed). */
int tu_solo(const struct sseg_opts *opts, struct sseg_info *info);

#endif
