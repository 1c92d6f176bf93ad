"""Drives pyopentsdb 0.2.1 against rtsd. spec: clients.md "pyopentsdb 0.2.1".

Usage: pyopentsdb_driver.py HOST PORT TS
Every URL it uses ends in "/": POST /api/put/ (array or single object, no Content-Type), GET /api/version/.
Prints a JSON report of what each call returned or raised.
"""
import json
import sys

from pyopentsdb import tsdb as pyopentsdb_tsdb
from pyopentsdb import errors

host, port, ts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tsdb = pyopentsdb_tsdb.tsdb_connection("http://{}:{}".format(host, port))
tags = {"host": "harness-pyopentsdb", "run": "r1"}
report = {}

report["put_array"] = tsdb.put([
    {"metric": "compat.pyopentsdb.gauge", "timestamp": ts, "value": 42, "tags": tags},
    {"metric": "compat.pyopentsdb.gauge", "timestamp": ts + 10, "value": 43.5, "tags": tags},
])
report["put_object"] = tsdb.put(
    {"metric": "compat.pyopentsdb.gauge", "timestamp": ts + 20, "value": -7, "tags": tags})
report["put_ms"] = tsdb.put(
    {"metric": "compat.pyopentsdb.gauge", "timestamp": ts * 1000 + 250, "value": 1, "tags": tags})
report["version"] = tsdb.version().get("version")

# A bad point: rtsd answers 400 with the error envelope; pyopentsdb raises ArgumentError(message).
try:
    tsdb.put({"metric": "compat.pyopentsdb.bad!", "timestamp": ts, "value": 1, "tags": tags})
    report["put_bad"] = "no exception"
except errors.ArgumentError as e:
    report["put_bad"] = "ArgumentError: " + str(e)

# Client bug (clients.md): put(..., details=True) forwards the flag to requests and crashes.
try:
    tsdb.put({"metric": "compat.pyopentsdb.gauge", "timestamp": ts + 30, "value": 5, "tags": tags}, details=True)
    report["put_details"] = "no exception"
except errors.UncaughtError as e:
    report["put_details"] = "UncaughtError"

tsdb.close()
print(json.dumps(report, sort_keys=True))
