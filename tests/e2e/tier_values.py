"""The shared cache tier's values as man/colabfs.1 (SHARED CACHE, Values) documents them,
written again here from the page in plain stdlib, so that the e2e tests check what the
mounts publish against an implementation that is not colabfs's, and play the attacker
with it (issue 24).

  format 2 (keyed, keys cfs2:BS:{ID@REV:G}:N):
    "CFB2", u32 LE data length, u32 LE block size, 8 bytes key id, 32 bytes MAC, data
    key id = HMAC-SHA256(K, "colabfs shared cache key id")[:8]
    MAC    = HMAC-SHA256(K, bytes 0..11 || u64 LE N || u32 LE len(ID) || ID ||
                            u32 LE len(REV) || REV || data)
  format 1 (unkeyed, --shared-cache-trusted, keys cfs1:...):
    "CFB1", u32 LE data length, u32 LE crc32c(data), u32 LE block size, data
"""

import hashlib
import hmac
import json
import os
import re
import struct

import redis_cluster as RC

# the deployment key every keyed test mount shares (64 hex digits and a newline in the file,
# as `openssl rand -hex 32 > FILE` makes; the newline is not key material)
KEY = b"5f0c9e2b7a41d38e6c1f0a9b2d4e6f8071a3c5e7092b4d6f8a1c3e5079b2d4f6"
HEADER1 = struct.Struct("<4sIII")
HEADER2 = struct.Struct("<4sII8s32s")
KEY2_RE = re.compile(r"^cfs2:1M:\{([^@{}]+)@([^{}]+):([0-9]+)\}:([0-9]+)$")
KEY1_RE = re.compile(r"^cfs1:1M:\{([^@{}]+)@([^{}]+):([0-9]+)\}:([0-9]+)$")


def head_revisions(emu, ids):
    """{id: headRevisionId} (the REV of the keys) from the emulator's control endpoint (not
    counted)."""
    out = {}
    for i in ids:
        st, _, body = emu.request("GET", "/_emu/items/" + i)
        assert st == 200, (i, st, body[:200])
        out[i] = json.loads(body)["headRevisionId"]
    return out


def key_file(d, key=KEY, mode=0o600, name="tier.key"):
    """A key file in folder d (made if need be) with key and a newline, mode mode; its path."""
    os.makedirs(str(d), exist_ok=True)
    p = os.path.join(str(d), name)
    with open(p, "wb") as f:
        f.write(key + b"\n")
    os.chmod(p, mode)
    return p


def key_opts(d, key=KEY):
    """The mount options of a keyed mount whose key file lives in d."""
    return ["--shared-cache-key-file=" + key_file(d, key)]


def key_id(key=KEY):
    return hmac.new(key, b"colabfs shared cache key id", hashlib.sha256).digest()[:8]


def block_key(fid, rev, n, keyed=True, bs="1M"):
    return "cfs%d:%s:{%s@%s:%d}:%d" % (2 if keyed else 1, bs, fid, rev, n >> 6, n)


def mac(key, head12, fid, rev, n, data):
    f, r = fid.encode(), rev.encode()
    msg = b"".join([head12, struct.pack("<QI", n, len(f)), f, struct.pack("<I", len(r)), r, data])
    return hmac.new(key, msg, hashlib.sha256).digest()


def encode2(fid, rev, n, bs, data, key=KEY, kid=None, tag=None):
    """A format 2 value; kid (the key id written) and tag (the MAC written) may be forced."""
    head12 = struct.pack("<4sII", b"CFB2", len(data), bs)
    kid = key_id(key) if kid is None else kid
    tag = mac(key, head12, fid, rev, n, data) if tag is None else tag
    return head12 + kid + tag + data


def encode1(data, bs):
    """A format 1 value, crc32c and all: what anyone can make without a key."""
    return HEADER1.pack(b"CFB1", len(data), RC.crc32c(data), bs) + data


def verify2(v, fid, rev, n, bs, key=KEY):
    """The data of v when it is a valid format 2 value of block n of fid@rev, else None."""
    if v is None or len(v) < HEADER2.size:
        return None
    magic, ln, vbs, kid, tag = HEADER2.unpack_from(v)
    data = v[HEADER2.size:]
    if magic != b"CFB2" or ln != len(data) or vbs != bs or kid != key_id(key):
        return None
    good = mac(key, v[:12], fid, rev, n, data)
    return data if hmac.compare_digest(good, tag) else None
