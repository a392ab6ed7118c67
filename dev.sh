#!/bin/sh
# colabfs developer entry point.  Run as root on Debian 12.
#   ./dev.sh run [MOUNTPOINT]  install, build, mount (the emulator's sample Drive,
#                              or your real Drive when credentials are given)
#   ./dev.sh test              install, build, run the whole test suite
#   ./dev.sh build             install and build only (a test build: see build())
set -eu
cd "$(dirname "$0")"
top=$(pwd)

PACKAGES="build-essential autoconf automake libtool pkg-config fuse3 libfuse3-dev \
libcurl4-openssl-dev libssl-dev libjansson-dev liblmdb-dev openssl curl ca-certificates \
python3 python3-pytest python3-numpy python3-torch python3-matplotlib clang libclang-rt-14-dev rsync \
libhiredis-dev redis-server redis-tools"

install_packages() {
	missing=""
	for p in $PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	echo "== installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	# shellcheck disable=SC2086
	apt-get install -y -q $missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $missing >/dev/null; }
}

# build [yes|no]: a test build (the COLABFS_TEST_* hooks compiled in, for
# `test` and `build`) or a user build (`run`, like a plain ./configure).  The
# tree is configured again, and rebuilt from clean, when it was configured
# the other way.
build() {
	want=${1:-yes}
	install_packages
	echo "== building"
	[ -x configure ] || autoreconf -fi >/dev/null
	have=no
	[ -f config.status ] && ./config.status --config | grep -q -- '--enable-test-hooks' && have=yes
	if [ ! -f Makefile ] || [ "$have" != "$want" ]; then
		[ -f Makefile ] && make -s clean >/dev/null 2>&1
		if [ "$want" = yes ]; then ./configure -q --enable-test-hooks; else ./configure -q; fi
	fi
	make -s -j"$(nproc)" >/dev/null
}

wait_for_file() { # path, seconds
	i=0
	while [ ! -s "$1" ]; do
		i=$((i + 1))
		[ "$i" -gt $(($2 * 10)) ] && { echo "timed out waiting for $1" >&2; return 1; }
		sleep 0.1
	done
}

cmd_run() {
	build no
	mnt=${1:-/tmp/colabfs-demo/mnt}
	mkdir -p "$mnt"
	if [ -n "${COLABFS_CREDENTIALS:-}${GOOGLE_APPLICATION_CREDENTIALS:-}${COLABFS_ACCESS_TOKEN:-}" ]; then
		echo "== mounting your Drive at $mnt"
		./colabfs mount ${COLABFS_CREDENTIALS:+--credentials="$COLABFS_CREDENTIALS"} "$mnt"
	else
		demo=/tmp/colabfs-demo
		mkdir -p "$demo"
		if [ -s "$demo/emulator.pid" ] && kill -0 "$(cat "$demo/emulator.pid")" 2>/dev/null; then
			echo "== emulator already running"
		else
			rm -f "$demo/port"
			token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
			umask 077
			printf '%s' "$token" >"$demo/token"
			nohup /usr/bin/python3 tests/emulator/drive_emulator.py --sample "$demo/drive" \
				--port 0 --port-file "$demo/port" --access-token "$token" --ttfb-ms 20 \
				>"$demo/emulator.log" 2>&1 &
			echo $! >"$demo/emulator.pid"
			wait_for_file "$demo/port" 30
		fi
		port=$(cat "$demo/port")
		mountpoint -q "$mnt" && ./colabfs umount "$mnt"
		echo "== mounting the emulator's sample Drive (http://127.0.0.1:$port) at $mnt"
		COLABFS_ACCESS_TOKEN=$(cat "$demo/token") ./colabfs mount \
			--api-url="http://127.0.0.1:$port" --cache-dir="$demo/cache" "$mnt"
	fi
	echo
	ls -l "$mnt"
	echo
	echo "Mounted at $mnt.  Look around: ls -lR $mnt ; man ./man/colabfs.1"
	echo "Unmount with: ./colabfs umount $mnt"
}

# The unit tests again, built with ASan+UBSan in build-asan/.  The tree itself
# is configured in place, which a VPATH build of it refuses, so this builds a
# pristine copy of the distributed sources (make distdir) out of tree.
asan_check() {
	rm -rf build-asan &&
		mkdir -p build-asan/obj &&
		make -s distdir distdir=build-asan/src top_distdir=build-asan/src >/dev/null &&
		(cd build-asan/obj && ../src/configure -q --enable-sanitizers --enable-test-hooks &&
			make -s -j"$(nproc)" && make -s -j"$(nproc)" check)
}

