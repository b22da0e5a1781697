#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# sharedseg(1)'s per-command sections for help2man --include: each command
# of the tool's --help, with that command's own --help as its text.
#   man-include.sh TOOL OUT
set -e
tool=$1
out=$2
{
	for c in $("$tool" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { on = 0 } on { print $1 }'); do
		[ "$c" = help ] && continue
		printf '[COMMAND %s]\n.nf\n' "$(echo "$c" | tr a-z A-Z)"
		# roff: a backslash is \e, a line may not start with . or '
		"$tool" "$c" --help | sed -e 's/\\/\\e/g' -e "s/^[.']/\\\\\\&&/"
		printf '.fi\n'
	done
} >"$out"
