"""A real Redis Cluster for the shared-cache-tier tests (issue 15), plain stdlib.

``RedisCluster`` starts Debian's ``redis-server`` (7.0) as 6 nodes on free
loopback ports, 3 masters and 3 replicas, each in a temp folder of its own,
joins them with ``redis-cli --cluster create ... --cluster-replicas 1
--cluster-yes`` and waits (a bounded poll) until every node reports
``cluster_state:ok`` with all 16384 slots assigned, and every replica's link to
its master is up (so a killed master can fail over).

API (ports are ints; a node is a dict, see ``nodes()``):

* ``seeds`` -- ``"redis://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3"`` (the
  masters at creation), the value of ``colabfs mount --shared-cache=``;
* ``nodes()`` / ``masters()`` / ``replicas()`` -- parsed CLUSTER NODES of a live
  node (masters() and replicas() leave out nodes flagged ``fail``);
* ``wait_replicated(port)`` -- until a master's replica has every write it made;
* ``kill_master(i)`` -- SIGKILL the process of ``masters()[i]``; returns its
  port; ``wait_failover(timeout)`` -- until one of its replicas is a master
  holding its slots and every live node says cluster_state:ok again;
* ``stop_all()`` -- SIGKILL every node (the folders stay until ``close()``);
* ``cli(port, *args)`` -- ``redis-cli -c -p PORT ARGS``, stdout as text;
* ``command(*args)`` -- one command over RESP, binary-safe, following MOVED
  and ASK redirections (``get(key)``, ``setrange(key, off, data)``);
* ``keys(pattern)`` -- SCAN MATCH over every live master, sorted str list;
* ``close()`` -- kills and reaps every process and removes the folders;
  idempotent, never raises (call it from a fixture finalizer).

Every wait has a deadline; the processes are registered with helpers.LIVE_PROCS
(when helpers is importable) so the suite's emergency cleanup reaps them too.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import helpers as _H  # bench/ puts tests/e2e on sys.path too

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"
HOST = "127.0.0.1"
SLOTS = 16384


class RedisError(Exception):
    """An error reply (``-ERR ...``) or a protocol problem."""


def available():
    """None when redis-server and redis-cli are installed, else why not."""
    for p in (REDIS_SERVER, REDIS_CLI):
        if not (os.path.isfile(p) and os.access(p, os.X_OK)):
            return "%s is not installed (apt-get install redis-server redis-tools)" % p
    return None




def _wait(cond, timeout, what, interval=0.05):
    """helpers.wait_until (a deadline on every wait), what before interval."""
    return _H.wait_until(cond, timeout, interval=interval, what=what)


def _port_free(port):
    for p in (port, port + 10000):  # the cluster bus is port + 10000
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind((HOST, p))
        except OSError:
            return False
        finally:
            s.close()
    return True


def free_ports(n, lo=20000, hi=55000):
    """n ports P with P and P + 10000 free on loopback (random start, so two
    suites running at once rarely collide; a collision makes start() retry)."""
    import random
    out = []
    p = random.Random(os.getpid() ^ time.monotonic_ns()).randrange(lo, hi - 100)
    while len(out) < n:
        if p >= hi:
            p = lo
        if p not in out and _port_free(p):
            out.append(p)
        p += 1
    return out


# --------------------------------------------------------------------------
# a minimal RESP2 client


def _encode(args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


class _Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _fill(self):
        b = self.sock.recv(1 << 16)
        if not b:
            raise RedisError("connection closed")
        self.buf += b

    def line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        ln, _, self.buf = self.buf.partition(b"\r\n")
        return ln

    def exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def reply(self):
        ln = self.line()
        t, rest = ln[:1], ln[1:]
        if t == b"+":
            return rest
        if t == b"-":
            return RedisError(rest.decode("utf-8", "replace"))
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.exact(n)
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RedisError("bad reply line %r" % ln)


def resp(port, *args, timeout=5.0, host=HOST, asking=False):
    """One command to one node; returns the reply (bytes, int, list, None) or a
    RedisError instance for an error reply.  Raises OSError / RedisError when
    the node cannot be reached."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        r = _Reader(s)
        if asking:
            s.sendall(_encode(["ASKING"]))
            r.reply()
        s.sendall(_encode(list(args)))
        return r.reply()


