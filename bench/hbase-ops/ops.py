#!/usr/bin/env python3
import json, sys
# ops.py DIR [DIR...]: the client's op counts after ingest and after the fold wait, per point
for d in sys.argv[1:]:
    for f in ["stats-ingest.json", "stats-fold.json"]:
        st = json.load(open(f"{d}/{f}"))
        ops = {}
        pts = 0
        for s in st:
            m = s["metric"]
            if m in ("tsd.hbase.ops", "tsd.hbase.cells"):
                op = s["tags"]["op"].split(":", 1)[-1]
                ops.setdefault(op, {})[m.split(".")[-1]] = int(s["value"])
            if m == "tsd.datapoints.added" and s["tags"].get("type") == "all":
                pts = int(s["value"])
        print(f"{d}/{f}: {pts} points")
        tot = 0
        for k in sorted(ops):
            o, c = ops[k].get("ops", 0), ops[k].get("cells", 0)
            if not k.startswith("*"): tot += o
            print(f"  {k:36s} ops {o:>9} ({o/max(pts,1):6.3f}/pt) cells {c:>9}")
        print(f"  {'total ops':36s}     {tot:>9} ({tot/max(pts,1):6.3f}/pt)")
