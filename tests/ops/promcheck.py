# SPDX-License-Identifier: GPL-2.0-or-later
#
# What metrics_check.py (the daemons' /metrics) and mount_metrics_check.py
# (the mount's) share: a check that prints one line and counts failures, the
# test's own trouble (exit 99), a scrape, and the histogram rules.
import sys
import urllib.error
import urllib.request

failures = 0
subject = "the metrics"  # what a verdict is about, for trouble()'s message


def check(ok, what, detail=""):
    global failures
    if ok:
        print(f"ok: {what}")
    else:
        failures += 1
        print(f"FAIL: {what}{': ' + detail if detail else ''}")


def trouble(what):
    print(f"ERROR: {what} (a failure of the test itself, not a verdict on {subject})")
    sys.exit(99)


def finish():
    sys.exit(1 if failures else 0)


def scrape(url):
    """(status, content type, text); status None when nothing answered (text says why)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), ""
    except OSError as e:
        return None, "", str(e)


def check_histograms(families, family, name=""):
    """Each label set's buckets are cumulative, end with +Inf, and +Inf == _count."""
    series = {}
    for s in families[family].samples:
        key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
        series.setdefault(key, []).append(s)
    bad = []
    for key, group in series.items():
        buckets = [(s.labels["le"], s.value) for s in group if s.name == family + "_bucket"]
        count = [s.value for s in group if s.name == family + "_count"]
        total = [s.value for s in group if s.name == family + "_sum"]
        if not buckets or buckets[-1][0] != "+Inf" or len(count) != 1 or len(total) != 1:
            bad.append(f"{key}: buckets {buckets} count {count} sum {total}")
            continue
        bounds = [float(le) for le, _ in buckets]
        values = [v for _, v in buckets]
        if bounds != sorted(bounds) or values != sorted(values):
            bad.append(f"{key}: not cumulative in ascending le: {buckets}")
        if values[-1] != count[0]:
            bad.append(f"{key}: +Inf {values[-1]} != _count {count[0]}")
        if total[0] < 0 or (count[0] > 0 and total[0] <= 0):
            bad.append(f"{key}: _sum {total[0]} with _count {count[0]}")
    check(not bad and series,
          f"{name + ': ' if name else ''}{family}: {len(series)} histograms cumulative, "
          "+Inf == _count", "; ".join(bad) or "no histogram")
