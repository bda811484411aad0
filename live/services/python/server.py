"""The live harness's CPython HTTP service: an interpreter without a JIT
(CPython 3.11 specialises its bytecode after a few calls, and nothing
more), a thread per connection and the GIL, so that its latency is the
interpreter's own and the scheduler's: no warm-up to speak of, but a
different noise from Go's, V8's or HotSpot's.

Each request builds a catalogue of 80 records, sorts it, serialises it to
JSON and parses it back, and scans the names with a regular expression.

    python3 server.py [--port N] [--pg URL | --sqlite]   (127.0.0.1; port 0 picks a free one)

With --pg (the python-pg case) each request instead reads a range of 40 rows
of a 200,000-row table from PostgreSQL through a pool of at most 8
connections, opened as requests need them (psycopg2, Debian's
python3-psycopg2): the cold start of a database-backed service, a pool that
fills under load and new backends whose catalogue and plan caches are empty,
under the interpreter's own noise.

With --sqlite (the python-sqlite case, written 2026-11-29 after the service
method's last change: held out) each request reads a range of 40 rows of a
200,000-row SQLite table (the standard library's sqlite3; a database file in
a temporary folder, created at start and removed at exit) through a
connection of its own thread, opened on the thread's first request: every
new keep-alive connection of k6 starts a thread whose SQLite connection has
an empty page cache (2 MiB, of a 30 MiB file) and no prepared statements.

Prints "listening on 127.0.0.1:PORT" once it accepts connections.
GET /health answers without work.
"""
import json
import re
import signal
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


TABLE_ROWS = 200000
TABLE_SPAN = 40
PG_POOL = 8


class PGStore:
    """The python-pg store: a table loaded at start, read through a pool
    that opens its connections as requests need them and keeps them (a
    semaphore makes a request wait for a free connection; psycopg2's own
    pools either open every connection up front or, with no minimum, close
    each one when it is put back)."""

    def __init__(self, url):
        import psycopg2
        self.psycopg2 = psycopg2
        conn = psycopg2.connect(url)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS items")
            cur.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, "
                        "score float8 NOT NULL, grp int NOT NULL, pad text NOT NULL)")
            cur.execute("INSERT INTO items SELECT i, 'item-' || i, (i * 7919 %% 10007) / 97.0, i %% 13, "
                        "repeat(md5(i::text), 4) FROM generate_series(1, %s) AS i", (TABLE_ROWS,))
            cur.execute("ANALYZE items")
        conn.close()
        self.url = url
        self.idle = []  # open connections not in use
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(PG_POOL)

    def handle(self, n):
        lo = (n * 2654435761) % (TABLE_ROWS - TABLE_SPAN) + 1
        with self.slots:  # at most PG_POOL connections, opened when none is idle
            with self.lock:
                conn = self.idle.pop() if self.idle else None
            if conn is None:
                conn = self.psycopg2.connect(self.url)
                conn.autocommit = True  # one round trip a query
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT grp, count(*), avg(score), max(name) FROM items "
                                "WHERE id BETWEEN %s AND %s GROUP BY grp ORDER BY grp", (lo, lo + TABLE_SPAN - 1))
                    rows = cur.fetchall()
            except Exception:
                conn.close()
                raise
            with self.lock:
                self.idle.append(conn)
        return {"from": lo, "groups": [[g, c, round(a, 3), m] for g, c, a, m in rows]}


class SQLiteStore:
    """The python-sqlite store: a table written at start to a database file
    in a temporary folder, read through a connection per thread."""

    def __init__(self):
        import os
        import sqlite3
        import tempfile
        self.sqlite3 = sqlite3
        self.dir = tempfile.TemporaryDirectory(prefix="live-sqlite-")
        self.path = os.path.join(self.dir.name, "items.db")
        conn = sqlite3.connect(self.path)
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                     "score REAL NOT NULL, grp INTEGER NOT NULL, pad TEXT NOT NULL)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?)",
                         ((i, "item-%d" % i, (i * 7919 % 10007) / 97.0, i % 13, ("%032x" % (i * 2654435761)) * 4)
                          for i in range(1, TABLE_ROWS + 1)))
        conn.commit()
        conn.execute("ANALYZE")
        conn.close()
        self.local = threading.local()

    def handle(self, n):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = self.sqlite3.connect(self.path)
        lo = (n * 2654435761) % (TABLE_ROWS - TABLE_SPAN) + 1
        rows = conn.execute("SELECT grp, count(*), avg(score), max(name) FROM items "
                            "WHERE id BETWEEN ? AND ? GROUP BY grp ORDER BY grp", (lo, lo + TABLE_SPAN - 1)).fetchall()
        return {"from": lo, "groups": [[g, c, round(a, 3), m] for g, c, a, m in rows]}

    def close(self):
        self.dir.cleanup()


STORE = None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the handler writes a response's headers and its body
    # apart, and with Nagle's algorithm on a closed loop's next request
    # waited for the client's delayed ACK (python-pg/closed-4 took 44 ms an
    # iteration, a TCP floor; the JVM service had the same, JDK-6968351)
    disable_nagle_algorithm = True

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
        if STORE is None:
            self.answer(200, json.dumps(handle(n)), "application/json")
            return
        try:
            body = STORE.handle(n)
        except Exception as e:  # a failed query is a 500, counted by k6
            self.answer(500, "query failed: %s" % e, "text/plain")
            return
        self.answer(200, json.dumps(body), "application/json")

    def do_POST(self):
        self.answer(405, "GET only", "text/plain")


def main():
    global STORE
    port = 0
    pg = None
    sqlite = False
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
        elif args[i] == "--pg" and i + 1 < len(args):
            pg = args[i + 1]
            i += 2
        elif args[i] == "--sqlite":
            sqlite = True
            i += 1
        else:
            sys.stderr.write("server.py: unknown argument %s (valid: --port N, --pg URL, --sqlite)\n" % args[i])
            sys.exit(2)
    if pg is not None and sqlite:
        sys.stderr.write("server.py: --pg and --sqlite are exclusive: give one store\n")
        sys.exit(2)
    if sqlite:
        # the harness stops a service with SIGTERM: leave through the
        # finally below, which removes the database's folder
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            STORE = SQLiteStore()
        except Exception as e:
            sys.stderr.write("server.py: --sqlite: writing the table: %s\n" % e)
            sys.exit(1)
    if pg is not None:
        try:
            STORE = PGStore(pg)
        except ImportError:
            sys.stderr.write("server.py: --pg needs psycopg2 (Debian: apt-get install -y python3-psycopg2)\n")
            sys.exit(2)
        except Exception as e:
            sys.stderr.write("server.py: --pg: loading the table: %s\n" % e)
            sys.exit(1)
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
    finally:
        if isinstance(STORE, SQLiteStore):
            STORE.close()


if __name__ == "__main__":
    main()
