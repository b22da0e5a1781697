#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# sharedseg(1)'s text for help2man --include: the SYNOPSIS from the tool's
# usage lines, the DESCRIPTION as its --help prints the rest, line for line
# (help2man would run the examples into one paragraph), and per-command
# sections: each command
# of the tool's --help, with that command's own --help as its text.
#   man-include.sh TOOL OUT
set -e
tool=$1
out=$2
# roff: a backslash is \e, a line may not start with . or '
roff() { sed -e 's/\\/\\e/g' -e "s/^[.']/\\\\\&&/"; }
{
	printf '[SYNOPSIS]\n.nf\n'
	"$tool" --help | awk '/^$/ { exit } { sub(/^(usage:)? +/, ""); print }' | roff
	printf '.fi\n[=DESCRIPTION]\n.nf\n'
	"$tool" --help | awk 'body { print } !body && /^$/ { body = 1 }' | roff
	printf '.fi\n'
	for c in $("$tool" --help | awk '/^commands:/ { on = 1; next } on && /^$/ { on = 0 } on { print $1 }'); do
		[ "$c" = help ] && continue
		printf '[COMMAND %s]\n.nf\n' "$(echo "$c" | tr a-z A-Z)"
		"$tool" "$c" --help | roff
		printf '.fi\n'
	done
} >"$out"
