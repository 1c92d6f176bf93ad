// Drives the npm `opentsdb` 0.5.7 client's read calls against rtsd. spec: clients.md "npm opentsdb 0.5.7".
//
// Usage: node npm_opentsdb_driver.js HOST PORT T
// The test has written sys.cpu.user (web01 @T=40, @T+10=50, @T+30=70; web02 @T+10=37, @T+20=48) and the counter
// if.bytes{host=web01} (45, 75, 5 at T+30, T+60, T+90) before this runs.
// The client only GETs: /api/version, /api/aggregators, /api/config, /api/suggest?type=metrics&max=1000000000&q=
// and /api/query?ms=true&arrays=true&show_tsuids=false&no_annotations=true&global_annotations=false&start=..&end=..&m=..
// Prints one JSON report: {"<call>": {"data": ...}} or {"<call>": {"error": {...}}} (the client's own error object:
// status 404 for an empty body or `[]`, 502 for invalid JSON).
'use strict';

const opentsdb = require('opentsdb');

const [host, port, t] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const report = {};

function client() {
	return opentsdb.client().host(host).port(port);
}

function call(name, run) {
	return new Promise((resolve) => {
		run((error, data) => {
			report[name] = error ? { error } : { data };
			resolve();
		});
	});
}

function query(start, end, mquery) {
	return (cb) => client().start(start).end(end).queries(mquery).get(cb);
}

(async () => {
	await call('version', (cb) => client().version(cb));
	await call('aggregators', (cb) => client().aggregators(cb));
	await call('metrics', (cb) => client().metrics(cb));
	await call('config', (cb) => client().config(cb));

	const sum = opentsdb.mquery().aggregator('sum').metric('sys.cpu.user');
	await call('query_sum', query(t * 1000, (t + 60) * 1000, sum));
	const byHost = opentsdb.mquery().aggregator('sum').metric('sys.cpu.user').tags('host', '*');
	await call('query_group_by', query(t * 1000, (t + 60) * 1000, byHost));
	const web01 = opentsdb.mquery().aggregator('avg').downsample('30s-avg').metric('sys.cpu.user').tags('host', 'web01');
	await call('query_downsample', query(t * 1000, (t + 60) * 1000, web01));
	// rate(true) + rateOptions({counter: true, counterMax: 100}) is sent as `rate{true,100,0}`.
	const rate = opentsdb.mquery().aggregator('sum').metric('if.bytes').tags('host', 'web01')
		.rate(true).rateOptions({ counter: true, counterMax: 100 });
	await call('query_rate', query(t * 1000, (t + 43200) * 1000, rate));
	// Nothing in range: rtsd answers `[]`, which the client turns into its own 404 error.
	await call('query_empty', query((t + 86400) * 1000, (t + 86460) * 1000, sum));
	// A 400 from rtsd: the client ignores the status and hands over the parsed error body as data.
	const unknown = opentsdb.mquery().aggregator('sum').metric('nosuch.metric');
	await call('query_unknown_metric', query(t * 1000, (t + 60) * 1000, unknown));

	// A TSUID query: the client sends `tsuids=sum:<tsuid>`, but OpenTSDB's GET parameter is `tsuid`, so 2.4 (and
	// rtsd) find no sub-query: 400 `Missing sub queries`, handed over as data again.
	const byTsuid = opentsdb.tquery().aggregator('sum').tsuids(['000001000001000001']);
	await call('query_tsuids', query(t * 1000, (t + 60) * 1000, byTsuid));

	process.stdout.write(JSON.stringify(report) + '\n');
	process.exit(0);
})();
