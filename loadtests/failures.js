// failures: the steady load of the failure suite — a constant arrival rate over the routes
// of worlds/failures.yaml (or those HOSTS names), while something fails beside it: the
// control plane killed or gone, the proxies rolled (e2e/tests/failures.rs makes each happen,
// one at a time; by hand, make one happen while `fairlead loadtest failures` runs). Each request that did
// not answer 200 is counted in `failures`, by route, status (0: no HTTP answer) and k6's
// error code, and no threshold allows one: RELIABILITY.md has the figures.

import { Counter } from 'k6/metrics';
import { options as steady, send } from './steady.js';
import { summary } from './summary.js';

// The routes under load: HOSTS (comma-separated `route=host`) when given, else the world's.
const CASES = (__ENV.HOSTS || 'shop=shop.failures.test,nodes=nodes.failures.test')
  .split(',')
  .map((pair) => pair.split('='))
  .map(([route, host]) => ({ route, host, path: '/' }));
const ROUTES = CASES.map((c) => c.route);

// What a failed request is counted by; the summary lists each status of STATUSES.
const failures = new Counter('failures');
const STATUSES = [0, 404, 500, 502, 503, 504];

const thresholds = { failures: ['count<1'] };
for (const route of ROUTES) {
  thresholds[`http_reqs{route:${route}}`] = ['count>0'];
  thresholds[`failures{route:${route}}`] = ['count<1'];
}
for (const status of STATUSES) {
  thresholds[`failures{status:${status}}`] = ['count<1'];
}

export const options = steady(thresholds);

export default function () {
  const responses = send(CASES);
  CASES.forEach((c, i) => {
    const res = responses[i];
    if (res.status !== 200) {
      failures.add(1, { route: c.route, status: String(res.status), error: String(res.error_code) });
    }
  });
}

export function handleSummary(data) {
  return summary(data, 'failures', ROUTES);
}
