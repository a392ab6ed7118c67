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

Who the user is: see emuauth.Auth.identify (the token's owner).
"""

import threading
import time

STATUSES = (403, 429)


class UserQuota:
    """Token buckets, one per user. ``clock`` (seconds, monotonic) is replaceable for tests."""

    def __init__(self, rate=0.0, burst=None, status=403, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets = {}                  # user -> (tokens, clock time they were counted at)
        self.rate, self.burst, self.status = 0.0, 1.0, 403
        self.configure(rate, burst, status)

    def configure(self, rate=None, burst=None, status=None):
        """Change the settings; None keeps a setting, except that a new ``rate`` without ``burst``
        sets the burst to max(1, rate). Raises ValueError for a negative rate, a burst under 1 or a
        status other than 403 and 429; then nothing changes."""
        new_rate = self.rate if rate is None else float(rate)
        if burst is not None:
            new_burst = float(burst)
        elif rate is not None:
            new_burst = max(1.0, new_rate)
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
            self.rate, self.burst, self.status = new_rate, new_burst, new_status
            self._buckets.clear()

    def describe(self):
        with self._lock:
            return {"rate": self.rate, "burst": self.burst, "status": self.status}

    def take(self, user):
        """Take a token from ``user``'s bucket: True when there was one (or the quota is off)."""
        with self._lock:
            if self.rate <= 0:
                return True
            now = self._clock()
            tokens, counted = self._buckets.get(user, (self.burst, now))
            tokens = min(self.burst, tokens + (now - counted) * self.rate)
            allowed = tokens >= 1
            self._buckets[user] = (tokens - 1 if allowed else tokens, now)
            return allowed
