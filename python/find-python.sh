#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints an interpreter for the Python package's targets.
#   find-python.sh        the Debian leg: the first of /usr/bin/python3 and
#                         python3 that has torch, else the first that exists
#   find-python.sh pypi   the base of the PyPI leg's virtual environment: a
#                         CPython 3.12 or 3.13 (on PATH, or pyenv's), else
#                         python3 on PATH, else /usr/bin/python3
#   find-python.sh 3.10   a CPython 3.10 that can make a virtual environment
#                         (python3.10 on PATH, or pyenv's), else nothing
runs() { "$1" -c 'import sys, venv, ensurepip' >/dev/null 2>&1; }
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
case $1 in 3.[0-9]*)
	for py in "python$1" $(ls -d "$pyenv_root"/versions/"$1".*/bin/python3 2>/dev/null | sort -rV); do
		if runs "$py" && [ "$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = "$1" ]; then
			echo "$py"
			exit 0
		fi
	done
	exit 1
esac
if [ "$1" = pypi ]; then
	for py in python3.12 $(ls -d "$pyenv_root"/versions/3.12*/bin/python3 2>/dev/null | sort -rV) \
		python3.13 $(ls -d "$pyenv_root"/versions/3.13*/bin/python3 2>/dev/null | sort -rV) \
		python3 /usr/bin/python3; do
		if runs "$py"; then
			echo "$py"
			exit 0
		fi
	done
	echo "no interpreter can make a virtual environment (Debian: apt install python3-venv)" >&2
	exit 1
fi
for py in /usr/bin/python3 python3; do
	command -v "$py" >/dev/null 2>&1 || continue
	if "$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' \
		2>/dev/null; then
		echo "$py"
		exit 0
	fi
done
for py in /usr/bin/python3 python3; do
	if command -v "$py" >/dev/null 2>&1; then
		echo "$py"
		exit 0
	fi
done
echo python3
