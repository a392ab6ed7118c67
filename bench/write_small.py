#!/usr/bin/python3
"""Small-file writes (issue 22 items 8 and 10): a `tar x` and a `git clone` into the mount, to the
moment the command exits and to the moment Drive holds every file, next to rclone's mount of the
same emulator and the local disk, measured in the same run.

    /usr/bin/python3 bench/write_small.py [--files 1000] [--repo-files 2000] [--ttfb-ms 200]
                                          [--variants free,limited] [--workloads tar,git]
                                          [--write-rate 3] [--timeout 3600]
                                          [--workdir /var/tmp] [--mount-opt=OPT ...]
                                          [--no-rclone] [--keep] [--json FILE]

Workloads, each into its own fresh folder of a mount:
  tar   `tar xf` of a tarball (made at bench time, seeded) of --files files of 0-16 KiB in folders
        of 100.
  git   `git clone file://REPO` of a repository made at bench time: --repo-files files of 0-16 KiB
        in folders of 50, one commit (git writes its pack and index, renames lock files, fsyncs
        the pack).
For each: "exit" = seconds until the command exits; "durable" = seconds from its start until Drive
holds every byte: for colabfs until `colabfs sync MOUNT` returns 0 (it starts the uploads at once),
for rclone until its remote-control `vfs/stats` shows no upload queued or in progress (rclone uploads
--vfs-write-back = 5 s after the last close, its default), for the local disk until `sync -f`
(syncfs) returns.  Every file is then compared (untimed) with Drive's md5 through the emulator.

Variants (one emulator each, over TLS, --ttfb-ms on media and --api-latency-ms the same on every other
Drive call, so a creation costs a round trip as on Drive):
  free     Drive accepts every creation.
  limited  Drive refuses creations and uploads above --write-rate per second (the emulator's
           --write-rate: 403 userRateLimitExceeded), as Drive does at about 3 files/s sustained.
The bound column is the time to durable of a client that creates exactly --write-rate files per
second from the start: Drive items created / --write-rate (files and folders).

References: rclone (`rclone mount --vfs-cache-mode writes`, Debian's rclone, its drive backend with
a token valid for the run).  rclone has no option for Drive's API address, so the bench points it
at the emulator the way a corporate proxy would: HTTPS_PROXY names a CONNECT tunnel in this script
that sends every connection to the emulator, whose certificate (made here, for www.googleapis.com,
oauth2.googleapis.com, 127.0.0.1 and localhost) rclone trusts through SSL_CERT_FILE.  colabfs
talks to the same emulator over TLS (--api-url https://127.0.0.1:PORT, --ca-file); the tunnel adds
a localhost hop per connection to rclone's requests only.  ratio = rclone s / colabfs s (above 1:
colabfs is faster).  Without rclone (--no-rclone, or not installed) its column is "-".
"""

import argparse
import hashlib
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
import urllib.parse
import urllib.request
import ssl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as R  # noqa: E402  (the suite's Emulator, Mount and clean-up)

KiB = R.KiB
SEED = 20261205
MAX_SIZE = 16 * KiB
CERT_NAMES = ("www.googleapis.com", "oauth2.googleapis.com", "localhost")


# ------------------------------------------------------------------------------------------------
# data


