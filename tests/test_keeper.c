/* SPDX-License-Identifier: Apache-2.0 */
/* A keeper (`sharedseg keep`) holds a segment between groups: the next
 * group of the same declaration maps what the last one wrote, one of
 * another declaration gets new memory and the keeper says why; stopping or
 * killing the keeper frees it; another user can neither reach it nor take
 * its name; `sharedseg ls` shows who keeps what. Faults and crowds:
 * test_keeper_faults.c. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper_wire.h"
#include "intruder.h"
#include "keeper_serve.h"
#include "keeperproc.h"
#include "listing.h"
#include "os/sock.h"
#include "stranger.h"
#include "testutil.h"


/* What the keeper lends is the group's memory, shared: its bytes are what
 * the group wrote, and a write through one loan is seen through another. */
static void lent(const char *keeper, const char *name, uint64_t size)
{
	unsigned char *a, *b;
	uint64_t got = 0;
	int fd[2];

	for (int i = 0; i < 2; i++) {
		CHECK_RC(sseg_keeper_lend(keeper, name, &fd[i], &got), 0);
		CHECK(got == size);
	}
	a = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd[0], 0);
	b = mmap(NULL, size, PROT_READ, MAP_SHARED, fd[1], 0);
	CHECK(a != MAP_FAILED && b != MAP_FAILED);
	for (uint64_t off = 0; off < size; off += 4096)
		CHECK(a[off] == tu_pattern(0, off));
	a[1] = 0x5a; /* no offset the groups check */
	CHECK(b[1] == 0x5a);
	munmap(a, size);
	munmap(b, size);
	close(fd[0]);
	close(fd[1]);
	CHECK(sseg_keeper_lend(keeper, "no-such-segment", &fd[0], &got) == -ENOENT);
	CHECK(strstr(sseg_last_error(), "holds no segment 'no-such-segment'"));
}

static void kept_between_groups(void)
{
	struct keeper_proc k;
	char name[64], *doc, *text;
	const char *seg;
	size_t len;

	tu_name(name, sizeof(name), "keep");
	keeper_start(&k, K("kt-a"));
	group(name, K("kt-a"), 8 * MIB, 1, 0, 0);  /* a new segment, written */
	hear(&k, "holds segment");
	/* No group maps it now: the keeper holds it, and ls says so. */
	doc = listing_now();
	seg = segment_of(doc, name);
	CHECK(seg && in_segment(seg, K("\"kept_by\":\"kt-a\"")) && in_segment(seg, K("\"keeper\":\"kt-a\"")) &&
	      has_pid(seg, k.pid));
	free(doc);
	text = run_ls("", &len);
	CHECK(strstr(text, K("kept by keeper kt-a (no group maps it)")) && strstr(text, "rank keeper"));
	free(text);
	lent(K("kt-a"), name, 8 * MIB);
	group(name, K("kt-a"), 8 * MIB, 0, 1, 1);  /* the same declaration: the same bytes */
	hear(&k, "given to a new owner");
	group_says(name, K("kt-a"), 16 * MIB, 0, 0, 0, /* another size: new memory */
		   K("keeper 'kt-a' kept one declared otherwise and freed it (size: kept 8 MiB, "
		     "declared now 16 MiB): allocated anew"));
	hear(&k, "freed: size: kept 8 MiB, declared now 16 MiB");
	CHECK(keeper_stop(&k, SIGTERM) == 0);
	CHECK(strstr(k.said, K("keeper 'kt-a' stops: 1 segment (16 MiB) let go")));
	doc = listing_now();
	CHECK(!segment_of(doc, name)); /* stopped: nothing left */
	free(doc);
}

static void killed_keeper_leaks_nothing(void)
{
	struct keeper_proc k;
	char name[64], *doc;

	tu_name(name, sizeof(name), "keep-kill");
	keeper_start(&k, K("kt-b"));
	group(name, K("kt-b"), 8 * MIB, 1, 0, 0);
	hear(&k, "holds segment");
	CHECK(keeper_stop(&k, SIGKILL) == 128 + SIGKILL);
	doc = listing_now();
	CHECK(!segment_of(doc, name));
	free(doc);
	{
		uint64_t size;
		int fd;

		CHECK(sseg_keeper_lend(K("kt-b"), name, &fd, &size) == -ECONNREFUSED);
		CHECK(strstr(sseg_last_error(), "does not run for this user"));
		CHECK(sseg_keeper_lend("bad name", name, &fd, &size) == -EINVAL);
	}
	/* No keeper now: a warning, and the group works on new memory. */
	group_says(name, K("kt-b"), 8 * MIB, 0, 0, 0,
		   K("keeper 'kt-b' does not run for this user (start one: sharedseg keep --name "
		     "kt-b): the segment is allocated anew and kept by no one"));
}

static void name_taken(void)
{
	struct keeper_proc k, second;
	int rc;

	keeper_start(&k, K("kt-c"));
	keeper_spawn(&second, K("kt-c"));
	hear(&second, K("a keeper named 'kt-c' runs already for this user (pid"));
	rc = tu_wait(second.pid, 10000);
	close(second.err);
	CHECK(rc == 1);
	CHECK(keeper_stop(&k, SIGTERM) == 0);
}

/* ---- another user ---- */

static char keeper_path[256];

/* As STRANGER_UID: root's keeper cannot be reached at all (its socket is
 * in root's runtime directory, mode 0700), so it hears nothing. */
static int stranger_asks(void *arg)
{
	(void)arg;
	return intruder_dial(keeper_path) < 0 && errno == EACCES ? 0 : 1;
}

