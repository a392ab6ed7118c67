#!/bin/sh
# run.sh PJD COLABFS OUT: pjdfstest (built in PJD) on a writable colabfs mount of an
# empty emulated Drive; the prove -rv log in OUT/prove.log, its summary in OUT/summary.txt.
# As root (the suite switches users; the mount is -o allow_other).  See README.md.
set -eu
pjd=$1 bin=$2 out=$3
top=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out/mnt"
echo '{"items": []}' >"$out/spec.json"
rm -f "$out/port"
/usr/bin/python3 "$top/tests/emulator/drive_emulator.py" --spec "$out/spec.json" --port 0 \
	--port-file "$out/port" --access-token pjd --log "$out/emu.log" >"$out/emu.out" 2>&1 &
emu=$!
trap 'mountpoint -q "$out/mnt" && "$bin" umount "$out/mnt"; kill $emu' EXIT
i=0
while [ ! -s "$out/port" ]; do
	i=$((i + 1))
	[ $i -gt 300 ] && { echo "the emulator did not start" >&2; exit 1; }
	sleep 0.1
done
COLABFS_ACCESS_TOKEN=pjd "$bin" mount --api-url="http://127.0.0.1:$(cat "$out/port")" \
	--cache-dir="$out/cache" --log-file="$out/colabfs.log" --write-back-delay=0 \
	-o allow_other "$out/mnt"
mkdir "$out/mnt/pjd"
(cd "$out/mnt/pjd" && prove -rv "$pjd/tests" >"$out/prove.log" 2>&1) || true
/usr/bin/python3 "$(dirname "$0")/classify.py" "$out/prove.log" >"$out/summary.txt"
cat "$out/summary.txt"
