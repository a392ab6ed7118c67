"""Progress of `colabfs sync --json` and `colabfs warm --json`: the JSON lines
they print, what those lines add up to, and one bar that shows it.

The commands print one JSON object per line on stdout:
  sync  {"event": "progress", "done_bytes", "total_bytes", "files", "uploading",
         "waiting", "why"} ... then {"event": "done", "ok": true} or
        {"event": "done", "ok": false, "failed": [{"path", "error"}], "error": "timeout|failed|..."}
  warm  {"event": "progress", "done_bytes", "total_bytes", "files_done", "files"} ...
        then {"event": "done", "ok": ..., "error": ...}
parse_line and Progress are pure (tests/python/test_pyapi_unit.py feeds them
recorded lines); Bar draws: tqdm.auto when it is importable, else one line on
stdout redrawn with a carriage return."""

import json
import sys
import time

from ._errors import scrub

INT_FIELDS = ("done_bytes", "total_bytes", "files", "files_done", "uploading", "waiting")


def parse_line(line):
    """The event a line holds (a dict with "event"), or None for a line that
    is not one (blank, not JSON, not an object).  Count fields become ints
    (a number sent as a string too); text fields are scrubbed of secrets."""
    if isinstance(line, bytes):
        line = line.decode("utf-8", "replace")
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
        return None
    for k in INT_FIELDS:
        if k in ev:
            ev[k] = _count(ev[k])
    for k in ("why", "error"):
        if isinstance(ev.get(k), str):
            ev[k] = scrub(ev[k])
    failed = ev.get("failed")
    ev["failed"] = [(str(f.get("path", "")), scrub(str(f.get("error", ""))))
                    for f in failed if isinstance(f, dict)] if isinstance(failed, list) else []
    return ev


def _count(v):
    try:
        n = int(v)
    except (TypeError, ValueError):
        return 0
    return max(n, 0)


def human_bytes(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


class Progress:
    """What the events of one command add up to.  kind: "sync" or "warm";
    label: what line() calls it (default: kind).  feed(event, t) with t in
    seconds (any clock, for the rate)."""

    def __init__(self, kind, label=None):
        self.kind = kind
        self.label = label or kind
        self.done_bytes = self.total_bytes = 0
        self.files = self.files_done = self.uploading = self.waiting = 0
        self.why = ""
        self.finished = False
        self.ok = None
        self.error = None
        self.failed = []
        self.events = 0
        self._t0 = None
        self._b0 = 0
        self.rate = 0.0  # bytes per second since the first progress event

    def feed(self, ev, t=None):
        t = time.monotonic() if t is None else t
        self.events += 1
        if ev["event"] == "progress":
            for k in INT_FIELDS:
                if k in ev:
                    setattr(self, k, ev[k])
            self.why = ev.get("why") or ""
            # a total that grows (a file written meanwhile) never goes below done
            self.total_bytes = max(self.total_bytes, self.done_bytes)
            if self._t0 is None:
                self._t0, self._b0 = t, self.done_bytes
            elif t > self._t0:
                self.rate = max(0.0, (self.done_bytes - self._b0) / (t - self._t0))
        elif ev["event"] == "done":
            self.finished = True
            self.ok = bool(ev.get("ok"))
            self.error = ev.get("error") or (None if self.ok else "failed")
            self.failed = ev.get("failed", [])
            if self.ok:
                self.done_bytes = self.total_bytes = max(self.total_bytes, self.done_bytes)
                if self.kind == "warm":
                    self.files_done = self.files
                else:
                    self.files = self.uploading = self.waiting = 0
                    self.why = ""

    @property
    def fraction(self):
        return self.done_bytes / self.total_bytes if self.total_bytes else (1.0 if self.finished
                                                                           else 0.0)

    def postfix(self):
        """The counts beside the bar: files, and for sync why files wait."""
        if self.kind == "warm":
            return "files %d/%d" % (self.files_done, self.files)
        s = "%d file%s left" % (self.files, "" if self.files == 1 else "s")
        more = []
        if self.uploading:
            more.append("%d uploading" % self.uploading)
        if self.waiting:
            more.append("%d waiting%s" % (self.waiting, ": " + self.why if self.why else ""))
        return s + (" (%s)" % ", ".join(more) if more else "")

    def line(self):
        """The whole status as one line (no newline, no carriage return)."""
        s = "%s %3.0f%% %s/%s" % (self.label, 100 * self.fraction, human_bytes(self.done_bytes),
                                  human_bytes(self.total_bytes))
        if self.rate > 0:
            s += " %.1f MB/s" % (self.rate / 1e6)
        s += ", " + self.postfix()
        if self.finished:
            s += ", done" if self.ok else ", " + (self.error or "failed")
        return s


def _tqdm():
    try:
        from tqdm.auto import tqdm
        return tqdm
    except Exception:  # not installed, or broken in this environment
        return None


class Bar:
    """One progress bar for one command, updated in place.

    quiet: draw nothing.  stream: where the plain line goes (default: the
    sys.stdout of the moment).  use_tqdm: None = when tqdm is importable."""

    MIN_INTERVAL = 0.1

    def __init__(self, desc, quiet=False, stream=None, use_tqdm=None):
        self.desc = desc
        self.quiet = quiet
        self.stream = stream
        self._tqdm_cls = (_tqdm() if use_tqdm is None else (_tqdm() if use_tqdm else None))
        self._bar = None
        self._width = 0
        self._last = -1.0
        self._drawn = False

    def _out(self):
        return self.stream or sys.stdout

    def update(self, p, force=False):
        """Shows Progress p (drawn at most every MIN_INTERVAL seconds unless force)."""
        if self.quiet:
            return
        now = time.monotonic()
        if not force and now - self._last < self.MIN_INTERVAL:
            return
        self._last = now
        if self._tqdm_cls is not None:
            if self._bar is None:
                kw = {"file": self.stream} if self.stream else {}
                self._bar = self._tqdm_cls(total=p.total_bytes, desc=self.desc, unit="B",
                                           unit_scale=True, unit_divisor=1024, leave=True, **kw)
            self._bar.total = p.total_bytes
            self._bar.n = p.done_bytes
            self._bar.set_postfix_str(p.postfix(), refresh=False)
            self._bar.refresh()
            return
        text = p.line()
        out = self._out()
        out.write("\r" + text + " " * max(0, self._width - len(text)))
        out.flush()
        self._width = len(text)
        self._drawn = True

    def close(self, p=None):
        """The last state (when given), then the line ends."""
        if self.quiet:
            return
        if p is not None:
            self.update(p, force=True)
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self._drawn:
            out = self._out()
            out.write("\n")
            out.flush()
            self._drawn = False
