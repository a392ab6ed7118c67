"""colabfs.plot: the mount's last minutes in four small panels.

The numbers come from `colabfs stats MOUNTPOINT --history[=SECONDS] --json`:
    {"interval_s": 1, "samples": [{"t": unix_s, "read_bytes", "drive_bytes",
      "drive_requests", "api_rate", "cache_hits", "cache_misses",
      "uploads_pending", "upload_bytes", "upload_bytes_left"}, ...]}
oldest first; the counters are cumulative, api_rate, uploads_pending and
upload_bytes_left are gauges.  series() turns that into rates (pure, for the
tests); plot() draws them with matplotlib when it is importable, else prints
a text summary."""

import json
import sys

from . import _cli
from ._errors import Error

COUNTERS = ("read_bytes", "drive_bytes", "drive_requests", "cache_hits", "cache_misses",
            "upload_bytes")
GAUGES = ("api_rate", "uploads_pending", "upload_bytes_left")
SERIES = ("t", "read_mbps", "drive_mbps", "requests_per_s", "api_rate", "hit_ratio",
          "uploads_pending", "upload_bytes_left")


def parse_history(text):
    """The samples of a history JSON text, oldest first, every field a number."""
    try:
        h = json.loads(text)
    except ValueError:
        raise Error("colabfs stats --history printed no JSON", fix="check colabfs --version") \
            from None
    samples = []
    for s in h.get("samples", []) if isinstance(h, dict) else []:
        if not isinstance(s, dict):
            continue
        try:
            row = {"t": float(s["t"])}
        except (KeyError, TypeError, ValueError):
            continue
        for k in COUNTERS + GAUGES:
            try:
                row[k] = float(s.get(k, 0) or 0)
            except (TypeError, ValueError):
                row[k] = 0.0
        samples.append(row)
    samples.sort(key=lambda r: r["t"])
    return samples


def series(samples, seconds=300):
    """Per interval between samples within the last `seconds`: t (seconds
    before the newest sample, <= 0), read and Drive MB/s, Drive requests/s,
    the pacer's api_rate, the cache hit ratio (None where nothing was looked
    up), uploads pending.  A counter that went back (a restarted daemon)
    counts from zero again."""
    out = {k: [] for k in SERIES}
    if not samples:
        return out
    end = samples[-1]["t"]
    keep = [s for s in samples if s["t"] >= end - seconds]
    for a, b in zip(keep, keep[1:]):
        dt = b["t"] - a["t"]
        if dt <= 0:
            continue
        d = {k: (b[k] - a[k]) if b[k] >= a[k] else b[k] for k in COUNTERS}
        out["t"].append(b["t"] - end)
        out["read_mbps"].append(d["read_bytes"] / dt / 1e6)
        out["drive_mbps"].append(d["drive_bytes"] / dt / 1e6)
        out["requests_per_s"].append(d["drive_requests"] / dt)
        out["api_rate"].append(b["api_rate"])
        looked = d["cache_hits"] + d["cache_misses"]
        out["hit_ratio"].append(d["cache_hits"] / looked if looked else None)
        out["uploads_pending"].append(b["uploads_pending"])
        out["upload_bytes_left"].append(b["upload_bytes_left"])
    return out


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def summary(s, seconds, units=False):
    """The text that stands in for the panels."""
    if not s["t"]:
        return "colabfs: no history yet (the mount samples its counters once per interval)"
    span = -s["t"][0] + (s["t"][1] - s["t"][0] if len(s["t"]) > 1 else 0)
    hit = _mean(s["hit_ratio"])
    lines = [
        "colabfs, the last %.0f s (of %d asked):" % (span, seconds),
        "  read        %7.1f MB/s mean, %7.1f peak; from Drive %.1f MB/s mean, %.1f peak" % (
            _mean(s["read_mbps"]), max(s["read_mbps"]), _mean(s["drive_mbps"]),
            max(s["drive_mbps"])),
        "  Drive calls %7.1f /s mean, %7.1f peak; the pacer allows %.0f %s/s now" % (
            _mean(s["requests_per_s"]), max(s["requests_per_s"]), s["api_rate"][-1],
            "quota units" if units else "calls"),
        "  cache hits  %s" % ("%.0f%% of lookups" % (100 * hit) if hit is not None
                              else "no lookups"),
        "  uploads     %d pending now (%d at most), %.1f MB left" % (
            s["uploads_pending"][-1], max(s["uploads_pending"]), s["upload_bytes_left"][-1] / 1e6),
    ]
    return "\n".join(lines)


