"""Drive's per-user request quota, as the emulator enforces it (drive-api-v3.md §4).

Drive counts a user's API requests and refuses those over the limit (about 12,000 per minute, i.e.
200 per second, per user) with 403 ``userRateLimitExceeded``, or from some backends 429
``rateLimitExceeded``. The emulator models this with one token bucket per user:

* ``rate`` R tokens per second flow into each user's bucket, up to ``burst`` B tokens (default
  max(1, R): one second's worth). R = 0 turns the quota off (the default).
* Every Drive API request of an authenticated user takes one token: files.list, files.get, media,
  export, changes, about, revisions, drives. The OAuth token endpoint, the metadata server, the
  ``/_emu/`` control calls, requests refused before authentication (401) and requests answered by
  a fault rule with a status take none.
* A request that finds the bucket empty is refused and takes no token. emuapi.DriveApi answers it
  with ``status``: 403 ``userRateLimitExceeded`` "User Rate Limit Exceeded" (the default) or 429
  ``rateLimitExceeded`` "Too Many Requests", domain ``usageLimits``, Drive's v1 error body.
* Buckets start full; changing the settings (``configure``) fills every bucket again.

Units mode (``units=True``; ``--user-units N``): Drive's newer per-user quota, for Cloud projects
created since 2026-05-01, counts quota units instead of requests: 325,000 units per minute per user.
Then ``rate`` is units per second (N / 60), ``burst`` is in units (default max(200, rate): one
second's worth, and never too small for a download) and each request takes ``units_of`` its kind
instead of one token; a request that finds fewer units than it costs is refused and takes none.
What a request costs (``units_of(kind, method, path)``; kinds as emuapi/emuwrite route them)::

    media, export (downloads)                                   200
    files.list; changes (changes.list); drives (drives.list)    100
    files.create, files.update, files.delete, upload (start)    50
    changes GET /drive/v3/changes/startPageToken                5
    drives GET /drive/v3/drives/ID (drives.get)                 5
    anything else charged (files.get, about, revisions.get,
    files.generateIds, ...)                                     5

The same requests are charged as in request mode (not token, metadata, error or upload.chunk).

Who the user is: see emuauth.Auth.identify (the token's owner).
"""

import threading
import time

STATUSES = (403, 429)
DOWNLOAD_UNITS = 200            # the dearest call: a units-mode bucket is never smaller by default
DRIVE_UNITS_PER_MINUTE = 325_000

_UNITS = {"media": DOWNLOAD_UNITS, "export": DOWNLOAD_UNITS, "files.list": 100,
          "files.create": 50, "files.update": 50, "files.delete": 50, "upload": 50}


def units_of(kind, method, path):
    """The quota units a request of route kind ``kind`` costs (the table in the module doc);
    ``method`` and ``path`` tell a list from a single read where one kind covers both."""
    if kind == "changes":
        return 5 if path == "/drive/v3/changes/startPageToken" else 100
    if kind == "drives":
        return 100 if method == "GET" and path == "/drive/v3/drives" else 5
    return _UNITS.get(kind, 5)


class UserQuota:
    """Token buckets, one per user. ``clock`` (seconds, monotonic) is replaceable for tests;
    ``units`` counts quota units instead of requests (the module doc)."""

    def __init__(self, rate=0.0, burst=None, status=403, clock=time.monotonic, units=False):
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets = {}                  # user -> (tokens, clock time they were counted at)
        self.rate, self.burst, self.status, self.units = 0.0, 1.0, 403, False
        self.configure(rate, burst, status, units)

    def configure(self, rate=None, burst=None, status=None, units=None):
        """Change the settings; None keeps a setting, except that a new ``rate`` (or a change of
        ``units``) without ``burst`` sets the burst to one second's worth: max(1, rate), in units
        mode max(200, rate). Raises ValueError for a negative rate, a burst under 1, a status other
        than 403 and 429 or a ``units`` that is not a bool; then nothing changes."""
        if units is not None and not isinstance(units, bool):
            raise ValueError(f"quota units must be true or false, not {units!r}")
        new_units = self.units if units is None else units
        new_rate = self.rate if rate is None else float(rate)
        if burst is not None:
            new_burst = float(burst)
        elif rate is not None or new_units != self.units:
            new_burst = max(float(DOWNLOAD_UNITS) if new_units else 1.0, new_rate)
        else:
            new_burst = self.burst
        new_status = self.status if status is None else int(status)
        if not new_rate >= 0:
            raise ValueError(f"quota rate must be >= 0, not {rate!r}")
        if not new_burst >= 1:
            raise ValueError(f"quota burst must be >= 1, not {burst!r}")
        if new_status not in STATUSES:
            raise ValueError(f"quota status must be 403 or 429, not {status!r}")
        with self._lock:
            self.rate, self.burst, self.status, self.units = new_rate, new_burst, new_status, new_units
            self._buckets.clear()

    def describe(self):
        with self._lock:
            return {"rate": self.rate, "burst": self.burst, "status": self.status, "units": self.units}

    def take(self, user, cost=1):
        """Take ``cost`` tokens from ``user``'s bucket: True when there were that many (or the
        quota is off); when there were fewer it takes none."""
        with self._lock:
            if self.rate <= 0:
                return True
            now = self._clock()
            tokens, counted = self._buckets.get(user, (self.burst, now))
            tokens = min(self.burst, tokens + (now - counted) * self.rate)
            allowed = tokens >= cost
            self._buckets[user] = (tokens - cost if allowed else tokens, now)
            return allowed
