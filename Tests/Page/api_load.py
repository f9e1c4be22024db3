#!/usr/bin/env python3
"""Holds event-stream clients open and a steady rate of API requests against the site service,
for SuiteSiteServiceTests: python api_load.py '<json arguments>'.

Arguments: url (https://host:port), ca (the site's authority), token (scope read and notify),
streams, rate (requests per second), seconds, notify_every (seconds between notifications sent,
so that events flow to every stream), pid (the service's, to sample its memory).
Prints one JSON object: requests by status, latency percentiles, events each stream got, the
service's resident memory sampled every 5 s.
"""
import http.client
import json
import ssl
import sys
import threading
import time
import urllib.parse

args = json.loads(sys.argv[1])
url = urllib.parse.urlparse(args["url"])
context = ssl.create_default_context(cafile=args["ca"])
headers = {"Authorization": "Bearer " + args["token"]}
stop = threading.Event()
lock = threading.Lock()
statuses, latencies, stream_events, stream_errors = {}, [], [0] * args["streams"], []


def connection():
    return http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=30)


def stream(i):
    """One event stream: counts the events (lines starting with id:) until stopped."""
    try:
        c = connection()
        c.request("GET", "/api/v1/events", headers=headers)
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError("status %d" % r.status)
        # Blocking reads (a timed-out read leaves Python's reader unusable); the thread is a
        # daemon and ends with the run.
        c.sock.settimeout(None)
        while not stop.is_set():
            line = r.fp.readline()
            if not line:
                raise RuntimeError("closed by the service")
            if line.startswith(b"id: "):
                stream_events[i] += 1
    except Exception as e:  # noqa: BLE001 - reported, not hidden
        if not stop.is_set():
            with lock:
                stream_errors.append("stream %d: %s" % (i, e))


def requester(rate, share):
    """Requests at `rate` per second over one kept-alive connection; every `notify_every` s a
    notification (share 0 only)."""
    c = connection()
    paths = ["/api/v1/presence", "/api/v1/site", "/api/v1/history?limit=20", "/api/v1/health"]
    n, start, last_notify = 0, time.monotonic(), 0.0
    while not stop.is_set():
        due = start + n / rate
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        method, path, body = "GET", paths[n % len(paths)], None
        if share == 0 and time.monotonic() - last_notify >= args["notify_every"]:
            method, path, body = "POST", "/api/v1/notifications", json.dumps({"type": args["type"]})
            last_notify = time.monotonic()
        t0 = time.monotonic()
        try:
            c.request(method, path, body=body, headers=dict(headers, **({"Content-Type": "application/json"} if body else {})))
            r = c.getresponse()
            r.read()
            status = r.status
        except Exception as e:  # noqa: BLE001
            status = "error: %s" % type(e).__name__
            c.close()
            c = connection()
        with lock:
            statuses[str(status)] = statuses.get(str(status), 0) + 1
            latencies.append((time.monotonic() - t0) * 1000)
        n += 1


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


threads = [threading.Thread(target=stream, args=(i,), daemon=True) for i in range(args["streams"])]
for t in threads:
    t.start()
time.sleep(1)
requesters = 5
workers = [threading.Thread(target=requester, args=(args["rate"] / requesters, k), daemon=True) for k in range(requesters)]
for t in workers:
    t.start()
memory, begin = [], time.monotonic()
while time.monotonic() - begin < args["seconds"]:
    memory.append([round(time.monotonic() - begin, 1), rss_kib(args["pid"])])
    time.sleep(min(5, max(0.1, args["seconds"] - (time.monotonic() - begin))))
memory.append([round(time.monotonic() - begin, 1), rss_kib(args["pid"])])
stop.set()
for t in workers:
    t.join(5)
time.sleep(0.5)  # the last notification's events reach every stream
lat = sorted(latencies)


def pct(p):
    return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else None


print(json.dumps({"statuses": statuses, "requests": len(lat), "p50": pct(0.5), "p99": pct(0.99), "max": lat[-1] if lat else None,
                  "stream_events": stream_events, "stream_errors": stream_errors[:10], "memory_kib": memory,
                  "seconds": round(time.monotonic() - begin, 1)}))
