"""Colab's own credentials (issue 23): the notebook user's token from Colab's credential endpoint,
a metadata server at the address in $TBE_EPHEM_CREDS_ADDR (else $TBE_CREDS_ADDR), as Colab's
drive.mount uses it.  Here the emulator's metadata server plays that endpoint; each mount has only
the TBE variable: no credentials file, no ADC file (HOME is an empty folder), no
COLABFS_ACCESS_TOKEN, no GCE_METADATA_HOST.  The emulator is not in its open mode, so a Drive call
succeeds only with a token its metadata server issued.

- every byte of a file read through the mount is right, a write reaches Drive, the log and
  `colabfs doctor` name the source, and no token is in the log or any argv;
- TBE_CREDS_ADDR alone (in the URL form) works too;
- an endpoint that refuses connections fails the mount at once with the fix (colabfs.mount()),
  never falling back to the GCE metadata server (a working one is offered); a malformed address
  fails naming the variable; doctor's credentials line gives the same fix;
- a token without Drive (the endpoint before the notebook's consent: --metadata-scope) fails the
  mount, and doctor's Drive line, with the colabfs.mount() fix."""

import json
import os
import socket
import time
import urllib.parse

import pytest

import helpers as H
from conftest import SESSION_TOKEN

FIX = 'run colabfs.mount("/content/data") in the notebook'
NO_TOKEN = "Colab's credential endpoint gave no token"
NO_DRIVE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
TOKEN_PREFIX = "ya29."   # every token the emulator issues starts so


@pytest.fixture(scope="module")
def cemu(tree, emulator_factory):
    return emulator_factory(tree.small_spec_path, "emu-colab", access_token=SESSION_TOKEN)


@pytest.fixture(scope="module")
def noscope_emu(tree, emulator_factory):
    """The endpoint before the notebook's consent: a token without any Drive scope."""
    return emulator_factory(tree.small_spec_path, "emu-colab-noscope", access_token=SESSION_TOKEN,
                            extra=["--metadata-scope", NO_DRIVE_SCOPE])


@pytest.fixture
def closed_port():
    """A loopback port that refuses connections (bound, never listening)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


@pytest.fixture(autouse=True)
def _no_colab_adc():
    if os.path.exists("/content/.adc/adc.json"):
        pytest.skip("/content/.adc/adc.json exists here: it comes before Colab's endpoint")


def addr(emu):
    return "127.0.0.1:%d" % emu.port


def colab_env(env, tbe):
    """Only the TBE variables (tbe) name a credential source."""
    for k in ("GCE_METADATA_HOST", "GCE_METADATA_IP", "COLABFS_ACCESS_TOKEN",
              "GOOGLE_APPLICATION_CREDENTIALS"):
        env.pop(k, None)
    env.update(tbe)
    return env


def colab_mount(mount_factory, emu, tbe, name, check=True, gce=None):
    m = mount_factory.new(emu, name=name, token=None, start=False)
    colab_env(m.env, tbe)
    if gce:
        m.env["GCE_METADATA_HOST"] = gce
    assert not os.listdir(m.env["HOME"])
    m.start(check=check)
    return m


def doctor(colabfs, tmp_path, emu, tbe):
    home = tmp_path / "dhome"
    home.mkdir(exist_ok=True)
    env = colab_env(H.clean_env(home=home), tbe)
    rc, out, err = H.run_cmd(H.without_other_mounts(
        [colabfs, "doctor", "--json", "--api-url=" + emu.url,
         "--cache-dir=" + str(tmp_path / "dcache")]), timeout=60, env=env)
    assert rc is not None, "doctor timed out: " + err
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert TOKEN_PREFIX not in out + err
    return rc, checks, out


def metadata_asks(emu):
    return [(e["path"], e["status"]) for e in emu.log() if e.get("kind") == "metadata"]


def log_text(m):
    with open(m.log_file, "rb") as f:
        return f.read().decode("utf-8", "replace")


def no_token_in_argv(m):
    sup = m.xattr_pid()
    srv = H.wait_until(lambda: H.serve_pid(sup), 30, what="the server pid")
    for pid in (sup, srv):
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            assert TOKEN_PREFIX.encode() not in f.read(), pid


def drive_bytes(emu, name):
    """The bytes of the one item named name in the emulator's Drive."""
    st, _, body = emu.request("GET", "/_emu/find?name=" + urllib.parse.quote(name))
    assert st == 200, body
    items = [i for i in json.loads(body)["items"] if not i.get("trashed")]
    assert len(items) == 1, items
    st, _, data = emu.media(items[0]["id"], token=SESSION_TOKEN)
    assert st == 200, data[:300]
    return data


