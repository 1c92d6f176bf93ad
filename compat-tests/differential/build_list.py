# Adds the new (and changed) differences of a failing run's report ($CARGO_TARGET_TMPDIR/differential-new.json,
# i.e. target/tmp/differential-new.json) to differences.json: each is classified by the rules below and gets its
# reason; an entry with the same id is replaced; an unclassified one is printed and left out (so the test keeps
# failing until it has a reason). Stale entries the test reports are removed by hand.
# Run: python3 compat-tests/differential/build_list.py   (from the workspace root, after a failing run)
import json,os,re,sys
HERE=os.path.dirname(os.path.abspath(__file__))
ROOT=os.path.dirname(os.path.dirname(HERE))
d=json.load(open(os.path.join(ROOT,'target/tmp/differential-new.json')))['differences']
CT='[application/json; charset=UTF-8]'
LIST=os.path.join(HERE,'differences.json')
existing=json.load(open(LIST))['differences'] if os.path.exists(LIST) else []
report_ids={x['id'] for x in d}
out=[e for e in existing if e['id'] not in report_ids and e['id']!='*']+[{
 "id":"*","glob":True,
 "rtsd":'400 '+CT+' {"error":{"code":400,"message":"Unable to parse the given JSON","details":"*"}}',
 "opentsdb":'400 '+CT+' {"error":{"code":400,"message":"Unable to parse the given JSON","details":"com.fasterxml.jackson.*"}}',
 "why":"Real difference awaiting a fix (low priority). Both refuse the body with the same status and message; the details text is Jackson's exception, and 2.4.1 (Jackson 2.9) prints it as '<class>: <msg>\\n at [Source: (String)\"<whole body>\"; line: 1, column: N] (through reference chain: ...)'. rtsd prints another layout (' at [line: 1, column: N]', other class names such as MismatchedInputException for 2.4.1's InvalidFormatException, JsonParseException for JsonEOFException, other columns) and, on /api/query, only the inner message without the class (e.g. 'Filter must contain an asterisk')."}]