# --------------------------------------------------------------------------


class RedisCluster:
    def __init__(self, base_dir=None, *, nodes=6, replicas=1, extra_args=(),
                 node_timeout_ms=1500, maxmemory="256mb"):
        self.n = nodes
        self.nreplicas = replicas
        self.extra_args = [str(a) for a in extra_args]
        self.node_timeout_ms = node_timeout_ms
        self.maxmemory = maxmemory
        self._own_base = base_dir is None
        self.base = base_dir or tempfile.mkdtemp(prefix="colabfs-redis-")
        os.makedirs(self.base, exist_ok=True)
        self.ports = []
        self.procs = {}     # port -> Popen
        self.dirs = {}      # port -> folder
        self._logs = {}
        self.seed_ports = []
        self.killed = set()
        self.closed = False

    # ---------------------------------------------------------------- start

    def start(self, timeout=60, attempts=3):
        why = available()
        if why:
            raise RuntimeError(why)
        last = None
        for attempt in range(attempts):
            try:
                self._start_once(timeout, attempt)
                return self
            except _PortTaken as e:  # another program took a port in between: new ports
                last = e
                self._kill_all()
        raise RuntimeError("redis cluster did not start: %s" % last)

    def _start_once(self, timeout, attempt):
        deadline = time.monotonic() + timeout
        self.ports = free_ports(self.n)
        self.procs, self.dirs = {}, {}
        for port in self.ports:
            d = os.path.join(self.base, "try%d-node%d" % (attempt, port))
            os.makedirs(d)
            self.dirs[port] = d
            argv = [REDIS_SERVER, "--port", str(port), "--bind", HOST, "--dir", d,
                    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", str(self.node_timeout_ms),
                    "--save", "", "--appendonly", "no", "--daemonize", "no",
                    "--maxmemory", self.maxmemory, "--maxmemory-policy", "allkeys-lru",
                    "--logfile", ""] + self.extra_args
            log = open(os.path.join(d, "redis.log"), "wb")
            self._logs[port] = log
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=d)
            _H.register_proc(p)
            self.procs[port] = p
        for port in self.ports:
            def up(port=port):
                p = self.procs[port]
                if p.poll() is not None:
                    tail = self.log_tail(port)
                    if "Address already in use" in tail:
                        raise _PortTaken("port %d: %s" % (port, tail[-300:]))
                    raise RuntimeError("redis-server on %d exited rc=%s: %s"
                                       % (port, p.returncode, tail))
                try:
                    return resp(port, "PING", timeout=1) == b"PONG"
                except OSError:
                    return False
            _wait(up, max(1, deadline - time.monotonic()), "redis-server on port %d" % port)
        argv = [REDIS_CLI, "--cluster", "create"] + ["%s:%d" % (HOST, p) for p in self.ports] + \
            ["--cluster-replicas", str(self.nreplicas), "--cluster-yes"]
        try:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=max(5, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise RuntimeError("redis-cli --cluster create did not finish in time")
        out = r.stdout.decode("utf-8", "replace") + r.stderr.decode("utf-8", "replace")
        if r.returncode != 0 or "[OK] All 16384 slots covered" not in out:
            raise RuntimeError("redis-cli --cluster create rc=%d: %s" % (r.returncode, out[-3000:]))
        self.create_output = out
        _wait(self._all_ok, max(1, deadline - time.monotonic()),
              "cluster_state:ok and 16384 slots on every node")
        nmasters = self.n // (self.nreplicas + 1)
        _wait(lambda: len(self.masters()) == nmasters and
              len(self.replicas()) == self.n - nmasters and self._replicas_linked(),
              max(1, deadline - time.monotonic()),
              "%d masters and their replicas linked" % nmasters)
        self.seed_ports = [m["port"] for m in sorted(self.masters(), key=lambda m: m["port"])]

    # ------------------------------------------------------------- queries

    def live_ports(self):
        return [p for p in self.ports if p in self.procs and self.procs[p].poll() is None]

    def cluster_info(self, port):
        """CLUSTER INFO of one node as a dict of strings."""
        v = resp(port, "CLUSTER", "INFO", timeout=2)
        if isinstance(v, Exception):
            raise v
        out = {}
        for ln in v.decode().splitlines():
            k, _, val = ln.partition(":")
            if k:
                out[k.strip()] = val.strip()
        return out

    def _node_ok(self, port):
        try:
            info = self.cluster_info(port)
        except (OSError, RedisError):
            return False
        return info.get("cluster_state") == "ok" and \
            info.get("cluster_slots_assigned") == str(SLOTS)

    def _all_ok(self):
        live = self.live_ports()
        return bool(live) and all(self._node_ok(p) for p in live)

    def _replicas_linked(self):
        for r in self.replicas():
            try:
                v = resp(r["port"], "INFO", "replication", timeout=2)
            except OSError:
                return False
            if isinstance(v, Exception) or b"master_link_status:up" not in v:
                return False
        return True

    def nodes(self, port=None):
        """CLUSTER NODES of a live node: [{"id", "host", "port", "flags" (set),
        "role" ("master"|"replica"), "master_id" (None for a master),
        "link" (connected|disconnected), "slots" ([(lo, hi)]), "failed"}]."""
        ports = [port] if port else self.live_ports()
        last = None
        for p in ports:
            try:
                v = resp(p, "CLUSTER", "NODES", timeout=2)
            except OSError as e:
                last = e
                continue
            if isinstance(v, Exception):
                last = v
                continue
            return _parse_nodes(v.decode())
        raise RedisError("no live node answered CLUSTER NODES: %s" % last)

    def masters(self):
        return sorted((n for n in self.nodes() if n["role"] == "master" and not n["failed"]),
                      key=lambda n: n["port"])

    def replicas(self):
        return sorted((n for n in self.nodes() if n["role"] == "replica" and not n["failed"]),
                      key=lambda n: n["port"])

    def master_of_slot(self, slot):
        for m in self.masters():
            if any(lo <= slot <= hi for lo, hi in m["slots"]):
                return m
        return None

    def keyslot(self, key):
        return self.command("CLUSTER", "KEYSLOT", key)

    @property
    def seeds(self):
        return "redis://" + ",".join("%s:%d" % (HOST, p) for p in self.seed_ports)

    # ------------------------------------------------------------- commands

    def cli(self, port, *args, timeout=10):
        """``redis-cli -c -p PORT ARGS`` (following redirections); its stdout."""
        r = subprocess.run([REDIS_CLI, "-c", "-h", HOST, "-p", str(port)] + [str(a) for a in args],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
        return r.stdout.decode("utf-8", "replace")

    def command(self, *args, port=None, timeout=5.0, max_redirects=8):
        """One command over RESP from a live node (``port`` or the first live one),
        following MOVED/ASK; returns the reply, raises RedisError for an error reply."""
        ports = [port] if port else self.live_ports()
        if not ports:
            raise RedisError("no live node")
        host, p, asking = HOST, ports[0], False
        for _ in range(max_redirects):
            try:
                v = resp(p, *args, timeout=timeout, host=host, asking=asking)
            except OSError:
                if port or len(ports) < 2:
                    raise
                ports = ports[1:]
                p, asking = ports[0], False
                continue
            if isinstance(v, RedisError):
                msg = str(v)
                if msg.startswith(("MOVED ", "ASK ")):
                    kind, _, addr = msg.split(" ")
                    h, _, pp = addr.rpartition(":")
                    host, p, asking = h or HOST, int(pp), kind == "ASK"
                    continue
                raise v
            return v
        raise RedisError("too many redirections for %r" % (args,))

    def get(self, key):
        return self.command("GET", key)

    def setrange(self, key, offset, data):
        return self.command("SETRANGE", key, offset, data)

    def keys(self, pattern="*"):
        """Every key matching pattern, over all live masters (SCAN), sorted."""
        out = set()
        for m in self.masters():
            cursor = b"0"
            for _ in range(100000):
                v = resp(m["port"], "SCAN", cursor, "MATCH", pattern, "COUNT", 1000, timeout=5)
                if isinstance(v, Exception):
                    raise v
                cursor, batch = v
                out.update(k.decode("utf-8", "replace") for k in batch)
                if cursor == b"0":
                    break
        return sorted(out)

    def flushall(self):
        for m in self.masters():
            v = resp(m["port"], "FLUSHALL", timeout=10)
            if isinstance(v, Exception):
                raise v

    # ------------------------------------------------------------- faults

    def wait_replicated(self, port, timeout=15):
        """Until the replica of master ``port`` has taken every write the master
        made (its offset in INFO replication reaches master_repl_offset).
        Replication is asynchronous, and WAIT counts only the writes of the
        connection it is sent on."""
        def caught_up():
            v = resp(port, "INFO", "replication", timeout=5)
            if isinstance(v, Exception):
                return False
            info = dict(ln.split(":", 1) for ln in v.decode().splitlines() if ":" in ln)
            fields = dict(kv.split("=", 1) for kv in info.get("slave0", "").split(",") if "=" in kv)
            return "offset" in fields and int(fields["offset"]) >= int(info["master_repl_offset"])
        _wait(caught_up, timeout, "the replica of %d caught up" % port, interval=0.02)

    def kill_master(self, i):
        """SIGKILL the process of masters()[i]; returns its port."""
        m = self.masters()[i]
        port = m["port"]
        self._pre_kill_masters = {n["id"]: n for n in self.masters()}
        self._killed_id = m["id"]
        p = self.procs[port]
        p.kill()
        p.wait(timeout=10)
        self.killed.add(port)
        return port

    def wait_failover(self, timeout=30):
        """Until a replica of the killed master is a master holding its slots and
        every live node says cluster_state:ok with 16384 slots; returns the new
        master's node dict."""
        killed = getattr(self, "_killed_id", None)
        if killed is None:
            raise RuntimeError("wait_failover() without kill_master()")
        old = self._pre_kill_masters[killed]

        def promoted():
            try:
                nodes = self.nodes()
            except RedisError:
                return None
            dead = [n for n in nodes if n["id"] == killed]
            if not dead or not dead[0]["failed"]:
                return None
            for n in nodes:
                if n["role"] == "master" and not n["failed"] and n["id"] not in self._pre_kill_masters \
                        and set(old["slots"]) <= set(n["slots"]):
                    return n
            return None
        new = _wait(promoted, timeout, "a replica promoted in place of the killed master",
                    interval=0.1)
        _wait(self._all_ok, timeout, "cluster_state:ok again after the failover", interval=0.1)
        return new

    def stop_all(self):
        """SIGKILL every node (the cluster is gone; folders stay until close())."""
        self._kill_all()

    def _kill_all(self):
        for port, p in list(self.procs.items()):
            try:
                if p.poll() is None:
                    p.kill()
                p.wait(timeout=10)
            except Exception:
                pass
            with _H._REG_LOCK:
                _H.LIVE_PROCS.discard(p)
            self.killed.add(port)
        for log in self._logs.values():
            try:
                log.close()
            except Exception:
                pass

    def pids(self):
        return [p.pid for p in self.procs.values()]

    def log_tail(self, port, n=2000):
        try:
            with open(os.path.join(self.dirs[port], "redis.log"), "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except (OSError, KeyError):
            return ""

    def close(self):
        """Kill and reap every node and remove the folders.  Never raises."""
        if self.closed:
            return
        self.closed = True
        try:
            self._kill_all()
        finally:
            for d in self.dirs.values():
                shutil.rmtree(d, ignore_errors=True)
            if self._own_base:
                shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _PortTaken(RuntimeError):
    pass


def _parse_nodes(text):
    out = []
    for ln in text.splitlines():
        f = ln.split()
        if len(f) < 8:
            continue
        addr = f[1].split("@")[0]
        host, _, port = addr.rpartition(":")
        flags = set(f[2].split(","))
        slots = []
        for s in f[8:]:
            if s.startswith("["):
                continue  # a slot being migrated
            lo, _, hi = s.partition("-")
            slots.append((int(lo), int(hi or lo)))
        out.append({"id": f[0], "host": host, "port": int(port) if port else 0, "flags": flags,
                    "role": "master" if "master" in flags else "replica",
                    "master_id": None if f[3] == "-" else f[3], "link": f[7], "slots": slots,
                    "failed": bool(flags & {"fail", "fail?", "noaddr"})})
    return out


def crc32c(data, _table=[]):
    """CRC-32C (Castagnoli), the checksum of a tier value's header."""
    if not _table:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
            _table.append(c)
    t = _table
    c = 0xFFFFFFFF
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF
