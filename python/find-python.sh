#!/bin/sh
# Prints the interpreter for the Python package's targets: the first of
# /usr/bin/python3 and python3 that has torch, else the first that exists.
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