@pytest.mark.deadline(180)
def test_ephemeral_endpoint_reads_writes_and_names_itself(mount_factory, cemu, tree, colabfs,
                                                          tmp_path):
    before = len(metadata_asks(cemu))
    m = colab_mount(mount_factory, cemu, {"TBE_EPHEM_CREDS_ADDR": addr(cemu)}, "colab-ephem")
    source = "Colab (TBE_EPHEM_CREDS_ADDR http://%s)" % addr(cemu)
    log = log_text(m)
    assert "credentials from " + source in log, m.log_tail(40)
    # asked the endpoint with Metadata-Flavor (else 403) for the drive scope
    asks = metadata_asks(cemu)[before:]
    assert asks and all(st == 200 for _, st in asks), asks
    # every byte of a 64 MiB file, and a small one
    assert H.compare_stream(m.path("random64.bin"), tree.small_model.lookup("random64.bin")) == 64 * H.MiB
    H.compare_stream(m.path("top.txt"), tree.small_model.lookup("top.txt"))
    # a write reaches Drive
    data = os.urandom(300000)
    with open(m.path("colab-write.bin"), "wb") as f:
        f.write(data)
    rc, out, err = H.run_cmd([colabfs, "sync", "--timeout", "60", m.mnt], 90, env=m.env)
    assert rc == 0, out + err + m.log_tail(40)
    assert drive_bytes(cemu, "colab-write.bin") == data
    # doctor names the source, and all is well
    rc, ck, out = doctor(colabfs, tmp_path, cemu, {"TBE_EPHEM_CREDS_ADDR": addr(cemu)})
    assert ck["credentials"]["status"] == "ok" and ck["drive"]["status"] == "ok", out
    assert ck["credentials"]["detail"].startswith(source + "; token obtained"), out
    # no token in the log or any argv
    no_token_in_argv(m)
    assert TOKEN_PREFIX not in log_text(m)
    assert TOKEN_PREFIX not in "".join(m.result[1:])


@pytest.mark.deadline(120)
def test_tbe_creds_addr_alone_as_a_url(mount_factory, cemu, tree):
    url = "http://%s/" % addr(cemu)
    m = colab_mount(mount_factory, cemu, {"TBE_CREDS_ADDR": url}, "colab-tbe")
    H.compare_stream(m.path("level1/level2/l2.bin"), tree.small_model.lookup("level1/level2/l2.bin"))
    log = log_text(m)
    assert "credentials from Colab (TBE_CREDS_ADDR http://%s)" % addr(cemu) in log, m.log_tail(40)
    assert TOKEN_PREFIX not in log


@pytest.mark.deadline(120)
def test_refused_endpoint_fails_at_once_without_fallback(mount_factory, cemu, colabfs, tmp_path,
                                                         closed_port):
    """A working GCE metadata server is offered (GCE_METADATA_HOST): it must not be asked."""
    before = len(metadata_asks(cemu))
    tbe = {"TBE_EPHEM_CREDS_ADDR": "127.0.0.1:%d" % closed_port}
    t0 = time.monotonic()
    m = colab_mount(mount_factory, cemu, tbe, "colab-refused", check=False, gce=addr(cemu))
    took = time.monotonic() - t0
    rc, out, err = m.result
    assert rc == 1, m.result
    assert took < 20, took
    assert not H.is_fuse_mounted(m.mnt)
    want = "colabfs: TBE_EPHEM_CREDS_ADDR http://127.0.0.1:%d: %s (" % (closed_port, NO_TOKEN)
    assert want in err and FIX in err and "drive.mount(" in err, err
    assert metadata_asks(cemu)[before:] == []  # no fall back to the VM's account
    # doctor: the credentials line FAILs with that fix
    rc, ck, out = doctor(colabfs, tmp_path, cemu, tbe)
    assert rc == 1, out
    assert ck["credentials"]["status"] == "FAIL", out
    assert NO_TOKEN in ck["credentials"]["detail"], out
    assert ck["credentials"]["fix"].startswith(FIX), out
    # a malformed address: named, refused, nothing asked
    m = colab_mount(mount_factory, cemu, {"TBE_EPHEM_CREDS_ADDR": "ftp://" + addr(cemu)},
                    "colab-bad", check=False, gce=addr(cemu))
    assert m.result[0] == 1 and "colabfs: TBE_EPHEM_CREDS_ADDR ftp://" in m.result[2], m.result
    assert "not http or https" in m.result[2], m.result
    assert metadata_asks(cemu)[before:] == []


@pytest.mark.deadline(120)
def test_token_without_drive_says_colabfs_mount(mount_factory, noscope_emu, colabfs, tmp_path):
    """The mount fails (Drive answers 403 insufficientPermissions) and says so, with the fix; so
    does doctor's Drive line."""
    tbe = {"TBE_EPHEM_CREDS_ADDR": addr(noscope_emu)}
    m = colab_mount(mount_factory, noscope_emu, tbe, "colab-noscope", check=False)
    rc, out, err = m.result
    assert rc == 1 and not H.is_fuse_mounted(m.mnt), m.result
    assert "Colab's credential endpoint has no access to Drive: " + FIX in err, err
    assert TOKEN_PREFIX not in out + err + log_text(m)
    rc, ck, out = doctor(colabfs, tmp_path, noscope_emu, tbe)
    assert rc == 1, out
    assert ck["credentials"]["detail"].startswith(
        "Colab (TBE_EPHEM_CREDS_ADDR http://%s)" % addr(noscope_emu)), out
    assert ck["drive"]["status"] == "FAIL", out
    assert "401/403" in ck["drive"]["detail"] or "403" in ck["drive"]["detail"], out
    assert FIX in ck["drive"]["fix"], out
    assert metadata_asks(noscope_emu), "the endpoint was not asked"