cmd_test() {
	build
	echo "== unit tests (make check)"
	unit_pass=0
	unit_fail=0
	if make -s check >/tmp/colabfs-unit.log 2>&1; then :; fi
	grep -E '^(PASS|FAIL|ERROR|XPASS):' /tmp/colabfs-unit.log || cat /tmp/colabfs-unit.log
	unit_pass=$(grep -c '^PASS:' /tmp/colabfs-unit.log || true)
	unit_fail=$(grep -cE '^(FAIL|ERROR|XPASS):' /tmp/colabfs-unit.log || true)
	[ "$unit_fail" -eq 0 ] || cat tests/unit/*.log tests/*.log 2>/dev/null | tail -50
	echo "== unit tests under ASan+UBSan (build-asan/)"
	if asan_check >/tmp/colabfs-asan.log 2>&1; then :; fi
	grep -E '^(PASS|FAIL|ERROR|XPASS):' /tmp/colabfs-asan.log || tail -30 /tmp/colabfs-asan.log
	asan_pass=$(grep -c '^PASS:' /tmp/colabfs-asan.log || true)
	asan_fail=$(grep -cE '^(FAIL|ERROR|XPASS):' /tmp/colabfs-asan.log || true)
	[ $((asan_pass + asan_fail)) -gt 0 ] || asan_fail=1 # the build itself failed
	# a report from a child process or a test that ignored it still fails the run
	asan_reports=$(grep -lE 'ERROR: (Address|Leak)Sanitizer|runtime error:' \
		build-asan/obj/tests/unit/*.log build-asan/obj/tests/*.log 2>/dev/null || true)
	if [ -n "$asan_reports" ]; then
		echo "sanitizer reports in:" $asan_reports
		[ "$asan_fail" -gt 0 ] || asan_fail=1
	fi
	[ "$asan_fail" -eq 0 ] || cat build-asan/obj/tests/unit/*.log build-asan/obj/tests/*.log 2>/dev/null | tail -50
	echo "== make distcheck (the tarball builds, checks and installs from a clean tree)"
	dist_pass=0
	dist_fail=0
	if make -s distcheck >/tmp/colabfs-distcheck.log 2>&1; then
		dist_pass=1
		echo "PASS: distcheck"
		rm -f colabfs-*.tar.gz
	else
		dist_fail=1
		echo "FAIL: distcheck"
		tail -40 /tmp/colabfs-distcheck.log
	fi
	echo "== fuzzing (make fuzz, 15 s per harness)"
	if make -s fuzz FUZZ_SECONDS=15 FUZZ_JOBS="$(nproc)" >/tmp/colabfs-fuzz.log 2>&1; then :; fi
	grep -E '^(PASS|FAIL): fuzz_' /tmp/colabfs-fuzz.log || tail -30 /tmp/colabfs-fuzz.log
	fuzz_pass=$(grep -c '^PASS: fuzz_' /tmp/colabfs-fuzz.log || true)
	fuzz_fail=$(grep -c '^FAIL: fuzz_' /tmp/colabfs-fuzz.log || true)
	[ $((fuzz_pass + fuzz_fail)) -gt 0 ] || fuzz_fail=1 # the harnesses did not build
	echo "== emulator and end-to-end tests (pytest)"
	set +e
	COLABFS_BIN="$top/colabfs" timeout 1500 /usr/bin/python3 -m pytest -q -rfE -p no:cacheprovider \
		tests/emulator tests/e2e 2>&1 | tee /tmp/colabfs-pytest.log
	set -e
	summary=$(grep -E '(passed|failed|error)' /tmp/colabfs-pytest.log | tail -n 1)
	py_pass=$(echo "$summary" | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^passed/) n += $(i-1)} END {print n + 0}')
	py_fail=$(echo "$summary" | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^(failed|error)/) n += $(i-1)} END {print n + 0}')
	[ -n "$summary" ] || py_fail=$((py_fail + 1))
	echo "unit: $unit_pass passed, $unit_fail failed; asan: $asan_pass passed, $asan_fail failed;" \
		"distcheck: $dist_pass passed, $dist_fail failed;" \
		"fuzz: $fuzz_pass passed, $fuzz_fail failed; pytest: $summary"
	pass=$((unit_pass + asan_pass + dist_pass + fuzz_pass + py_pass))
	fail=$((unit_fail + asan_fail + dist_fail + fuzz_fail + py_fail))
	echo "$pass passed, $fail failed"
	[ "$fail" -eq 0 ]
}

case "${1:-}" in
run) shift; cmd_run "$@" ;;
test) cmd_test ;;
build) build ;;
*) sed -n '2,6p' "$0"; exit 2 ;;
esac
