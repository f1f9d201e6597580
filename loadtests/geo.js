// geo: with GeoIP on, the headers the instance configures reach the backend for addresses of
// MaxMind's test databases (GeoIP2-City-Test, GeoLite2-ASN-Test). The client's address is
// given in X-Real-IP, which the instance trusts from 127.0.0.0/8; every request also carries
// a forged X-Geo-Country, which Envoy must replace, or remove for an address the databases do
// not know. Each address is a case of its own (the `route` tag); thresholds on failures,
// p95/p99 and checks that the backend saw exactly the expected headers. Run by `fairlead
// loadtest geo`, which applies worlds/geo.yaml, serves the test databases on a mirror the
// instance downloads from, and starts the backend.

import { check } from 'k6';
import { options as steady, send } from './steady.js';
import { summary } from './summary.js';

const HOST = 'geo.loadtest.test';
const HEADERS = ['x-geo-country', 'x-geo-city', 'x-geo-region', 'x-geo-asn'];

// Each address and the headers the backend must see (null: not there).
const CASES = [
  { route: 'london', ip: '81.2.69.142', seen: ['GB', 'London', 'ENG', null] },
  { route: 'linkoping', ip: '89.160.20.112', seen: ['SE', 'Linköping', 'E', '29518'] },
  { route: 'milton', ip: '216.160.83.56', seen: ['US', 'Milton', 'WA', '209'] },
  { route: 'asn-only', ip: '1.128.0.1', seen: [null, null, null, '1221'] },
  { route: 'unknown', ip: '192.0.2.10', seen: [null, null, null, null] },
].map((c) => ({ ...c, host: HOST, path: '/', headers: { 'X-Real-IP': c.ip, 'X-Geo-Country': 'XX' } }));
const ROUTES = CASES.map((c) => c.route);

const thresholds = { http_req_failed: ['rate<0.01'] };
for (const route of ROUTES) {
  thresholds[`http_reqs{route:${route}}`] = ['count>0'];
  thresholds[`http_req_failed{route:${route}}`] = ['rate<0.01'];
  thresholds[`http_req_duration{route:${route}}`] = ['p(95)<250', 'p(99)<500'];
  thresholds[`checks{route:${route}}`] = ['rate>0.99'];
}

export const options = steady(thresholds);

export default function () {
  const responses = send(CASES);
  CASES.forEach((c, i) => {
    const res = responses[i];
    let seen = {};
    try {
      seen = res.json('headers') || {};
    } catch (e) {
      seen = {};
    }
    const checks = { 'status is 200': (r) => r.status === 200 };
    HEADERS.forEach((header, j) => {
      const want = c.seen[j];
      checks[`${header} ${want === null ? 'absent' : want}`] = () => (seen[header] === undefined ? null : seen[header]) === want;
    });
    check(res, checks, { route: c.route });
  });
}

export function handleSummary(data) {
  return summary(data, 'geo', ROUTES);
}
