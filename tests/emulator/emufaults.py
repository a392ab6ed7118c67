"""Fault injection for the Drive emulator.

Every request passes through ``FaultPlan.decide(kind, file_id)`` after routing and before anything else
(auth included); a rule that fires returns a ``Fault`` that the server applies. A plan is a list of rules,
given as ``--fault SPEC`` (repeatable) or through ``POST /_emu/faults``. The first rule that fires wins.

SPEC is ``key=value`` pairs joined by commas::

    kind=media,status=503,retry_after=2,every=3
    kind=media,reset_after=65536,count=2
    kind=files.list|files.get,status=403,reason=userRateLimitExceeded,prob=0.1

Which requests a rule sees:
    kind=K[|K...]   request kinds (files.list files.get media export about changes token revisions.get drives
                    error, and the writes: files.create files.update files.delete files.generateIds,
                    upload = POST/PATCH /upload/... (media, multipart, the start of a resumable
                    session), upload.chunk = PUT on a session URI (chunks and status queries)) or
                    ``*`` (default; an outage with kind ``*`` covers uploads too)
    id=FILEID       only requests for this file id
When it fires, counting the requests it sees:
    after=N         never on the first N (default 0)
    every=N         then on every Nth one (default 1: each)
    count=N         at most N times in all (default: no limit)
    prob=P          and then only with probability P (seeded by --seed; default 1)
What it does (one of):
    status=CODE     answer with a Drive error: [reason=R] [message=M] [retry_after=SECONDS];
                    with stall_ms=MS (the first form below), after that stall (a slow refusal)
                    (default reasons: 403 userRateLimitExceeded, 429 rateLimitExceeded, 5xx backendError)
    outage=SECONDS  from the moment it fires, answer every request it sees with ``status`` (default 503)
                    for SECONDS (an outage rule fires once unless ``count`` says otherwise)
    reset_after=B   send the headers and B bytes of the body, then reset the connection (RST)
    drop=1          close the connection without any answer
    stall_ms=MS     pause MS ms; where, in one of three forms:
                      stall_ms=MS                 before the status line: the client gets no byte
                                                  at all
                      stall_ms=MS,stall_after=0   after the status line and headers, before the
                                                  first body byte
                      stall_ms=MS,stall_after=B   after B bytes of the body (no stall when the
                                                  body is shorter than B bytes)
                    --ttfb-ms (media and export) delays the status line in every form, after a stall
                    of the first form. A stall (and the ttfb wait) ends at once when the client
                    closes the connection; the request log then says ``"cancelled": true`` and the
                    stats count it in ``cancelled``.
    truncate=1      send only the first half of the body (Content-Length matches what is sent)
    bad_range=1     send a Content-Range one byte off the bytes actually sent
    reset_in_body=B (upload and upload.chunk only) read B bytes of the request body, then reset the
                    connection without an answer; a resumable session keeps what it received up to
                    a 256 KiB boundary, like Drive. B >= the body's length: the request is carried
                    out in full and only the answer is lost (a reset instead of the status line)
    stall_ms=MS,stall_in_body=B   (upload kinds) pause MS ms after reading B bytes of the request
                    body, before reading the rest
For the upload kinds a ``status`` (and an ``outage``) answers before the request body is read (the
body is read and dropped after the answer, so the connection stays usable); a stall of the first
form comes before the body is read too.
"""

import random
import threading
import time

KINDS = ("files.list", "files.get", "media", "export", "about", "changes", "token", "metadata", "revisions.get",
         "drives", "error", "files.create", "files.update", "files.delete", "files.generateIds", "upload",
         "upload.chunk")
BODY_FAULT_KINDS = ("upload", "upload.chunk")
_INT_KEYS = {"after", "every", "count", "status", "reset_after", "drop", "stall_ms", "stall_after",
             "truncate", "bad_range", "reset_in_body", "stall_in_body"}
_FLOAT_KEYS = {"prob", "retry_after", "outage"}
_STR_KEYS = {"kind", "id", "reason", "message"}
_ACTIONS = ("status", "outage", "reset_after", "drop", "stall_ms", "truncate", "bad_range", "reset_in_body")


class FaultSpecError(ValueError):
    pass