def _in_notebook():
    ip = sys.modules.get("IPython")
    try:
        shell = ip.get_ipython() if ip else None
    except Exception:
        return False
    return shell is not None and ("IPKernelApp" in getattr(shell, "config", {})
                                  or "google.colab" in sys.modules)


def figure(s, seconds, pyplot=False, units=False):
    """The four panels as a matplotlib Figure (pyplot: made through pyplot, so
    that a notebook shows it).  units: the pacer counts Drive's quota units
    (--api-units), so its rate gets an axis of its own beside the calls."""
    if pyplot:
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(2, 2, figsize=(10, 5), sharex=True)
    else:
        from matplotlib.figure import Figure
        fig = Figure(figsize=(10, 5))
        ax = fig.subplots(2, 2, sharex=True)
    t = s["t"]
    ax[0][0].plot(t, s["read_mbps"], label="read")
    ax[0][0].plot(t, s["drive_mbps"], label="from Drive")
    ax[0][0].set_ylabel("MB/s")
    ax[0][0].legend(loc="upper left", fontsize="small")
    ax[0][1].plot(t, s["requests_per_s"], label="Drive requests")
    if units:
        twin = ax[0][1].twinx()
        twin.plot(t, s["api_rate"], label="pacer's rate", linestyle="--", color="tab:orange")
        twin.set_ylabel("quota units per s")
        twin.legend(loc="upper right", fontsize="small")
    else:
        ax[0][1].plot(t, s["api_rate"], label="pacer's rate", linestyle="--")
    ax[0][1].set_ylabel("per s")
    ax[0][1].legend(loc="upper left", fontsize="small")
    ax[1][0].plot(t, [None if r is None else 100 * r for r in s["hit_ratio"]])
    ax[1][0].set_ylabel("cache hits %")
    ax[1][0].set_ylim(0, 105)
    ax[1][1].step(t, s["uploads_pending"], where="post")
    ax[1][1].set_ylabel("uploads pending")
    for a in ax[1]:
        a.set_xlabel("seconds (0: now)")
    fig.suptitle("colabfs, the last %d s" % seconds)
    fig.tight_layout()
    return fig


def history(mountpoint, seconds=None):
    """The samples of `colabfs stats MOUNTPOINT --history[=SECONDS] --json`."""
    arg = "--history" if seconds is None else "--history=%d" % max(1, int(seconds))
    rc, out, err = _cli.run(["stats", mountpoint, arg, "--json"], timeout=60)
    if rc != 0:
        if rc == 2:
            raise Error("this colabfs keeps no stats history (colabfs stats --history): %s"
                        % _cli.message(err), fix="update colabfs (build and make install)")
        raise Error("stats history of %s: %s" % (mountpoint, _cli.message(err)),
                    fix="is %s a colabfs mount? colabfs doctor %s" % (mountpoint, mountpoint))
    return parse_history(out)


def plot(mountpoint=None, seconds=300):
    """Four panels of the mount's last `seconds`: MB/s read (and from Drive),
    Drive requests/s against the pacer's rate, the cache hit ratio, uploads
    pending.  With matplotlib: returns the Figure (in a notebook it is also
    shown); without: prints a text summary and returns it."""
    from .drive import _resolve, stats
    mnt = _resolve(mountpoint)
    s = series(history(mnt, seconds + 1), seconds)
    units = bool(stats(mnt).get("api_rate_in_units", 0))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        text = summary(s, seconds, units)
        print(text)
        return text
    nb = _in_notebook()
    fig = figure(s, seconds, pyplot=nb, units=units)
    if nb:
        import matplotlib.pyplot as plt
        plt.show()
    return fig
