"""The shared cache tier over TLS with a password (issue 15): rediss:// with
--shared-cache-password-file and --shared-cache-ca-file, against a real
one-node Redis Cluster (Debian's redis-server with --tls-port, --tls-cluster
and --requirepass; a CA and a certificate for 127.0.0.1 made here with the
openssl command, nothing committed).

* A first mount downloads and publishes; a second, with an empty cache, is
  served by the tier (no media request for the files), every byte compared.
* The password is in no colabfs process's argv, no log line, no stats value.
* A mount that does not trust the cluster's CA (no --shared-cache-ca-file)
  or gives a wrong password still reads every byte right, from Drive, with
  tier_up 0, and says why in its log (certificate / password), again without
  the password.
"""

import json
import os
import shutil
import subprocess

import pytest

import helpers as H
import chaos_helpers as X
import redis_cluster as RC
import tier_values as TV
from conftest import SEED, SESSION_TOKEN

KiB = H.KiB
PASSWORD = "tier-tls-pw-" + os.urandom(8).hex()


def need(cmd):
    if not shutil.which(cmd):
        pytest.skip("%s is not installed" % cmd)


def openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, capture_output=True, timeout=60)
    assert r.returncode == 0, "openssl %s: %s" % (args[0], r.stderr.decode(errors="replace"))


@pytest.fixture
def tls_cluster(tmp_path):
    """A one-node TLS cluster with a password: (url, ca file, password file)."""
    need("redis-server")
    need("openssl")
    d = tmp_path / "redis"
    d.mkdir()
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", "2", "-subj", "/CN=colabfs-test-ca", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
            "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "srv.crt", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    port = RC.free_ports(1)[0]
    conf = d / "redis.conf"  # the password in a file, not in redis-server's argv either
    conf.write_text("port 0\ntls-port %d\nbind 127.0.0.1\ntls-cert-file srv.crt\n"
                    "tls-key-file srv.key\ntls-ca-cert-file ca.crt\ntls-auth-clients no\n"
                    "cluster-enabled yes\ntls-cluster yes\nsave \"\"\nappendonly no\n"
                    "requirepass %s\nlogfile redis.log\n" % (port, PASSWORD))
    p = H.register_proc(subprocess.Popen(["redis-server", str(conf)], cwd=d,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    cli = ["redis-cli", "--tls", "--cacert", str(d / "ca.crt"), "-p", str(port),
           "--no-auth-warning", "-a", PASSWORD]
    try:
        H.wait_until(lambda: subprocess.run(cli + ["PING"], capture_output=True, timeout=10)
                     .stdout.strip() == b"PONG", 20, what="the TLS redis-server answering")
        r = subprocess.run(cli + ["CLUSTER", "ADDSLOTSRANGE", "0", "16383"], capture_output=True,
                           timeout=10)
        assert r.stdout.strip() == b"OK", r
        H.wait_until(lambda: b"cluster_state:ok" in subprocess.run(
            cli + ["CLUSTER", "INFO"], capture_output=True, timeout=10).stdout, 20,
            what="cluster_state:ok")
        pw = d / "password"
        pw.write_text(PASSWORD + "\n")
        pw.chmod(0o600)
        yield "rediss://127.0.0.1:%d" % port, str(d / "ca.crt"), str(pw)
    finally:
        H.reap_proc(p)


def read_all(m, t):
    for rel in sorted(t.data):
        with open(m.path(rel), "rb") as f:
            got = f.read()
        assert got == t.data[rel], "%s: %d bytes, want %d" % (rel, len(got), len(t.data[rel]))


def colabfs_cmdlines():
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    cl = f.read()
            except OSError:
                continue
            if b"colabfs" in cl:
                out.append(cl)
    return out


@pytest.mark.deadline(120)
def test_tier_over_tls_with_a_password(tls_cluster, emulator_factory, mount_factory, tmp_path,
                                       capsys):
    url, ca, pwfile = tls_cluster
    t = X.SpecTree(tmp_path / "tree", "tiertls", SEED + 15)
    t.folder("d")
    for i in range(40):
        t.file("d/f%02d.bin" % i, t.rng.randrange(4 * KiB, 300 * KiB))
    t.write_spec()
    emu = emulator_factory(t.spec_path, "emu-tier-tls", access_token=SESSION_TOKEN, ttfb_ms=5)
    key = TV.key_opts(tmp_path / "key")
    opts = ["--shared-cache=" + url, "--shared-cache-password-file=" + pwfile] + key
    m1 = mount_factory.new(emu, name="tls1", extra=opts + ["--shared-cache-ca-file=" + ca])
    read_all(m1, t)
    # a block is published after it was handed to its reader (the SET may still be on
    # its way when the read returns): wait for every file's, with a deadline
    try:
        H.wait_until(lambda: X.cstats(m1)["tier_published_total"] >= len(t.data), 15,
                     what="every file published")
    except H.Timeout:
        pass  # the assertion below says what the mount counted
    s1 = X.cstats(m1)
    assert s1["tier_up"] == 1 and s1["tier_published_total"] >= len(t.data), s1
    media0 = emu.stats()["by_kind"].get("media", 0)
    m2 = mount_factory.new(emu, name="tls2", extra=opts + ["--shared-cache-ca-file=" + ca])
    read_all(m2, t)
    s2 = X.cstats(m2)
    media = emu.stats()["by_kind"].get("media", 0) - media0
    assert media == 0, "the second mount downloaded %d times; tier %r" % (media, s2)
    assert s2["tier_hits_total"] >= len(t.data), s2
    # the password: not in argv, stats or logs
    cmdlines = colabfs_cmdlines()
    assert cmdlines, "no colabfs process found"
    assert not [c for c in cmdlines if PASSWORD.encode() in c]
    for m in (m1, m2):
        assert PASSWORD not in json.dumps(X.cstats(m))

    # no CA for the cluster, and a wrong password: Drive serves, the log says why
    bad = tmp_path / "wrong-password"
    bad.write_text("not-" + PASSWORD + "\n")
    bad.chmod(0o600)  # a password file others may read is refused (issue 24)
    m3 = mount_factory.new(emu, name="tls3", extra=opts)  # the system CAs: no trust
    m4 = mount_factory.new(emu, name="tls4", extra=["--shared-cache=" + url,
                                                      "--shared-cache-ca-file=" + ca,
                                                      "--shared-cache-password-file=" + str(bad)]
                           + key)
    for m in (m3, m4):
        read_all(m, t)
        st = X.cstats(m)
        assert st["tier_up"] == 0 and st["tier_hits_total"] == 0, st
    logs = []
    for m in (m1, m2, m3, m4):
        with open(m.log_file, errors="replace") as f:
            logs.append(f.read())
    assert all(PASSWORD not in text for text in logs)
    l3, l4 = logs[2], logs[3]
    assert "certificate" in l3, l3[-2000:]
    assert "password was refused" in l4, l4[-2000:]
    H.report(capsys, "tier-tls", "second mount: %d tier hits, 0 downloads; no-CA and "
             "wrong-password mounts read from Drive; password in no argv, stats or log"
             % s2["tier_hits_total"])