class Fault:
    """What to do to one request. Attributes not set by the rule are None."""

    def __init__(self, rule):
        self.label = rule.label
        self.status = rule.status or (503 if rule.outage else None)
        self.reason = rule.reason
        self.message = rule.message
        self.retry_after = rule.retry_after
        self.reset_after = rule.reset_after
        self.drop = bool(rule.drop)
        self.stall_ms = rule.stall_ms
        self.stall_after = rule.stall_after
        self.truncate = bool(rule.truncate)
        self.bad_range = bool(rule.bad_range)
        self.reset_in_body = rule.reset_in_body
        self.stall_in_body = rule.stall_in_body


class FaultRule:
    def __init__(self, spec):
        self.label = spec.strip()
        values = {}
        for part in filter(None, (p.strip() for p in self.label.split(","))):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in _INT_KEYS | _FLOAT_KEYS | _STR_KEYS:
                raise FaultSpecError(f"bad fault item {part!r} in {spec!r}")
            try:
                values[key] = int(value) if key in _INT_KEYS else float(value) if key in _FLOAT_KEYS else value
            except ValueError as exc:
                raise FaultSpecError(f"bad number in {part!r}") from exc
        kinds = values.get("kind", "*")
        self.kinds = None if kinds == "*" else set(kinds.split("|"))
        if self.kinds and not self.kinds <= set(KINDS):
            raise FaultSpecError(f"unknown kind in {kinds!r}; kinds: {' '.join(KINDS)}")
        self.file_id = values.get("id")
        self.after = values.get("after", 0)
        self.every = max(1, values.get("every", 1))
        # An outage rule that fired again at once would never end: by default it fires once.
        self.count = values.get("count", 1 if "outage" in values else None)
        self.prob = values.get("prob", 1.0)
        for key in ("status", "reason", "message", "retry_after", "outage", "reset_after", "drop",
                    "stall_ms", "stall_after", "truncate", "bad_range", "reset_in_body", "stall_in_body"):
            setattr(self, key, values.get(key))
        actions = [a for a in _ACTIONS if values.get(a) is not None]
        if "outage" in actions and "status" in actions:
            actions.remove("status")
        if "status" in actions and "stall_ms" in actions and values.get("stall_after") is None:
            actions.remove("stall_ms")       # a slow refusal: the stall, then the status
        if len(actions) != 1:
            raise FaultSpecError(f"fault {spec!r} needs exactly one action of: {' '.join(_ACTIONS)}")
        if self.stall_in_body is not None and (self.stall_ms is None or self.stall_after is not None):
            raise FaultSpecError(f"fault {spec!r}: stall_in_body goes with stall_ms, not stall_after")
        body_fault = self.reset_in_body is not None or self.stall_in_body is not None
        if body_fault and (self.kinds is None or not self.kinds <= set(BODY_FAULT_KINDS)):
            raise FaultSpecError(f"fault {spec!r}: reset_in_body and stall_in_body need "
                                 f"kind={'|'.join(BODY_FAULT_KINDS)} (or one of them)")
        self.seen = 0
        self.fired = 0
        self.outage_until = 0.0

    def sees(self, kind, file_id):
        return (self.kinds is None or kind in self.kinds) and (self.file_id is None or file_id == self.file_id)

    def describe(self):
        return {"spec": self.label, "seen": self.seen, "fired": self.fired}


class FaultPlan:
    def __init__(self, specs=(), seed=0):
        self._lock = threading.Lock()
        self._rng = random.Random(f"faults:{seed}")
        self.rules = [FaultRule(s) for s in specs]

    def replace(self, specs):
        rules = [FaultRule(s) for s in specs]       # parse all before changing anything
        with self._lock:
            self.rules = rules

    def describe(self):
        with self._lock:
            return [r.describe() for r in self.rules]

    def decide(self, kind, file_id):
        """The Fault for this request, or None."""
        with self._lock:
            now = time.monotonic()
            for rule in self.rules:
                if not rule.sees(kind, file_id):
                    continue
                rule.seen += 1
                if rule.outage and now < rule.outage_until:
                    return Fault(rule)
                n = rule.seen - rule.after
                if n <= 0 or n % rule.every != 0:
                    continue
                if rule.count is not None and rule.fired >= rule.count:
                    continue
                if rule.prob < 1.0 and self._rng.random() >= rule.prob:
                    continue
                rule.fired += 1
                if rule.outage:
                    rule.outage_until = now + rule.outage
                return Fault(rule)
        return None
