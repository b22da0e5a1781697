# SPDX-License-Identifier: Apache-2.0
"""Builds the wheel's sharedseg._native: the extension and the C library's
own sources compiled into one shared object, so the wheel needs no
libsharedseg.so. What it compiles, and with which flags, is
python/build_native.py's, which also builds in place without setuptools."""
import os
import sys

import setuptools
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "python"))
import build_native  # noqa: E402


class ParallelBuildExt(build_ext):
    """Compiles the ~40 sources on every core unless told otherwise."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1


native = Extension(
    "sharedseg._native",
    sources=build_native.sources(),
    include_dirs=build_native.INCLUDE_DIRS,
    extra_compile_args=build_native.CFLAGS,
    extra_link_args=build_native.LDFLAGS,
    libraries=build_native.LIBRARIES,
)

# The license as an SPDX expression where setuptools writes one (77+), else
# the older License field: no deprecated form on either.
_SETUPTOOLS = tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit())
LICENSE = {"license_expression" if _SETUPTOOLS >= (77, 0) else "license": "Apache-2.0"}

setup(
    **LICENSE,
    packages=["sharedseg"],
    package_dir={"": "python"},
    package_data={"sharedseg": ["py.typed"]},
    ext_modules=[native],
    cmdclass={"build_ext": ParallelBuildExt},
    # build/ belongs to CMake.
    options={"build": {"build_base": "build-python"}},
)