/* As STRANGER_UID, through the public call: a keeper's socket is in its
 * user's runtime directory, so another user's call does not even find
 * root's keeper. */
static int stranger_lends(void *arg)
{
	uint64_t size;
	int fd;

	return sseg_keeper_lend(K("kt-d"), arg, &fd, &size) == -ECONNREFUSED ? 0 : 1;
}

static int squat_fd = -1;

/* As STRANGER_UID: takes what it can of the name root's keeper kt-e will
 * have: the abstract name keepers once listened under (which squatted
 * kept them from starting); the socket file it may not bind. */
static int stranger_squats(void *arg)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char name[128];

	(void)arg;
	snprintf(name, sizeof(name), "sharedseg-keep-0-%s", K("kt-e"));
	if (sseg_os_listen_abstract(name, 8, &squat_fd))
		return 1;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", keeper_path);
	return s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) && errno == EACCES ? 0 : 1;
}

static void other_users(void)
{
	struct stranger asker = { .act = stranger_asks }, squatter = { .act = stranger_squats };
	struct stranger lender = { .act = stranger_lends };
	struct keeper_proc k;
	char name[64];

	if (geteuid() != 0) {
		printf("keeper: other users need root, left out\n");
		return;
	}
	tu_name(name, sizeof(name), "keep-uid");
	keeper_start(&k, K("kt-d"));
	group(name, K("kt-d"), 8 * MIB, 1, 0, 0);
	hear(&k, "holds segment");
	keeper_socket_path(K("kt-d"), keeper_path, sizeof(keeper_path));
	asker.arg = name;
	stranger_start(&asker); /* it checked that it could not connect */
	stranger_stop(&asker);
	lender.arg = name;
	stranger_start(&lender);
	stranger_stop(&lender);
	CHECK(keeper_stop(&k, SIGTERM) == 0);
	CHECK(!strstr(k.said, "refused pid")); /* it never met the stranger */

	/* A squatter first: the keeper starts all the same, and keeps. */
	keeper_socket_path(K("kt-e"), keeper_path, sizeof(keeper_path));
	stranger_start(&squatter);
	keeper_start(&k, K("kt-e"));
	tu_name(name, sizeof(name), "keep-squat");
	group(name, K("kt-e"), 2 * MIB, 1, 0, 0);
	hear(&k, "holds segment");
	group(name, K("kt-e"), 2 * MIB, 0, 1, 1);
	CHECK(keeper_stop(&k, SIGTERM) == 0);
	stranger_stop(&squatter);
}

static void refused_options(void)
{
	char blob[SSEG_BLOB_SIZE];
	sseg_t *seg;
	SSEG_OPTS(o, .name = "keep-opts", .size = 2 * MIB, .world_size = 1, .keeper = "bad name");

	CHECK_RC(sseg_create(&o, &seg, blob), -EINVAL);
	CHECK_ERR_HAS("a keeper's name is made of A-Z a-z 0-9 . _ -: byte 3 is 0x20");
	o.keeper = "kt";
	o.flags = SSEG_F_READONLY_PEERS;
	CHECK_RC(sseg_create(&o, &seg, blob), -EINVAL);
	CHECK_ERR_HAS("that seal forbids the next owner's writable mapping");
	o.flags = 0;
	o.backend = SSEG_BACKEND_CUDA;
	CHECK_RC(sseg_create(&o, &seg, blob), -EOPNOTSUPP);
	CHECK_ERR_HAS("a keeper holds memfd segments, not cuda-backend memory");
	CHECK_RC(sseg_keeper_run("", NULL, NULL), -EINVAL);
}

/* What a keeper names when a declaration differs: the first KEPT row of
 * decl.h's table, but a size over the layout's hash, which it changes too
 * (a keeper holds no layout text to name a block by). */
static void named_difference(void)
{
	struct sseg_keep_decl kept = { .d = { .name = "kv", .size = 8 * MIB, .layout = 0x11,
					      .world_size = 2 },
				       .version = "0.3.0" };
	struct sseg_keep_decl asked = kept;
	char why[SSEG_KEEP_WHY];

	CHECK(!sseg_keep_differs(&kept, &asked, why, sizeof(why)));
	asked.d.size = 16 * MIB;
	asked.d.layout = 0x22;
	CHECK(sseg_keep_differs(&kept, &asked, why, sizeof(why)));
	CHECK(!strcmp(why, "size: kept 8 MiB, declared now 16 MiB"));
	asked.d.size = 8 * MIB; /* the same bytes, arranged otherwise */
	CHECK(sseg_keep_differs(&kept, &asked, why, sizeof(why)));
	CHECK(!strncmp(why, "layout: kept ", 13));
	asked.d.layout = 0x11;
	asked.d.world_size = 4;
	CHECK(sseg_keep_differs(&kept, &asked, why, sizeof(why)));
	CHECK(!strcmp(why, "world_size: kept 2, declared now 4"));
	strcpy(asked.version, "0.4.0");
	CHECK(sseg_keep_differs(&kept, &asked, why, sizeof(why)));
	CHECK(!strcmp(why, "sharedseg version: kept 0.3.0, declared now 0.4.0"));
}

int main(void)
{
	keeper_test_init();
	named_difference();
	signal(SIGPIPE, SIG_IGN);
	refused_options();
	kept_between_groups();
	killed_keeper_leaks_nothing();
	name_taken();
	other_users();
	printf("keeper: ok\n");
	return 0;
}
