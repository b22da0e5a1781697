/* One NVLink domain over two (simulated) hosts: a CUDA fabric handle lets
 * ranks on host B map host A's owner's allocation, while host A's own peer
 * still collects over the fd channel. An fd-handle segment refuses the
 * same group: an fd never leaves its host. */
#include <string.h>

#include "fakeutil.h"
#include "testutil.h"

#define SZ (4u << 20)

static void ranks(struct tu_rank *r, int device)
{
	static const char *const hosts[] = { "host-a", "host-a", "host-b", "host-b" };

	memset(r, 0, sizeof(*r) * 4);
	for (int i = 0; i < 4; i++) {
		r[i].opts = (struct sseg_opts){ .sz = sizeof(struct sseg_opts), .name = "fabric",
						.size = SZ, .world_size = 4, .rank = i,
						.backend = SSEG_BACKEND_CUDA, .device = device,
						.timeout_ms = 5000 };
		r[i].host = hosts[i];
	}
}

int main(void)
{
	struct sseg_info info = { .sz = sizeof(info) };
	struct tu_fake fake;
	struct tu_rank r[4];
	unsigned char *p[4];

	tu_fake_load("devices=2;numa=0,0;fabric=1;fabric_works=1", &fake);
	ranks(r, 0);
	CHECK(tu_run_inproc(r, 4) == 0);
	for (int i = 0; i < 4; i++) {
		p[i] = sseg_base(r[i].seg);
		CHECK_RC(sseg_info(r[i].seg, &info), 0);
		CHECK(!strcmp(info.handle_type, "cuda-fabric") && info.owner_rank == 0);
	}
	p[3][100] = 0x33;
	CHECK(p[0][100] == 0x33 && p[1][100] == 0x33 && p[2][100] == 0x33);
	tu_destroy_all(r, 4);
	CHECK(tu_fake_clean(&fake));

	/* Device 1 is probed after fabric stopped working: fd handles, which
	 * cannot reach host B. */
	CHECK(fake.configure("fabric_works=0") == 0);
	ranks(r, 1);
	CHECK(tu_run_inproc(r, 4) == 4);
	CHECK(strstr(r[2].error, "only a fabric handle crosses hosts"));
	tu_destroy_all(r, 4);
	CHECK(tu_fake_clean(&fake));
	printf("cuda_fabric_hosts: ok\n");
	return 0;
}
