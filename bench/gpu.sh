#!/bin/sh
# bench/gpu.sh: the one prepared GPU run of the loader (issue 7).  Under 5
# minutes on a machine with a CUDA device; prints one table:
#   P (pinned H2D cudaMemcpyAsync peak, 64 MiB x 16); staging of resident
#   4 MiB blocks through the registered arenas and through the pinned ring,
#   as fractions of P; loader images/s vs torch DataLoader(num_workers=N,
#   pin_memory=True) over the same files through the mount (uint8 224x224x3,
#   normalised on the GPU); each kernel's bandwidth vs a device-to-device
#   copy; bit-exactness vs plain reads; the torn-read stress result.
# Builds what it needs (autoreconf/configure/make, bench/gpu_bench.cu with
# nvcc), starts the Drive emulator and a mount of its own, and cleans up.
# Without a CUDA device it says so and exits 0 having measured nothing.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
PY=/usr/bin/python3
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	echo "no CUDA device: nothing measured"
	exit 0
fi
if [ ! -x "$NVCC" ]; then
	echo "no nvcc at $NVCC: nothing measured (set NVCC)"
	exit 0
fi

# ---- build -----------------------------------------------------------------
if [ ! -x ./colabfs ] || [ ! -f ./libcolabfs-gpu.so ] || ! grep -q "cfs_gpu_host_alloc" ./libcolabfs-gpu.so; then
	[ -x ./configure ] || autoreconf -fi >/dev/null
	[ -f Makefile ] || ./configure -q
	make -j"$(nproc)" >/dev/null
fi
if ! $PY -c "import ctypes,sys; l=ctypes.CDLL('./libcolabfs-gpu.so'); sys.exit(0 if l.cfs_gpu_built() and l.cfs_gpu_device_count()>0 else 1)"; then
	echo "libcolabfs-gpu.so has no CUDA or sees no device: nothing measured"
	exit 0
fi
work=$(mktemp -d /tmp/colabfs-gpubench.XXXXXX)
"$NVCC" -O2 -Ikernels -o "$work/gpu_bench" bench/gpu_bench.cu -L. -lcolabfs-gpu \
	-Xlinker -rpath="$top"

emu_pid=""
mnt="$work/mnt"
cleanup() {
	fusermount3 -u "$mnt" 2>/dev/null || fusermount -u "$mnt" 2>/dev/null || true
	[ -n "$emu_pid" ] && kill "$emu_pid" 2>/dev/null
	[ -n "$emu_pid" ] && wait "$emu_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

# ---- data, emulator, mount -------------------------------------------------
mkdir -p "$work/tree/big" "$work/tree/img" "$mnt" "$work/cache"
$PY - "$work/tree" <<'PYEOF'
import os, sys
root = sys.argv[1]
rnd = open("/dev/urandom", "rb")
for i in range(64):                      # 64 x 16 MiB = 1 GiB of 4 MiB blocks
    with open(os.path.join(root, "big", "b%02d.bin" % i), "wb") as f:
        f.write(rnd.read(16 << 20))
for i in range(4096):                    # 4096 uint8 224x224x3 images (~600 MiB)
    with open(os.path.join(root, "img", "i%05d.raw" % i), "wb") as f:
        f.write(rnd.read(224 * 224 * 3))
PYEOF
$PY tests/emulator/drive_emulator.py --tree "$work/tree" --port-file "$work/port" \
	--access-token benchtoken >"$work/emu.log" 2>&1 &
emu_pid=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
COLABFS_ACCESS_TOKEN=benchtoken ./colabfs mount --api-url="http://127.0.0.1:$(cat "$work/port")" \
	--cache-dir="$work/cache" --block-size=4M --cache-size=4G \
	--log-file="$work/colabfs.log" "$mnt"
for _ in $(seq 100); do [ -d "$mnt/img" ] && break; sleep 0.1; done

# ---- measure ---------------------------------------------------------------
"$work/gpu_bench" >"$work/cuda.txt"
COLABFS_GPU_LIB="$top/libcolabfs-gpu.so" COLABFS_GPU_PINNED=2G \
	timeout 240 $PY bench/gpu_loader.py "$mnt" "$work/cache" "$top/colabfs" >"$work/mount.txt"

# ---- the table ---------------------------------------------------------------
cat "$work/cuda.txt" "$work/mount.txt" | $PY -c '
import sys
v = dict(l.split(None, 1) for l in sys.stdin if l.strip())
g = lambda k: float(v[k])
P, dd = g("pinned_h2d_GBps"), g("d2d_copy_GBps")
rows = [
 ("P: pinned H2D peak (64 MiB x 16)", "%.2f GB/s" % P, ""),
 ("staging 4 MiB blocks, registered", "%.2f GB/s" % g("staging_registered_GBps"), "%.2f P (goal 0.90)" % (g("staging_registered_GBps") / P)),
 ("staging 4 MiB blocks, pinned ring", "%.2f GB/s" % g("staging_ring_GBps"), "%.2f P (goal 0.75)" % (g("staging_ring_GBps") / P)),
 ("loader images/s (224x224x3, normalised)", v["loader_images_per_s"].strip(), "%.1fx DataLoader (goal 3x)" % (g("loader_images_per_s") / g("dataloader_images_per_s"))),
 ("DataLoader(num_workers=%s, pin_memory=True)" % v["dataloader_workers"].strip(), v["dataloader_images_per_s"].strip(), ""),
 ("device-to-device copy", "%.2f GB/s" % dd, ""),
 ("normalize kernel", "%.2f GB/s" % g("normalize_GBps"), "%.2f of copy (goal 0.8)" % (g("normalize_GBps") / dd)),
 ("gather kernel", "%.2f GB/s" % g("gather_GBps"), "%.2f of copy (goal 0.8)" % (g("gather_GBps") / dd)),
 ("crc32c kernel", "%.2f GB/s" % g("crc32c_GBps"), "%.2f of copy (goal 0.8)" % (g("crc32c_GBps") / dd)),
 ("bit-exact vs plain reads", "staging %s, loader %s" % (v["staging_bit_exact"].strip(), v["loader_bit_exact"].strip()), ""),
 ("torn-read stress", "%s torn of %s batches" % (v["stress_torn_batches"].strip(), v["stress_batches"].strip()), "%s evictions, %s retries, %s crc errors" % (v["stress_evictions"].strip(), v["stress_retries"].strip(), v["stress_crc_errors"].strip())),
]
for a, b, c in rows:
    print("%-44s %-24s %s" % (a, b, c))
'
