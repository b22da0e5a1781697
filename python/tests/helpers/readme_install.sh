#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# docs/python.md's install on Debian 12, the lines as they stand there
# (tests/readme.py checks that document's blocks against them); run by
# test_readme_python.py with HOME in a temporary folder.
set -e
make wheel
/usr/bin/python3 -m venv --system-site-packages ~/venv-sharedseg
~/venv-sharedseg/bin/pip install --no-index --find-links dist "sharedseg[numpy]"
