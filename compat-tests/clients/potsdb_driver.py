"""Drives potsdb 1.0.3 (telnet, fire-and-forget) against rtsd. spec: clients.md "potsdb 1.0.3".

Usage: potsdb_driver.py HOST PORT TS
Prints the put lines potsdb queued (its `log()` returns each line), one JSON list on stdout.
"""
import json
import sys

import potsdb

host, port, ts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

# check_host=True: potsdb opens a probe connection and closes it without sending a byte.
client = potsdb.Client(host, port=port, check_host=True, host_tag="harness-potsdb")
sent = [
    client.log("compat.potsdb.gauge", 42, timestamp=ts, run="r1"),
    client.log("compat.potsdb.gauge", 43.25, timestamp=ts + 10, run="r1"),
    # An integral float is printed as an int ("7").
    client.log("compat.potsdb.gauge", 7.0, timestamp=ts + 20, run="r1"),
    client.log("compat.potsdb.float", 0.001, timestamp=ts, run="r1", dc="eu-1"),
    client.log("compat.potsdb.float", -3.5, timestamp=ts + 10, run="r1", dc="eu-1"),
]
# A repeat of metric, timestamp and tags is dropped by potsdb itself (returns None).
sent.append(client.log("compat.potsdb.float", -3.5, timestamp=ts + 10, run="r1", dc="eu-1"))
client.wait()
print(json.dumps(sent))
