/* SPDX-License-Identifier: Apache-2.0 */
/* The host pool kept by a keeper (`sharedseg keep`): a new pool is left
 * with it, an open finds it there when no process has it open, and while
 * one does the keeper frees it for nobody. Apart from test_pool.c, which
 * the aarch64 leg runs under qemu-user: the keeper's process is the
 * tool's, which that leg does not start (as test_keeper). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keeperproc.h"
#include "os/named.h"
#include "poolutil.h"
#include "runcases.h"
#include "testutil.h"

#define CHUNK 4096
#define MEANING "model=tiny-mla;dtype=bfloat16;block=16;tp=1;seed=0"

static int open_kept(const char *name, const char *keeper, sseg_pool_t **p)
{
	SSEG_POOL_OPTS(o, .name = name, .meaning = MEANING, .chunk_size = CHUNK, .chunks = 4,
		       .pages = SSEG_PAGES_BASE, .keeper = keeper, .timeout_ms = 10000);

	return sseg_pool_open(&o, p);
}

static int kept_by_the_keeper(void *arg)
{
	struct keeper_proc k;
	struct sseg_pool_info in = { .sz = sizeof(in) };
	uint8_t keys[2 * SSEG_POOL_KEY_SIZE];
	uint32_t got[2];
	char name[64];
	sseg_pool_t *p;

	(void)arg;
	keeper_test_init();
	tu_name(name, sizeof(name), "kept");
	keeper_start(&k, K("kt-pool"));
	CHECK_RC(open_kept(name, K("kt-pool"), &p), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.created == 1 && in.kept == 1);
	CHECK_RC(pu_store(p, 0, 2), 2);
	sseg_pool_close(p); /* nobody has it open now: the keeper holds it */
	CHECK_RC(open_kept(name, K("kt-pool"), &p), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.created == 0 && in.kept == 1 && in.used == 2);
	pu_keys(0, 2, keys);
	CHECK_RC(sseg_pool_get(p, keys, 2, 0, got), 2);
	CHECK(pu_holds(sseg_pool_chunk(p, got[0]), CHUNK, 0));
	CHECK(pu_holds(sseg_pool_chunk(p, got[1]), CHUNK, 1));
	/* while it is open, the keeper frees it for no segment of its name */
	{
		int fd;
		uint64_t size;

		CHECK_RC(sseg_keeper_lend(K("kt-pool"), name, &fd, &size), 0);
		CHECK_RC(sseg_keeper_in_use(fd), 1);
		close(fd);
	}
	sseg_pool_close(p);
	/* another meaning is refused, kept or not */
	{
		SSEG_POOL_OPTS(o, .name = name, .meaning = "model=other", .keeper = K("kt-pool"));

		CHECK_RC(sseg_pool_open(&o, &p), -EINVAL);
		CHECK_ERR_HAS("means something else");
	}
	CHECK_RC(keeper_stop(&k, SIGTERM), 0);
	/* the keeper gone, nobody has it: a new, empty pool */
	CHECK_RC(open_kept(name, NULL, &p), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.created == 1 && in.used == 0);
	sseg_pool_close(p);
	return 0;
}

/* Kept whoever closes it last: an open that finds the pool in another
 * process says it is kept when the keeper it names holds that very pool,
 * and leaves it with the keeper when the keeper holds none of its name (a
 * keeper restarted since the pool was made). */
static int kept_whoever_closes_last(void *arg)
{
	struct keeper_proc k;
	struct sseg_pool_info in = { .sz = sizeof(in) };
	char name[64];
	sseg_pool_t *a, *b;

	(void)arg;
	keeper_test_init();
	tu_name(name, sizeof(name), "last");
	keeper_start(&k, K("kt-last"));
	CHECK_RC(open_kept(name, K("kt-last"), &a), 0);
	CHECK_RC(pu_store(a, 0, 2), 2);
	CHECK_RC(open_kept(name, K("kt-last"), &b), 0);
	CHECK_RC(sseg_pool_info(b, &in), 0);
	CHECK(in.created == 0 && in.kept == 1);
	sseg_pool_close(a); /* the maker first: the other is the last to close */
	sseg_pool_close(b);
	CHECK_RC(open_kept(name, K("kt-last"), &a), 0);
	CHECK_RC(sseg_pool_info(a, &in), 0);
	CHECK(in.created == 0 && in.kept == 1 && in.used == 2);

	/* the keeper restarted while the pool is open: the next open leaves it
	 * with the new one */
	CHECK_RC(keeper_stop(&k, SIGTERM), 0);
	keeper_start(&k, K("kt-last"));
	CHECK_RC(open_kept(name, K("kt-last"), &b), 0);
	CHECK_RC(sseg_pool_info(b, &in), 0);
	CHECK(in.created == 0 && in.kept == 1);
	sseg_pool_close(a);
	sseg_pool_close(b);
	CHECK_RC(open_kept(name, K("kt-last"), &a), 0);
	CHECK_RC(sseg_pool_info(a, &in), 0);
	CHECK(in.created == 0 && in.kept == 1 && in.used == 2);
	sseg_pool_close(a);
	CHECK_RC(keeper_stop(&k, SIGTERM), 0);
	return 0;
}

/* A keeper that does not answer (stopped) costs an open a share of its
 * timeout, not 10 s a question: the open makes a pool of its own, kept
 * by no one, and what the keeper holds stays as it was for the opens after
 * it answers again. */
