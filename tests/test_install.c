/* SPDX-License-Identifier: Apache-2.0 */
/* Installs the build into a temporary prefix and builds a program against
 * it through pkg-config and through CMake's find_package(sharedseg), as a
 * user would; checks the exported symbols and the SONAME. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

static const char *program =
	"#include <sharedseg.h>\n"
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"int main(void) {\n"
	"  SSEG_OPTS(o, .name = \"installed\", .size = 1 << 20, .world_size = 1);\n"
	"  unsigned char blob[SSEG_BLOB_SIZE]; sseg_t *s;\n"
	"  if (sseg_create(&o, &s, blob) || sseg_complete(s, blob)) {\n"
	"    fprintf(stderr, \"%s\\n\", sseg_last_error()); return 1; }\n"
	"  memset(sseg_base(s), 1, 1 << 20);\n"
	"  if (sseg_destroy(s)) return 1;\n"
	"  puts(\"installed-ok\"); return 0; }\n";

static int run(const char *cmd)
{
	int rc;

	fprintf(stderr, "+ %s\n", cmd);
	rc = system(cmd);
	return rc == -1 ? -1 : WEXITSTATUS(rc);
}

int main(void)
{
	const char *build = getenv("SSEG_BUILD_DIR");
	char dir[] = "/tmp/sseg-install-XXXXXX", cmd[2048], path[512];
	FILE *f;

	if (!build) {
		fprintf(stderr, "SSEG_BUILD_DIR is not set (run through ctest)\n");
		return 1;
	}
	if (run("command -v pkg-config >/dev/null")) {
		fprintf(stderr, "pkg-config is missing: make deps installs it\n");
		return 1;
	}
	CHECK(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd), "cmake --install %s --prefix %s/prefix >/dev/null", build, dir);
	CHECK(run(cmd) == 0);
	snprintf(path, sizeof(path), "%s/prog.c", dir);
	f = fopen(path, "w");
	CHECK(f && fputs(program, f) >= 0 && fclose(f) == 0);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && PKG_CONFIG_PATH=$(ls -d %s/prefix/lib*/pkgconfig | head -1) && "
		 "export PKG_CONFIG_PATH && "
		 "%s %s -Wall -Werror prog.c -o prog $(pkg-config --cflags --libs sharedseg) && "
		 "LD_LIBRARY_PATH=$(pkg-config --variable=libdir sharedseg) ./prog | grep -q installed-ok",
		 dir, dir, getenv("SSEG_CC") ? getenv("SSEG_CC") : "cc",
		 getenv("SSEG_CFLAGS") ? getenv("SSEG_CFLAGS") : "");
	CHECK(run(cmd) == 0);
	/* Only the API leaves the library, under a fixed SONAME. */
	snprintf(cmd, sizeof(cmd),
		 "lib=$(ls %s/prefix/lib*/libsharedseg.so.0 | head -1) && "
		 "objdump -p $lib | grep -q 'SONAME *libsharedseg.so.0' && "
		 "! nm -D --defined-only $lib | awk '{print $3}' | grep -v '^sseg_' | "
		 "grep -v '^SHAREDSEG_0[.][0-9]*$' | grep . && "
		 "! nm -D --defined-only $lib | grep -q -e sseg_err -e sseg_test_ -e sseg_os_",
		 dir);
	CHECK(run(cmd) == 0);
	/* find_package(sharedseg) from a CMake project, against the shared
	 * and the static target. */
	snprintf(path, sizeof(path), "%s/CMakeLists.txt", dir);
	f = fopen(path, "w");
	CHECK(f && fputs("cmake_minimum_required(VERSION 3.16)\n"
			 "project(user C)\n"
			 "find_package(sharedseg 0.2 REQUIRED)\n"
			 "add_executable(prog_shared prog.c)\n"
			 "target_link_libraries(prog_shared PRIVATE sharedseg::sharedseg)\n"
			 "add_executable(prog_static prog.c)\n"
			 "target_link_libraries(prog_static PRIVATE sharedseg::static)\n", f) >= 0 &&
	      fclose(f) == 0);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && CC=%s cmake -S . -B user-build -DCMAKE_PREFIX_PATH=%s/prefix "
		 "-DCMAKE_C_FLAGS='%s' >/dev/null && cmake --build user-build >/dev/null && "
		 "./user-build/prog_static | grep -q installed-ok && "
		 "LD_LIBRARY_PATH=$(ls -d %s/prefix/lib* | head -1) ./user-build/prog_shared | "
		 "grep -q installed-ok",
		 dir, getenv("SSEG_CC") ? getenv("SSEG_CC") : "cc", dir,
		 getenv("SSEG_CFLAGS") ? getenv("SSEG_CFLAGS") : "", dir);
	CHECK(run(cmd) == 0);
	/* The installed CLI runs, and its man page names every command its
	 * --help lists. */
	snprintf(cmd, sizeof(cmd), "%s/prefix/bin/sharedseg --help >/dev/null", dir);
	CHECK(run(cmd) == 0);
	snprintf(cmd, sizeof(cmd),
		 "page=%s/prefix/share/man/man1/sharedseg.1 && test -s $page && "
		 "cmds=$(%s/prefix/bin/sharedseg --help | "
		 "awk '/^commands:/{on=1;next} on&&/^$/{on=0} on{print $1}') && "
		 "test -n \"$cmds\" && for c in $cmds; do grep -q \"$c\" $page || "
		 "{ echo \"sharedseg.1 lacks $c\" >&2; exit 1; }; "
		 "[ $c = help ] || for o in $(%s/prefix/bin/sharedseg $c --help | "
		 "grep -o -- '--[a-z][a-z-]*' | sort -u); do grep -q -- \"$o\" $page || "
		 "{ echo \"sharedseg.1 lacks $c $o\" >&2; exit 1; }; done; done",
		 dir, dir, dir);
	CHECK(run(cmd) == 0);
	/* Its examples and its usage lines stand one a line, as --help prints
	 * them (help2man would fill them into one paragraph). */
	snprintf(cmd, sizeof(cmd),
		 "page=%s/prefix/share/man/man1/sharedseg.1 && "
		 "%s/prefix/bin/sharedseg --help | awk '/^examples:/{on=1;next} on&&/^$/{on=0} on' "
		 ">%s/examples && test -s %s/examples && grep -qx 'sharedseg --version' $page && "
		 "while IFS= read -r line; do grep -qxF -- \"$line\" $page || "
		 "{ echo \"sharedseg.1 lacks the line '$line'\" >&2; exit 1; }; done <%s/examples",
		 dir, dir, dir, dir, dir);
	CHECK(run(cmd) == 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	run(cmd);
	printf("install: ok\n");
	return 0;
}
