#!/bin/sh
# Every option that `colabfs --help` lists must be documented in man/colabfs.1.
set -u
bin=${COLABFS_BIN:-./colabfs}
page=${top_srcdir:-.}/man/colabfs.1
missing=0
for o in $("$bin" --help | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
	name=${o#--}
	# groff escapes dashes as \-
	esc=$(printf '%s' "$name" | sed 's/-/\\\\-/g')
	if ! grep -q -e "$esc" -e "$name" "$page"; then
		echo "option $o is in --help but not in $page"
		missing=$((missing + 1))
	fi
done
[ "$missing" -eq 0 ] && echo "check_man: every option is documented"
exit "$missing"