static int a_stopped_keeper(void *arg)
{
	struct keeper_proc k;
	struct sseg_pool_info in = { .sz = sizeof(in) };
	struct rank_job heard = { .log = "" };
	char name[64];
	sseg_pool_t *p;
	double t0;

	(void)arg;
	keeper_test_init();
	tu_name(name, sizeof(name), "stopped");
	keeper_start(&k, K("kt-stop"));
	CHECK_RC(open_kept(name, K("kt-stop"), &p), 0);
	CHECK_RC(pu_store(p, 0, 2), 2);
	sseg_pool_close(p);
	CHECK(kill(k.pid, SIGSTOP) == 0);
	sseg_set_log(keep_log, &heard);
	{
		SSEG_POOL_OPTS(o, .name = name, .meaning = MEANING, .chunk_size = CHUNK,
			       .chunks = 4, .pages = SSEG_PAGES_BASE, .keeper = K("kt-stop"),
			       .timeout_ms = 1000);

		t0 = tu_now();
		CHECK_RC(sseg_pool_open(&o, &p), 0);
	}
	/* half of the 1 s timeout for the keeper (before, 10 s to lend and
	 * 10 s more to leave): a bound, with room for a loaded machine */
	CHECK(tu_now() - t0 < 8.0);
	sseg_set_log(NULL, NULL);
	CHECK(strstr(heard.log, "did not answer") != NULL);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.created == 1 && in.kept == 0 && in.used == 0);
	sseg_pool_close(p);
	CHECK(kill(k.pid, SIGCONT) == 0);
	CHECK_RC(open_kept(name, K("kt-stop"), &p), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.created == 0 && in.kept == 1 && in.used == 2);
	sseg_pool_close(p);
	CHECK_RC(keeper_stop(&k, SIGTERM), 0);
	return 0;
}

/* An observer naming a keeper that holds none of the pool's name (as `sharedseg
 * ls` asks every keeper on the host) leaves the pool with it no more than it
 * keeps it findable: the keeper still holds nothing of that name. */
static int an_observer_leaves_nothing_with_a_keeper(void *arg)
{
	struct keeper_proc k;
	char name[64];
	sseg_pool_t *p, *o;
	int fd;
	uint64_t size;

	(void)arg;
	keeper_test_init();
	tu_name(name, sizeof(name), "observer");
	keeper_start(&k, K("kt-obs"));
	CHECK_RC(open_kept(name, NULL, &p), 0); /* a live process's pool, kept by no one */
	{
		SSEG_POOL_OPTS(oo, .name = name, .flags = SSEG_POOL_OBSERVE, .keeper = K("kt-obs"),
			       .timeout_ms = 10000);

		CHECK_RC(sseg_pool_open(&oo, &o), 0);
	}
	CHECK_RC(sseg_keeper_lend(K("kt-obs"), name, &fd, &size), -ENOENT);
	sseg_pool_close(o);
	sseg_pool_close(p);
	CHECK_RC(sseg_keeper_lend(K("kt-obs"), name, &fd, &size), -ENOENT);
	CHECK_RC(keeper_stop(&k, SIGTERM), 0);
	return 0;
}

/* A pool the keeper alone holds stays listed (its record file, by which a
 * listing finds kept pools) after an open that names no keeper finds
 * nothing: that open cannot tell whether a keeper holds it. Before, it
 * removed the record file, and a listing running beside it missed the
 * pool. */
static int a_kept_pool_stays_listed(void *arg)
{
	struct keeper_proc k;
	struct sseg_pool_info in = { .sz = sizeof(in) };
	char name[64], dir[SSEG_OS_NAMED_PATH], path[SSEG_OS_NAMED_PATH + 80];
	sseg_pool_t *p;

	(void)arg;
	keeper_test_init();
	tu_name(name, sizeof(name), "listed");
	keeper_start(&k, K("kt-list"));
	CHECK_RC(open_kept(name, K("kt-list"), &p), 0);
	sseg_pool_close(p);
	CHECK_RC(sseg_os_rundir(dir, sizeof(dir)), 0);
	snprintf(path, sizeof(path), "%s/pool.%s", dir, name);
	CHECK(access(path, F_OK) == 0);
	{
		SSEG_POOL_OPTS(o, .name = name, .flags = SSEG_POOL_EXISTING);

		CHECK_RC(sseg_pool_open(&o, &p), -ENOENT);
	}
	CHECK(access(path, F_OK) == 0);
	CHECK_RC(open_kept(name, K("kt-list"), &p), 0);
	CHECK_RC(sseg_pool_info(p, &in), 0);
	CHECK(in.created == 0 && in.kept == 1);
	sseg_pool_close(p);
	CHECK_RC(keeper_stop(&k, SIGTERM), 0);
	/* a name nothing ever recorded leaves no file behind */
	tu_name(name, sizeof(name), "never");
	snprintf(path, sizeof(path), "%s/pool.%s", dir, name);
	{
		SSEG_POOL_OPTS(o, .name = name, .flags = SSEG_POOL_EXISTING);

		CHECK_RC(sseg_pool_open(&o, &p), -ENOENT);
	}
	CHECK(access(path, F_OK) != 0);
	return 0;
}

static const struct tu_case cases[] = {
	{ "kept by the keeper", kept_by_the_keeper, NULL, 0 },
	{ "kept whoever closes last", kept_whoever_closes_last, NULL, 0 },
	{ "a stopped keeper costs a share of the timeout", a_stopped_keeper, NULL, 0 },
	{ "an observer leaves nothing with a keeper", an_observer_leaves_nothing_with_a_keeper,
	  NULL, 0 },
	{ "a kept pool stays listed", a_kept_pool_stays_listed, NULL, 0 },
	{ NULL, NULL, NULL, 0 },
};

int main(int argc, char **argv)
{
	return tu_run_cases(argc, argv, cases);
}
