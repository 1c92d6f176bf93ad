"""Drives pyopentsdb 0.2.1's read calls against rtsd. spec: clients.md "pyopentsdb 0.2.1", query spec §7.3.

Usage: pyopentsdb_query_driver.py HOST PORT T
The test has written sys.cpu.user (web01 @T=40, @T+10=50, @T+30=70; web02 @T+10=37, @T+20=48) and the counter
if.bytes{host=web01} (45, 75, 5 at T+30, T+60, T+90) before this runs.
Every call goes to a URL ending in "/" (POST /api/query/, POST /api/suggest/, GET /api/aggregators/, ...), bodies
are json.dumps(...) with no Content-Type. Prints one JSON report: what each call returned, or the exception it
raised ("<ExceptionClass>: <message>").
"""
import datetime
import json
import sys

from pyopentsdb import errors
from pyopentsdb import tsdb as pyopentsdb_tsdb

host, port, t = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tsdb = pyopentsdb_tsdb.tsdb_connection("http://{}:{}".format(host, port))
utc = datetime.timezone.utc
start = datetime.datetime.fromtimestamp(t, tz=utc)
end = datetime.datetime.fromtimestamp(t + 60, tz=utc)
report = {}


def record(name, call):
    try:
        report[name] = call()
    except errors.TsdbError as e:
        report[name] = "{}: {}".format(type(e).__name__, e)


# Aggregated, then grouped by host (legacy tags), then with filters, explicitTags and ms resolution.
record("query_sum", lambda: tsdb.query(
    start=start, end=end, metrics=[{"metric": "sys.cpu.user", "aggregator": "sum"}]))
record("query_group_by", lambda: tsdb.query(
    start=start, end=end, metrics=[{"metric": "sys.cpu.user", "aggregator": "sum", "tags": {"host": "*"}}]))
record("query_filters_ms", lambda: tsdb.query(
    start=start, end=end, ms=True, metrics=[{
        "metric": "sys.cpu.user", "aggregator": "sum", "explicitTags": True,
        "filters": [{"type": "literal_or", "tagk": "host", "filter": "web01", "groupBy": False}]}]))
record("query_downsample", lambda: tsdb.query(
    start=start, end=end, metrics=[{"metric": "sys.cpu.user", "aggregator": "sum", "downsample": "30s-sum"}]))
record("query_rate_counter", lambda: tsdb.query(
    start=start, end=datetime.datetime.fromtimestamp(t + 43200, tz=utc), metrics=[{
        "metric": "if.bytes", "aggregator": "sum", "rate": True,
        "rateOptions": {"counter": True, "counterMax": 100}}]))
# The sent body carries "delete": false: nothing may be deleted, so the same query answers the same again.
record("query_again", lambda: tsdb.query(
    start=start, end=end, metrics=[{"metric": "sys.cpu.user", "aggregator": "sum"}]))
# A 400 from rtsd: pyopentsdb raises ArgumentError(error.message).
record("query_unknown_metric", lambda: tsdb.query(
    start=start, end=end, metrics=[{"metric": "nosuch.metric", "aggregator": "sum"}]))
record("multiquery", lambda: tsdb.multiquery([
    {"start": start, "end": end, "metrics": [{"metric": "sys.cpu.user", "aggregator": "max"}]},
    {"start": start, "end": end, "metrics": [{"metric": "sys.cpu.user", "aggregator": "min"}]},
], max_tsdb_concurrency=1))

record("suggest", lambda: tsdb.suggest(type="metrics", q="sys", max=10))
record("suggest_tagv", lambda: tsdb.suggest(type="tagv", q="web"))
record("suggest_bad_type", lambda: tsdb.suggest(type="foo", q="sys"))
record("metrics", lambda: tsdb.metrics(q="sys"))
record("aggregators", lambda: sorted(tsdb.aggregators()))
record("version", lambda: tsdb.version())
record("config_is_dict", lambda: isinstance(tsdb.config(), dict))
record("filters", lambda: sorted(tsdb.filters().keys()))

tsdb.close()
print(json.dumps(report, sort_keys=True))
