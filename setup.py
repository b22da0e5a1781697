"""Builds sharedseg._native: the extension and the C library's own sources
compiled into one shared object, so the wheel needs no libsharedseg.so."""
import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def sources():
    # Relative paths: setuptools refuses absolute ones in a wheel build.
    found = []
    for pattern in ("python/_native/*.c", "src/*.c", "src/os/*.c", "src/backend/*.c",
                    "src/driver/*.c"):
        found += sorted(os.path.relpath(p, HERE) for p in glob.glob(os.path.join(HERE, pattern)))
    return found


class ParallelBuildExt(build_ext):
    """Compiles the ~35 sources on every core unless told otherwise."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1


native = Extension(
    "sharedseg._native",
    sources=sources(),
    include_dirs=["include", "src", "python/_native"],
    # Only PyInit__native leaves the object: the library's symbols stay
    # private, so another copy of libsharedseg in the process cannot clash.
    extra_compile_args=["-std=gnu11", "-fvisibility=hidden", "-DSSEG_API=",
                        "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers", "-Wno-cast-function-type",
                        "-Wno-format-truncation"],
    extra_link_args=["-Wl,--exclude-libs,ALL"],
    libraries=["dl", "pthread"],
)

setup(
    packages=["sharedseg"],
    package_dir={"": "python"},
    ext_modules=[native],
    cmdclass={"build_ext": ParallelBuildExt},
    # build/ belongs to CMake.
    options={"build": {"build_base": "build-python"}},
)
