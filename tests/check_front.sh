#!/bin/sh
# check_front: `colabfs` is the lean front end (src/cli/front.c).  It must
# link none of the daemon's libraries (their loading is what made `colabfs
# stats` slow under load), answer stats itself, and run the full program for
# every other command with the same arguments, exit status and output.
set -u
bin=${COLABFS_BIN:-./colabfs}
full=$(dirname "$bin")/libexec/colabfs
fail=0
say() { echo "check_front: $*" >&2; fail=1; }
[ -x "$full" ] || { say "no full program at $full"; exit 1; }
needed=$(readelf -d "$bin" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if [ -z "$needed" ] && readelf -l "$bin" | grep -q INTERP; then
	say "readelf found no NEEDED entries in $bin, a dynamic executable"
fi # none and no INTERP: linked statically (configure's --enable-static-front)
# linked in either way: none of the daemon's libraries' code
daemon_syms=$(nm "$bin" 2>/dev/null | grep -E ' [TtWw] (curl_|fuse_|SSL_|EVP_|mdb_|redis)' | head -3)
[ -z "$daemon_syms" ] || say "$bin holds code of the daemon's libraries: $daemon_syms"
for lib in $needed; do
	case $lib in
	libc.so.* | libjansson.so.* | ld-linux*) ;;
	libasan.so.* | libubsan.so.* | libm.so.* | libgcc_s.so.* | libstdc++.so.*) ;; # sanitizer builds
	*) say "$bin links $lib (the front end links libc and jansson only)" ;;
	esac
done
for lib in libcurl libfuse3 libssl libcrypto liblmdb libhiredis; do
	readelf -d "$full" | grep -q "\[$lib" || say "the full program $full does not link $lib: is it the full one?"
done
# every other command: the full program's answer, byte for byte
for args in "--version" "--help" "no-such-command" "umount" "doctor --no-such-option"; do
	# shellcheck disable=SC2086
	a=$("$bin" $args 2>&1; echo "rc=$?")
	# shellcheck disable=SC2086
	b=$("$full" $args 2>&1; echo "rc=$?")
	[ "$a" = "$b" ] || say "colabfs $args differs from the full program's: [$a] vs [$b]"
done
# stats: answered by the front end itself (same words as the full program)
a=$("$bin" stats / 2>&1; echo "rc=$?")
b=$("$full" stats / 2>&1; echo "rc=$?")
[ "$a" = "$b" ] || say "colabfs stats / differs from the full program's: [$a] vs [$b]"
# the full program missing: a clear error, status 127 (a copy of the front end
# alone in a folder, where no libexec/colabfs is beside it; where colabfs is
# also installed, that copy runs the installed full program: status 0)
d=$(mktemp -d)
cp "$bin" "$d/colabfs"
out=$("$d/colabfs" --version 2>&1)
rc=$?
rm -rf "$d"
if [ $rc -ne 0 ] && { [ $rc -ne 127 ] || ! printf '%s' "$out" | grep -q "cannot run"; }; then
	say "without the full program: status $rc, [$out] (want 127 and 'cannot run')"
fi
how=dynamically
[ -n "$needed" ] || how=statically
[ $fail = 0 ] && echo "check_front: the front end ($how linked) links libc and jansson only; other commands run the full program"
exit $fail
