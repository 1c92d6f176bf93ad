"""Drives opentsdb-py 0.6.0 (module `opentsdb`) against rtsd. spec: clients.md "opentsdb-py 0.6.0".

Usage: opentsdb_py_driver.py HOST PORT TS MODE      MODE = telnet | http_gzip | http_plain
Prints {"statuses": ..., "alive": ...} as JSON. In HTTP mode the client counts successes only from the
`?details=true` reply body; a reply it can't read makes it re-POST forever, so wait() is bounded here.
"""
import json
import sys
import threading

from opentsdb import TSDBClient, TSDBConnectProtocols

host, port, ts, mode = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

if mode == "telnet":
    # check_tsdb_alive with TELNET opens a probe connection and closes it without sending anything.
    client = TSDBClient(host, port, protocol=TSDBConnectProtocols.TELNET, check_tsdb_alive=True, host_tag=False)
    alive = client.is_alive()
else:
    compression = "gzip" if mode == "http_gzip" else None
    # check_tsdb_alive=True is broken in HTTP mode (client bug, clients.md); call is_alive() after construction.
    client = TSDBClient(host, port, protocol=TSDBConnectProtocols.HTTP, host_tag=False,
                        http_compression=compression)
    alive = client.is_alive()  # GET /api/version, carrying Content-Encoding: gzip and no body when compressing

metric = "compat.opentsdb_py." + mode
tags = {"host": "harness-opentsdb-py", "variant": mode}
client.send(metric, 42, timestamp=ts, **tags)
client.send(metric, 43.5, timestamp=ts + 10, **tags)
client.send(metric, -7, timestamp=ts + 20, **tags)
# The value passes through as given: a string stays a string ("value": "12.5" over HTTP).
client.send(metric, "12.5", timestamp=ts + 30, **tags)
client.send(metric, 1e-05, timestamp=ts + 40, **tags)

client.close()
done = threading.Event()


def wait():
    client.wait()
    done.set()


threading.Thread(target=wait, daemon=True).start()
if not done.wait(20):
    print(json.dumps({"error": "wait() did not return in 20 s", "statuses": client.statuses}))
    sys.exit(2)
print(json.dumps({"statuses": client.statuses, "alive": alive}))
