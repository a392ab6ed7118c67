"""A fake Redis Cluster node for the shared-cache tests (issue 24), stdlib only.

``FakeNode(host="127.0.0.1", password=None)`` listens on ``host`` (any
127.x.y.z works without setup: all of 127/8 is loopback) at a free port, a
thread per connection, and answers as a one-node cluster that serves every
slot (``CLUSTER SLOTS`` names itself) and holds nothing (GET and MGET: nil;
SET: OK; EVAL: 0).  What the test steers, by setting attributes at any time:

* ``redirect = ("MOVED"|"ASK", host, port)`` -- GET and MGET answer
  ``-MOVED 1234 host:port`` (or ASK);
* ``huge_mget = True`` -- MGET answers ``*2`` and a 300 MiB bulk string,
  streamed (up to 600 MiB in all, until the client hangs up);
* ``delay_s = S`` -- GET and MGET are answered S seconds late;
* ``password`` -- when set, AUTH must give it (else ``-WRONGPASS``) and
  commands before AUTH get ``-NOAUTH``.

What it records (read them after the mount did something): ``connections``
(accepted), ``auths`` (every AUTH's password, in order), ``commands`` (a
Counter of command names).  ``close()`` stops it and every connection.
"""

import collections
import socket
import threading
import time


class FakeNode:
    def __init__(self, host="127.0.0.1", password=None):
        self.host = host
        self.password = password
        self.redirect = None
        self.huge_mget = False
        self.delay_s = 0
        self.connections = 0
        self.auths = []
        self.commands = collections.Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._socks = []
        self._threads = []
        self._lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._lsock.bind((host, 0))
        self._lsock.listen(64)
        self._lsock.settimeout(0.1)
        self.port = self._lsock.getsockname()[1]
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    @property
    def url(self):
        return "redis://%s:%d" % (self.host, self.port)

    def _accept(self):
        while not self._stop.is_set():
            try:
                s, _ = self._lsock.accept()
            except OSError:
                continue
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections += 1
                self._socks.append(s)
            t = threading.Thread(target=self._serve, args=(s,), daemon=True)
            t.start()
            with self._lock:
                self._threads.append(t)

    def _serve(self, s):
        f = s.makefile("rb")
        authed = self.password is None
        try:
            while not self._stop.is_set():
                line = f.readline()
                if not line.startswith(b"*"):
                    return
                argv = []
                for _ in range(int(line[1:])):
                    n = int(f.readline()[1:])
                    argv.append(f.read(n + 2)[:-2])
                cmd = argv[0].upper().decode()
                with self._lock:
                    self.commands[cmd] += 1
                    if cmd == "AUTH":
                        self.auths.append(argv[-1].decode(errors="replace"))
                if cmd == "AUTH":
                    authed = self.password is None or argv[-1].decode() == self.password
                    s.sendall(b"+OK\r\n" if authed else
                              b"-WRONGPASS invalid username-password pair\r\n")
                elif not authed:
                    s.sendall(b"-NOAUTH Authentication required.\r\n")
                else:
                    self._answer(s, cmd, argv)
        except (OSError, ValueError):
            pass
        finally:
            try:
                s.close()
            except OSError:
                pass

    def _answer(self, s, cmd, argv):
        if cmd in ("GET", "MGET") and self.redirect:
            kind, host, port = self.redirect
            s.sendall(b"-%s 1234 %s:%d\r\n" % (kind.encode(), host.encode(), port))
            return
        if cmd in ("GET", "MGET") and self.delay_s:
            self._stop.wait(self.delay_s)
        if cmd == "MGET" and self.huge_mget:
            s.sendall(b"*2\r\n$314572800\r\n")
            chunk = bytes(1 << 20)
            for _ in range(600):
                if self._stop.is_set():
                    return
                s.sendall(chunk)
            return
        if cmd == "CLUSTER":
            h = self.host.encode()
            s.sendall(b"*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$%d\r\n%s\r\n:%d\r\n$2\r\nid\r\n"
                      % (len(h), h, self.port))
        elif cmd == "MGET":
            s.sendall(b"*%d\r\n" % (len(argv) - 1) + b"$-1\r\n" * (len(argv) - 1))
        elif cmd == "GET":
            s.sendall(b"$-1\r\n")
        elif cmd == "EVAL":
            s.sendall(b":0\r\n")
        elif cmd == "PING":
            s.sendall(b"+PONG\r\n")
        else:  # SET, ASKING, READONLY
            s.sendall(b"+OK\r\n")

    def close(self):
        self._stop.set()
        try:
            self._lsock.close()
        except OSError:
            pass
        with self._lock:
            socks, threads = list(self._socks), list(self._threads)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
