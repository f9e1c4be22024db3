"""Slow and silent clients against the site service, for SiteServiceHTTPSTests (standard library only).

One argument, JSON: host, port, ca (the authority's PEM), slow (TLS connections that send a
request's header one line a second and never finish it), silent (TCP connections that never
send a byte, not even the TLS handshake), seconds. Meanwhile one ordinary client asks
`GET /api/v1/health` twice a second. Prints JSON: the ordinary requests (status and seconds
each), and how many slow and silent connections the service still held open at the end.
"""
import json
import socket
import ssl
import sys
import threading
import time
import urllib.request


def main() -> None:
    args = json.loads(sys.argv[1])
    host, port, seconds = args["host"], int(args["port"]), float(args["seconds"])
    context = ssl.create_default_context(cafile=args["ca"])
    stop = threading.Event()

    slow_sockets = []
    for _ in range(int(args["slow"])):
        raw = socket.create_connection((host, port), timeout=5)
        wrapped = context.wrap_socket(raw, server_hostname=host)
        wrapped.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: " + host.encode() + b"\r\n")
        slow_sockets.append(wrapped)
    silent_sockets = [socket.create_connection((host, port), timeout=5) for _ in range(int(args["silent"]))]

    def trickle() -> None:
        line = 0
        while not stop.wait(1.0):
            line += 1
            for s in list(slow_sockets):
                try:
                    s.sendall(b"X-Slow-%d: a\r\n" % line)
                except OSError:
                    slow_sockets.remove(s)

    trickler = threading.Thread(target=trickle, daemon=True)
    trickler.start()

    requests = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(f"https://{host}:{port}/api/v1/health", context=context, timeout=5) as reply:
                reply.read()
                requests.append({"status": reply.status, "seconds": time.monotonic() - t0})
        except Exception as error:  # noqa: BLE001 - a refused or stalled request is a fact to report
            requests.append({"status": 0, "seconds": time.monotonic() - t0, "error": str(error)})
        time.sleep(max(0.0, 0.5 - (time.monotonic() - t0)))
    stop.set()
    trickler.join()

    def still_open(s: socket.socket) -> bool:
        s.settimeout(0.2)
        try:
            return s.recv(1) != b""
        except (socket.timeout, ssl.SSLWantReadError):
            return True
        except OSError:
            return False

    slow_open = sum(1 for s in slow_sockets if still_open(s))
    silent_open = sum(1 for s in silent_sockets if still_open(s))
    print(json.dumps({"requests": requests, "slow_open": slow_open, "silent_open": silent_open}))


if __name__ == "__main__":
    main()
