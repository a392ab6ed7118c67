#!/bin/sh
# check_layers: includes point down the layers (README, Layout).  Each
# directory may include its own headers and those of the layers below it:
#   src/base   basic helpers (errors, log, buffers, little-endian, sizes,
#              names, clock, hashes, row fields, fd waits) and crypto, the
#              OpenSSL owner (signatures, digests, TLS client streams)
#   cache      the block store                       (base)
#   src/drive  the Drive client                      (base)
#   src/tier   the shared cache tier (Redis Cluster) (base)
#   src/core   the FUSE-free VFS core                (base, cache, drive, tier)
#   fuse       the FUSE side, the supervisor         (base, cache, drive, core)
#   src/cli    the command line                      (everything)
#   kernels    the GPU loader                        (base, cache, and the
#              core's stored-listing and control-name headers it reads)
# A quoted include that names a header of a layer not allowed fails, with
# the file and the header.
top=${top_srcdir:-${srcdir:-.}}
fail=0
layer_of() { # header name -> its directory, or nothing
	for d in src/base cache src/drive src/tier src/core fuse src/cli kernels; do
		[ -f "$top/$d/$1" ] && { echo "$d"; return; }
	done
}
check() { # dir allowed-dirs...
	dir=$1
	shift
	for f in "$top/$dir"/*.c "$top/$dir"/*.h "$top/$dir"/*.cu; do
		[ -f "$f" ] || continue
		for h in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
			l=$(layer_of "$h")
			[ -z "$l" ] && continue
			ok=0
			for a in "$dir" "$@"; do
				[ "$l" = "$a" ] && ok=1
				[ "$a" = "$l:$h" ] && ok=1
			done
			if [ $ok = 0 ]; then
				echo "check_layers: $f includes $h (in $l), not a layer below $dir" >&2
				fail=1
			fi
		done
	done
}
check src/base
check cache src/base
check src/drive src/base
check src/tier src/base
check src/core src/base cache src/drive src/tier
check fuse src/base cache src/drive src/tier src/core
check src/cli src/base cache src/drive src/tier src/core fuse
check kernels src/base cache src/core:lrow.h src/core:ctlname.h
if [ $fail = 0 ]; then
	echo "check_layers: includes point down the layers"
fi
exit $fail
