"""The live harness's CPython HTTP service: an interpreter without a JIT
(CPython 3.11 specialises its bytecode after a few calls, and nothing
more), a thread per connection and the GIL, so that its latency is the
interpreter's own and the scheduler's: no warm-up to speak of, but a
different noise from Go's, V8's or HotSpot's.

Each request builds a catalogue of 80 records, sorts it, serialises it to
JSON and parses it back, and scans the names with a regular expression.

    python3 server.py [--port N]   (127.0.0.1; port 0 picks a free one)

Prints "listening on 127.0.0.1:PORT" once it accepts connections.
GET /health answers without work.
"""
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
TAG = re.compile(r"^([a-d]\w*)-(\d+)$")
COUNT = 0
LOCK = threading.Lock()


def catalogue(seed):
    x = (seed * 2654435761) & 0xFFFFFFFF or 1
    items = []
    for i in range(80):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        items.append({"id": i, "name": "%s-%d" % (WORDS[x % len(WORDS)], x % 1000),
                      "score": (x % 10007) / 97.0, "tags": [x % 7, x % 11]})
    return items


def handle(seed):
    items = catalogue(seed)
    items.sort(key=lambda it: (-it["score"], it["id"]))
    back = json.loads(json.dumps(items))
    matched = 0
    total = 0
    for it in back:
        m = TAG.match(it["name"])
        if m:
            matched += 1
            total += int(m.group(2))
        total += sum(it["tags"])
    return {"n": len(back), "matched": matched, "sum": total, "top": back[0]["name"]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, ctype):
        b = (body + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        global COUNT
        if self.path == "/health":
            self.answer(200, "ok", "text/plain")
            return
        with LOCK:
            COUNT += 1
            n = COUNT
        self.answer(200, json.dumps(handle(n)), "application/json")

    def do_POST(self):
        self.answer(405, "GET only", "text/plain")


def main():
    port = 0
    args = sys.argv[1:]
    i = 0
    while i < len(args):
        if args[i] == "--port" and i + 1 < len(args):
            try:
                port = int(args[i + 1])
            except ValueError:
                port = -1
            if not 0 <= port <= 65535:
                sys.stderr.write("server.py: --port must be 0..65535, got %s\n" % args[i + 1])
                sys.exit(2)
            i += 2
        else:
            sys.stderr.write("server.py: unknown argument %s (valid: --port N)\n" % args[i])
            sys.exit(2)
    try:
        srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as e:
        sys.stderr.write("server.py: listen on 127.0.0.1:%d: %s\n" % (port, e))
        sys.exit(1)
    srv.daemon_threads = True
    print("listening on 127.0.0.1:%d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
