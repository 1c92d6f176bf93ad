#!/bin/bash
# What rtsd-on-HBase asks of HBase per point (bench/RESULTS.md, the 22:35-23:15 breakdown of 2026-11-28).
#
#   CLUSTER=DIR measure.sh NS a|b LABEL [--set k=v ...]
#
# Runs rtsd (RTSD_BIN, default the release build; BENCH_BIN for rtsd-bench) on the test bed DIR
# (`scripts/hbase-cluster up DIR`) in HBase namespace NS (made first with HBaseTool's `create-set NS`), sends data
# set A or B at scale 0.02 (`rtsd-bench render`) over 4 telnet connections split by host as the bench does, each
# ending with `version`, and keeps /api/stats right after ingest and FOLD_WAIT seconds later (default 75) under
# WORK/LABEL (default /tmp/hbase-ops). `ops.py WORK/LABEL` prints the counts (tsd.hbase.ops/cells) per point.
# Stops the rtsd it started (by its PID).
set -u
NS=$1; DS=$2; LABEL=$3; shift 3
BIN=${RTSD_BIN:-$(dirname "$0")/../../target/release/rtsd}
BENCH=${BENCH_BIN:-$(dirname "$0")/../../target/release/rtsd-bench}
ZK=$(grep zk_quorum= ${CLUSTER:?the test bed dir}/cluster.env | cut -d= -f2)
OUT=${WORK:-/tmp/hbase-ops}/$LABEL; rm -rf $OUT; mkdir -p $OUT/data
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$BIN serve --data-dir $OUT/data --port $PORT --bind 127.0.0.1 --set rtsd.storage.engine=hbase \
  --set tsd.storage.hbase.zk_quorum=$ZK --set rtsd.storage.hbase.namespace=$NS "$@" > $OUT/rtsd.log 2>&1 &
PID=$!; echo $PID > $OUT/pid
for i in $(seq 120); do curl -sf http://127.0.0.1:$PORT/api/version >/dev/null && break; sleep 1; done
$BENCH render $DS --scale 0.02 > $OUT/lines.txt
N=$(wc -l < $OUT/lines.txt); echo "lines $N"
awk '{match($0,/host=host[0-9]+/); h=substr($0,RSTART+9,RLENGTH-9)+0; print > ("'$OUT'/part." (h%4))}' $OUT/lines.txt
T0=$(date +%s.%N)
for p in $OUT/part.*; do python3 "$(dirname "$0")/send.py" $PORT $p > $p.out & done
wait $(jobs -p | grep -v "^$PID$") 2>/dev/null
T1=$(date +%s.%N)
echo "ingest $(echo "$T1 - $T0" | bc) s" | tee $OUT/ingest.txt
curl -s "http://127.0.0.1:$PORT/api/stats" > $OUT/stats-ingest.json
sleep ${FOLD_WAIT:-75}
curl -s "http://127.0.0.1:$PORT/api/stats" > $OUT/stats-fold.json
kill -TERM $PID; for i in $(seq 120); do kill -0 $PID 2>/dev/null || break; sleep 1; done
grep -c . $OUT/part.*.out | head