def small_files(n, per_dir, seed):
    """[(relative path, bytes)]: n files of 0..16 KiB (uniform), per_dir to a folder."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        size = rnd.randint(0, MAX_SIZE)
        out.append(("d%03d/f%05d.dat" % (i // per_dir, i), rnd.randbytes(size)))
    return out


def make_tarball(path, files):
    with tarfile.open(path, "w") as t:
        dirs = sorted({os.path.dirname(p) for p, _ in files})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1700000000
            t.addfile(info)
        for p, data in files:
            info = tarfile.TarInfo(p)
            info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
            t.addfile(info, io.BytesIO(data))


def make_repo(path, files):
    os.makedirs(path)
    for p, data in files:
        full = os.path.join(path, p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    env = dict(os.environ, GIT_AUTHOR_NAME="bench", GIT_AUTHOR_EMAIL="bench@example.invalid",
               GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@example.invalid",
               GIT_AUTHOR_DATE="1700000000 +0000", GIT_COMMITTER_DATE="1700000000 +0000")
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "commit", "-q", "-m", "bench"], ["git", "gc", "-q"]):
        subprocess.run(argv, cwd=path, env=env, check=True, stdin=subprocess.DEVNULL, timeout=600)


def tree_files(root):
    """Relative paths of the regular files below root."""
    out = []
    for d, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(d, n), root) for n in names]
    return sorted(out)


def tree_dirs(root):
    return sum(len(ds) for _, ds, _ in os.walk(root))


# ------------------------------------------------------------------------------------------------
# TLS and the tunnel rclone reaches the emulator through


def make_tls(d):
    """A CA and a server certificate for CERT_NAMES and 127.0.0.1 in d (the emulator's --tls-dir
    file names).  Returns the CA file."""
    os.makedirs(d, exist_ok=True)

    def ossl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ossl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "30",
         "-subj", "/CN=colabfs write_small bench CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    ossl("req", "-new", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature\n"
                "extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1, %s\n"
                % ", ".join("DNS:" + n for n in CERT_NAMES))
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.pem", "-days", "30", "-extfile", "server.ext")
    return os.path.join(d, "ca.pem")


class Tunnel:
    """An HTTP CONNECT proxy on 127.0.0.1 that joins every tunnel to 127.0.0.1:port."""

    def __init__(self, port):
        self.target = port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = c.recv(4096)
                if not chunk:
                    return
                head += chunk
            if not head.startswith(b"CONNECT "):
                c.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            up = socket.create_connection(("127.0.0.1", self.target))
            self.connections += 1
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            rest = head.split(b"\r\n\r\n", 1)[1]
            if rest:
                up.sendall(rest)
            threading.Thread(target=self._pump, args=(up, c), daemon=True).start()
            self._pump(c, up)
        except OSError:
            pass
        finally:
            c.close()

    @staticmethod
    def _pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self):
        self.sock.close()


class TlsEmulator(R.Emulator):
    """The suite's Emulator over TLS (its control calls trust the bench's CA)."""

    def __init__(self, bench, spec, name, ttfb_ms, extra, ca):
        super().__init__(bench, spec, name, ttfb_ms, 0, 0, extra)
        self.url = "https://127.0.0.1:%d" % self.port
        self.ctx = ssl.create_default_context(cafile=ca)

    def call(self, path, method="GET", headers=None, timeout=600, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, method=method, headers=headers or {}, data=data)
        with urllib.request.urlopen(req, timeout=timeout, context=self.ctx) as r:
            return json.loads(r.read() or b"null")


# ------------------------------------------------------------------------------------------------
# rclone


class Rclone:
    """`rclone mount emu:NAME MNT --vfs-cache-mode writes` of the emulator's My Drive."""

    def __init__(self, bench, emu, tunnel, ca, name):
        self.bench = bench
        self.mnt = os.path.join(bench.work, "mnt-rclone-" + name)
        os.makedirs(self.mnt)
        self.conf = os.path.join(bench.work, "rclone-%s.conf" % name)
        token = json.dumps({"access_token": R.TOKEN, "token_type": "Bearer",
                            "expiry": "2099-01-01T00:00:00Z"})
        with open(self.conf, "w") as f:
            f.write("[emu]\ntype = drive\nscope = drive\nroot_folder_id = %s\ntoken = %s\n"
                    % (R.ROOT_ID, token))
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.rc_port = s.getsockname()[1]
        s.close()
        self.env = dict(os.environ, HTTPS_PROXY="http://127.0.0.1:%d" % tunnel.port,
                        HTTP_PROXY="http://127.0.0.1:%d" % tunnel.port, NO_PROXY="",
                        SSL_CERT_FILE=ca)
        self.log = os.path.join(bench.work, "logs", "rclone-%s.log" % name)
        argv = ["rclone", "mount", "emu:", self.mnt, "--config", self.conf,
                "--vfs-cache-mode", "writes", "--cache-dir", os.path.join(bench.work, "rclone-cache-" + name),
                "--rc", "--rc-addr", "127.0.0.1:%d" % self.rc_port, "--rc-no-auth",
                "--log-file", self.log, "--log-level", "INFO"]
        self.proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        bench.procs.append(self.proc)
        R.GROUPS.add(self.proc.pid)

        def up():
            if self.proc.poll() is not None:
                raise RuntimeError("rclone mount exited: " + open(self.log, errors="replace").read()[-2000:])
            return R.is_mounted(self.mnt)
        R.wait_until(up, 60, "the rclone mount")

    def path(self, *rel):
        return os.path.join(self.mnt, *rel)

    def rc(self, cmd):
        req = urllib.request.Request("http://127.0.0.1:%d/%s" % (self.rc_port, cmd), method="POST",
                                     data=b"{}", headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def wait_uploaded(self, timeout):
        """Until rclone's VFS has nothing queued or uploading (twice in a row, 0.2 s apart)."""
        clean = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dc = self.rc("vfs/stats").get("diskCache", {})
            if dc.get("uploadsInProgress", 0) == 0 and dc.get("uploadsQueued", 0) == 0:
                clean += 1
                if clean == 2:
                    return
            else:
                clean = 0
            time.sleep(0.1)
        raise RuntimeError("rclone still uploading after %d s" % timeout)

    def umount(self):
        if R.is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        if R.is_mounted(self.mnt):
            subprocess.run(["umount", "-l", self.mnt], timeout=60)
        self.bench.stop_procs([self.proc])


# ------------------------------------------------------------------------------------------------
# the runs


def md5_of(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def drive_check(emu, top, local, shown):
    """Every file of the tree ``shown`` (the workload's folder in a mount) is in Drive at /top/...
    with the md5 of what the mount shows, and every file of ``local`` (the same workload on the
    local disk) outside .git has the same bytes in the mount.  Returns (files checked, problems)."""
    bad = []
    rels = tree_files(shown)
    for rel in rels:
        want = md5_of(os.path.join(shown, rel))
        items = [i for i in emu.call("/_emu/find?path=" + urllib.parse.quote("/%s/%s" % (top, rel)))["items"]
                 if not i["trashed"]]
        if len(items) != 1 or items[0].get("md5Checksum") != want:
            bad.append("%s: %s" % (rel, "%d items" % len(items) if len(items) != 1 else "md5 differs"))
    for rel in tree_files(local):
        if "/.git/" in "/" + rel:
            continue
        p = os.path.join(shown, rel)
        if not os.path.exists(p) or md5_of(p) != md5_of(os.path.join(local, rel)):
            bad.append("%s: not the bytes written" % rel)
    return len(rels), bad


def creations(emu):
    """Items Drive created so far (folders and files, by any upload type)."""
    return emu.stats().get("uploads", {}).get("creates", 0)


def timed(argv, cwd=None):
    t = time.monotonic()
    r = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=7200)
    if r.returncode != 0:
        raise RuntimeError("%s: rc %d: %s" % (" ".join(argv), r.returncode,
                                             r.stdout.decode(errors="replace")[-2000:]))
    return t, time.monotonic() - t


def workload_cmd(kind, src, dest):
    if kind == "tar":
        return ["tar", "xf", src, "-C", dest]
    return ["git", "-c", "advice.detachedHead=false", "clone", "-q", "file://" + src, os.path.join(dest, "repo")]


def run_local(b, kind, src):
    dest = os.path.join(b.work, "local-%s-%d" % (kind, random.randrange(1 << 30)))
    os.makedirs(dest)
    t0, secs = timed(workload_cmd(kind, src, dest))
    subprocess.run(["sync", "-f", dest], check=True, timeout=600)
    durable = time.monotonic() - t0
    return dest, secs, durable


def run_colabfs(b, m, kind, src, top, timeout):
    dest = m.path(top)
    os.mkdir(dest)
    c0 = creations(b.emu)
    t0, secs = timed(workload_cmd(kind, src, dest))
    r = subprocess.run([R.BIN, "sync", "--quiet", "--timeout", str(timeout), m.mnt], env=m.env,
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout + 60)
    durable = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError("colabfs sync rc %d: %s" % (r.returncode, r.stdout.decode(errors="replace")))
    return secs, durable, creations(b.emu) - c0


def run_rclone(b, rc, kind, src, top, timeout):
    dest = rc.path(top)
    os.mkdir(dest)
    c0 = creations(b.emu)
    t0, secs = timed(workload_cmd(kind, src, dest))
    rc.wait_uploaded(timeout)
    durable = time.monotonic() - t0
    return secs, durable, creations(b.emu) - c0


def variant(b, a, name, extra, rows, notes, tarball, repo):
    spec = os.path.join(b.work, "spec-%s.json" % name)
    with open(spec, "w") as f:
        json.dump({"root": {"id": R.ROOT_ID, "name": "My Drive"}, "items": []}, f)
    tls = os.path.join(b.work, "tls")
    b.emu = TlsEmulator(b, spec, "emu-" + name, a.ttfb_ms,
                        ["--tls-dir", tls, "--api-latency-ms", str(a.ttfb_ms)] + extra, b.ca)
    m = b.new_mount("colabfs-" + name, opts=["--ca-file=" + b.ca])   # --api-url: b.emu.url (https)
    rc = None
    if a.rclone:
        tunnel = Tunnel(b.emu.port)
        rc = Rclone(b, b.emu, tunnel, b.ca, name)
    for kind, src, nfiles in (("tar", tarball, a.files), ("git", repo, a.repo_files)):
        if kind not in a.workloads.split(","):
            continue
        R.log("%s: %s into the local disk" % (name, kind))
        local, l_exit, l_dur = run_local(b, kind, src)
        items = len(tree_files(local)) + tree_dirs(local)
        R.log("%s: %s into colabfs (%d files and folders)" % (name, kind, items))
        c_exit, c_dur, c_made = run_colabfs(b, m, kind, src, "c-" + kind, a.timeout)
        R.log("%s: %s colabfs: exit %.2f s, durable %.2f s (local %.2f / %.2f s)"
              % (name, kind, c_exit, c_dur, l_exit, l_dur))
        n, bad = drive_check(b.emu, "c-" + kind, local, m.path("c-" + kind))
        if bad:
            raise RuntimeError("colabfs %s: %d of %d files wrong in Drive: %s" % (kind, len(bad), n, bad[:5]))
        r_exit = r_dur = None
        r_made = 0
        if rc:
            R.log("%s: %s into rclone" % (name, kind))
            r_exit, r_dur, r_made = run_rclone(b, rc, kind, src, "r-" + kind, a.timeout)
            R.log("%s: %s rclone: exit %.2f s, durable %.2f s" % (name, kind, r_exit, r_dur))
            rn, rbad = drive_check(b.emu, "r-" + kind, local, rc.path("r-" + kind))
            if rbad:
                notes.append("%s %s rclone: %d of %d files not (yet) right in Drive: %s"
                             % (name, kind, len(rbad), rn, rbad[:3]))
        bound = items / a.write_rate
        label = "%s x %d files" % (kind, nfiles)
        rows.append(dict(variant=name, workload=label + ", to exit", colabfs=c_exit, rclone=r_exit,
                         local=l_exit, bound=None))
        rows.append(dict(variant=name, workload=label + ", to durable", colabfs=c_dur, rclone=r_dur,
                         local=l_dur, bound=bound))
        notes.append("%s %s: %d files and %d folders; Drive items created: colabfs %d, rclone %s; "
                     "%d files checked against Drive's md5"
                     % (name, kind, len(tree_files(local)), tree_dirs(local), c_made,
                        r_made if rc else "-", n))
        shutil.rmtree(local)
    st = m.stats()
    notes.append("%s: colabfs counters: %s" % (name, ", ".join(
        "%s %s" % (k, st[k]) for k in sorted(st) if k.startswith(("uploads_", "create_", "rate_limited", "drive_connections", "drive_requests"))
        and isinstance(st[k], (int, float)))))
    es = b.emu.stats()
    notes.append("%s: emulator: %d requests, uploads %s" % (name, es.get("requests", 0),
                                                            json.dumps(es.get("uploads", {}))))
    if rc:
        rc.umount()
    m.umount()
    b.emu = None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=1000, help="files in the tarball (1000)")
    ap.add_argument("--repo-files", type=int, default=2000, help="files in the git repository (2000)")
    ap.add_argument("--ttfb-ms", type=float, default=200,
                    help="emulator time to first byte, media and every other call (200)")
    ap.add_argument("--variants", default="free,limited", help="free, limited or both (free,limited)")
    ap.add_argument("--workloads", default="tar,git", help="tar, git or both (tar,git)")
    ap.add_argument("--write-rate", type=float, default=3.0,
                    help="creations/s the limited variant's emulator accepts; also the bound (3)")
    ap.add_argument("--timeout", type=int, default=3600, help="longest wait for durable, seconds (3600)")
    ap.add_argument("--workdir", default="/var/tmp", help="a folder on disk (/var/tmp)")
    ap.add_argument("--mount-opt", action="append", default=[], metavar="OPT",
                    help="extra colabfs mount option (repeatable)")
    ap.add_argument("--no-rclone", dest="rclone", action="store_false", help="skip the rclone rows")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.rclone and not shutil.which("rclone"):
        R.log("rclone not installed (apt-get install rclone): no rclone column")
        a.rclone = False
    variants = [v for v in a.variants.split(",") if v]
    b = R.Side(a.keep, a.mount_opt)
    rows, notes = [], []

    def body():
        b.ca = make_tls(os.path.join(b.work, "tls"))
        tarball = os.path.join(b.work, "small.tar")
        make_tarball(tarball, small_files(a.files, 100, SEED))
        repo = os.path.join(b.work, "repo")
        make_repo(repo, small_files(a.repo_files, 50, SEED + 1))
        for v in variants:
            extra = ["--write-rate", str(a.write_rate)] if v == "limited" else []
            variant(b, a, v, extra, rows, notes, tarball, repo)
    rc = b.run_in(body, "colabfs-smallbench-", a.workdir)

    def f(x):
        return "-" if x is None else "%.2f" % x
    print("colabfs small-file write bench: %s; host %d CPUs, load %s" % (
        " ".join(["bench/write_small.py"] + (argv or sys.argv[1:])), os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3])))
    print("%-8s %-34s %10s %10s %7s %9s %9s" % ("variant", "workload", "colabfs s", "rclone s", "ratio",
                                               "local s", "bound s"))
    for r in rows:
        ratio = "%.2f" % (r["rclone"] / r["colabfs"]) if r["rclone"] and r["colabfs"] else "-"
        print("%-8s %-34s %10s %10s %7s %9s %9s" % (r["variant"], r["workload"], f(r["colabfs"]),
                                                   f(r["rclone"]), ratio, f(r["local"]), f(r["bound"])))
    print("ratio = rclone s / colabfs s (above 1: colabfs faster); bound = Drive items / %g per s"
          % a.write_rate)
    for n in notes:
        print("  " + n)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"rows": rows, "notes": notes}, fh, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
