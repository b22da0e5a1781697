/* SPDX-License-Identifier: Apache-2.0 */
/* fork() after segments exist: the driver does not work in the child (the
 * fake answers NOT_INITIALIZED there, as the real one does), so neither the
 * core's atfork handler (which asks each backend to forget what the child
 * cannot keep) nor anything the child does with the inherited segments
 * (sseg_info, sseg_destroy) may call it. The driver's handles, mappings,
 * registrations and contexts stay the parent's, which tears down cleanly. */
#include "fakeutil.h"
#include "forkcheck.h"
#include "testutil.h"

static struct tu_fake fake;

int main(void)
{
	tu_fake_load("devices=1;numa=0", &fake);
	tu_fork_after_segments(&(struct tu_fork_check){
		.prefix = "fork",
		.device = SSEG_BACKEND_CUDA,
		.calls = fake.calls,
		.live_registrations = fake.live_registrations,
		.live_mappings = fake.live_mappings,
	});
	CHECK(tu_fake_clean(&fake));
	printf("cuda_fork: ok\n");
	return 0;
}