def num(s): return re.sub(r'-?\d[\d.E-]*','N',s)
reasons={
 'put/catalogue/whitespace':"Deliberate (README, Storage: 'A whitespace-only /api/put body is a 400 Missing request content, not OpenTSDB's accidental 500').",
 'telnet/catalogue/rollup-default-interval':"Deliberate (README, Storage: 'rollup <default interval>-<agg> ... is refused'); 2.4.1 accepts it silently and writes rollup cells into the raw table.",
 'query/error/post-delete-disabled':"Deliberate (README, Storage: deleting needs tsd.http.query.allow_delete=true; 2.4 honours a POST body's \"delete\":true even with the setting off, and did delete put.a's rows here).",
 'misc/query-last':"Deliberate (README, Storage: '/api/query/last answers from the series index for any backScan'); 2.4.1 with backScan 0 reads the tsdb-meta counters, which this config (no realtime TS meta) never writes, so it answers [].",
 'misc/query-last-resolve':"Deliberate, as misc/query-last.",
 'misc/query-last-tsuids':"Deliberate, as misc/query-last.",
 'misc/lookup':"Two differences: (1) deliberate: rtsd answers from its series index, 2.4.1 scans the empty tsdb-meta table (no realtime TS meta) and finds nothing; (2) REAL BUG: key order. 2.4.1 writes ...\"limit\",\"time\",\"results\",\"startIndex\",\"totalResults\"; rtsd writes ...\"limit\",\"startIndex\",\"totalResults\",\"time\",\"results\" (the query spec §6.5 example has rtsd's order; the running 2.4.1 does not).",
 'misc/lookup-metric':"As misc/lookup.", 'misc/lookup-tag-only':"As misc/lookup.", 'misc/lookup-limit':"As misc/lookup.",
 'misc/lookup-post-no-meta':"REAL BUG (key order, as misc/lookup); with useMeta:false 2.4.1 scans the data table, so the results themselves can be compared here.",
 'misc/old-version':"REAL BUG: GET /version?json: 2.4.1 answers the JSON object of /api/version (Content-Type application/json); rtsd answers the telnet-style text (text/plain). Normalised: JSON to its key list, text to its line count and first word (versions, revisions, build times and hosts differ by build).",
 'misc/old-aggregators':"REAL BUG (minor): old routes /aggregators and /suggest: 2.4.1 sends 'Content-Type: application/json' without '; charset=UTF-8'; bodies identical.",
 'misc/old-suggest':"REAL BUG (minor), as misc/old-aggregators.",
 'misc/uidmeta':"Time-dependent and a difference: rtsd reports the UID's creation time (now), 2.4.1 'created':0 (it writes UID meta only with tsd.core.meta.enable_realtime_uid). Decide: rtsd should answer 0 like 2.4.1 with this config.",
 'query/error/unclosed-brace':"REAL BUG: m= tag-brace parse errors (Missing '}' ..., invalid tag) escape as 500 in 2.4.1 (IllegalArgumentException out of Tags.parseWithMetricAndFilters, like the unknown-filter-type quirk of query spec §1.1); rtsd answers 400. Spec §1.1 names the quirk only for unknown filter types.",
 'query/error/bad-tag-pair':"REAL BUG, as query/error/unclosed-brace.",
 'query/error/bad-tsuid':"2.4.1 answers 500 with Java's StringIndexOutOfBoundsException message, which depends on the JDK (JDK 8: 'String index out of range: 6', which rtsd copies; JDK 17 here: 'begin 0, end 6, length 2'). Status: rtsd 400, 2.4.1 500 -> REAL BUG in the status; the message is JVM-dependent.",
 'query/error/post-no-queries':"rtsd is saner: 2.4.1 throws a NullPointerException (500 'An internal null pointer exception was thrown') for a body without queries; rtsd answers 400 'Missing queries'. Not in README's deliberate list: either document it or answer 500 like 2.4.1.",
 'query/error/post-no-aggregator':"REAL BUG (small): the TSQuery dump in details prints a missing aggregator as 'agg=null' in 2.4.1, 'agg=' in rtsd.",
 'query/error/post-timezone':"REAL BUG (rollup path): 1h-sum with rollups enabled reads the empty 1h rollup table in 2.4.1 (answer []); rtsd computed it from raw data (timezone/useCalendar given). See query/rollup/*.",
}
for x in d:
    i=x['id']; r=x['rtsd']; o=x['opentsdb']
    if 'Unable to parse the given JSON' in o and 'Unable to parse the given JSON' in r and 'com.fasterxml.jackson' in o: continue
    why=reasons.get(i)
    if why is None:
        if i.startswith('put/catalogue/whitespace'): why=reasons['put/catalogue/whitespace']
        elif i.startswith('query/rollup/') and 'No ID found mapping to aggregator' in o:
            why="REAL BUG (rollup path): with rollups enabled, 2.4.1 serves a downsample whose interval a rollup interval divides from the rollup table and refuses aggregators the rollup config has no ID for (400 'No ID found mapping to aggregator: <agg>'); rtsd answers from raw data."
        elif i.startswith('query/rollup/') and o.endswith(' []'):
            why="REAL BUG (rollup path): 2.4.1 reads the rollup table (empty: nothing wrote rollups) and answers [] (no series at all); rtsd answers the raw data, or lists the series with empty dps. README 'Rollups' says rtsd reads rollups as 2.4 does with ROLLUP_NOFALLBACK by default."
        elif i.startswith('query/rollup/'):
            why="REAL BUG (rollup path), see the other query/rollup entries."
        elif num(r)==num(o):
            why="REAL BUG (number formatting; spec §0.6 is wrong too): 2.4.1 formats doubles with the JDK <= 18 Double.toString, which is NOT always the shortest round-trip form: it prints e.g. 7.5601410138153904E16 where rtsd prints 7.56014101381539E16, and 4.9E-324 where rtsd prints 5.0E-324 (Double.MIN_VALUE; 4.9E-324 in every JDK). The reference runs JDK 17."
        elif ('explicitTags":true' in x['request'] or 'explicit_tags' in x['request']) and r.endswith(' []'):
            why="REAL BUG: explicitTags with no tags/filters: 2.4.1 ignores explicitTags when the sub-query has no filters and answers every series (aggregated); rtsd matches only series without tags and answers []."
        elif 'bad timestamp=' in o and i.startswith('put/'):
            why="REAL DIFFERENCE IN STORAGE: over HTTP /api/put 2.4.1 stores every non-integer value as an 8-byte double (the error shows value=[..8 bytes..]/15), even one that fits a float (898.193359375, 1.5f); telnet puts store 4-byte floats (telnet/catalogue/bad-ts-float agrees). Cause, src/tsd/PutDataPointRpc.java (2.4): tsdb.addPoint(dp.getMetric(), timeStamp, (Tags.fitsInFloat(dp.getValue()) ? Float.parseFloat(dp.getValue()) : Double.parseDouble(dp.getValue())), dp.getTags()): a Java ?: of float and double has type double, so addPoint(double) always runs. rtsd applies the telnet fitsInFloat rule to HTTP too. Query answers are the same; the stored cells differ. Spec §3.2 ('parsed exactly as in 2.3') is wrong for 2.4.1."
    if why is None:
        print('UNCLASSIFIED',i,'\n',x['request'][:300],'\n',r[:300],'\n',o[:300]); continue
    e={"id":i,"rtsd":r,"opentsdb":o,"why":why}
    if len(r)>400 or len(o)>400:
        # Long query answers are listed by their first 300 and last 100 characters (glob), to keep the file small.
        cut=lambda t: t if len(t)<=400 else t[:300]+'*'+t[-100:]
        e={"id":i,"glob":True,"rtsd":cut(r),"opentsdb":cut(o),"why":why}
    out.append(e)
json.dump({"differences":out},open(LIST,'w'),indent=1,ensure_ascii=False)
print(len(out),'entries')
