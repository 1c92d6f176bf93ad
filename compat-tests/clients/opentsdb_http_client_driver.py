"""Drives opentsdb-http-client 0.2.0 against rtsd. spec: clients.md "opentsdb-http-client 0.2.0".

Usage: opentsdb_http_client_driver.py HOST PORT TS
check_host=True does one GET /api/version; every point is its own POST /api/put (one JSON object,
Content-Type: application/json, new connection). Any status but 200/204 makes it retry forever, so wait() is
bounded here. Prints {"queued": n} as JSON.
"""
import json
import sys
import threading

from opentsdb_http_client.http_client import OpenTSDBClient

host, port, ts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = OpenTSDBClient(host, port, check_host=True)
tags = {"host": "harness-http-client", "run": "r1"}
client.put("compat.http_client.gauge", 42, timestamp=ts, **tags)
client.put("compat.http_client.gauge", 43.5, timestamp=ts + 10, **tags)
client.put("compat.http_client.gauge", 7.0, timestamp=ts + 20, **tags)   # sent as the int 7
# Synchronous: posted inline before put() returns.
client.put("compat.http_client.sync", 0.25, asynchronous=False, timestamp=ts, **tags)

done = threading.Event()


def wait():
    client.wait()
    done.set()


threading.Thread(target=wait, daemon=True).start()
if not done.wait(20):
    print(json.dumps({"error": "wait() did not return in 20 s (a reply other than 200/204?)"}))
    sys.exit(2)
print(json.dumps({"queued": client.queued}))
