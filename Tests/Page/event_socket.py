"""Reads the site service's event WebSocket (websocket-client, from PyPI) for SiteServiceRigTests.

One argument, JSON: url (wss://.../api/v1/events/socket[?last_event_id=N]), ca (the authority's
PEM), token, origin (optional: a browser's Origin header), until (stop after an event of this name
whose data holds `until_text`), seconds (at most). Prints JSON: the handshake's status, the
events received, each as sent ({"id", "event", "data"}), and the server's close code and reason
if it closed (how the service refuses a socket).
"""
import json
import sys
import time

import websocket


def main() -> None:
    args = json.loads(sys.argv[1])
    options = {"sslopt": {"ca_certs": args["ca"]}, "header": [f"Authorization: Bearer {args['token']}"], "timeout": 2}
    if args.get("origin"):
        options["origin"] = args["origin"]
    facts: dict = {"events": []}
    try:
        socket = websocket.create_connection(args["url"], **options)
    except websocket.WebSocketBadStatusException as refused:
        facts["status"] = refused.status_code
        facts["body"] = (refused.resp_body or b"").decode("utf-8", "replace")
        print(json.dumps(facts))
        return
    facts["status"] = 101
    deadline = time.monotonic() + float(args.get("seconds", 10))
    while time.monotonic() < deadline:
        try:
            opcode, frame = socket.recv_data_frame(True)
        except websocket.WebSocketTimeoutException:
            continue
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            facts["close_code"] = int.from_bytes(frame.data[:2], "big") if len(frame.data) >= 2 else None
            facts["close_reason"] = frame.data[2:].decode("utf-8", "replace")
            break
        if opcode != websocket.ABNF.OPCODE_TEXT:
            continue
        event = json.loads(frame.data.decode("utf-8"))
        facts["events"].append(event)
        if event.get("event") == args.get("until") and args.get("until_text", "") in json.dumps(event.get("data")):
            break
    socket.close()
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
