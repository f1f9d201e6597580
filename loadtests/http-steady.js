// http-steady: a constant arrival rate over several HTTPRoutes — hostnames, paths, a header
// match and an 80/20 split — with thresholds on failures, p95/p99 per route, dropped
// iterations, and checks that each response came from the backend its route names (the echo
// backends answer who they are in `x-backend`). Run by `fairlead loadtest http-steady`,
// which applies worlds/http-steady.yaml and starts the backends; TARGET, RATE and DURATION
// come from it.

import { check } from 'k6';
import { Rate } from 'k6/metrics';
import { options as steady, send } from './steady.js';
import { summary } from './summary.js';
// How far a split's observed share may be from its weight (a binomial draw per request).
const TOLERANCE = Number(__ENV.SPLIT_TOLERANCE || 0.1);

// What traffic must see, independent of the world under test: each case's request, its
// route (the tag), and the backends that may answer it with their shares.
const CASES = [
  { route: 'web', host: 'web.loadtest.test', path: '/', backends: { web: 1 } },
  { route: 'web', host: 'web.loadtest.test', path: '/', headers: { 'x-canary': 'on' }, backends: { canary: 1 } },
  { route: 'api', host: 'api.loadtest.test', path: '/v1/items', backends: { 'api-v1': 1 } },
  { route: 'api', host: 'api.loadtest.test', path: '/v2/items', backends: { 'api-v2': 1 } },
  { route: 'shop', host: 'shop.loadtest.test', path: '/', backends: { 'shop-v1': 0.8, 'shop-v2': 0.2 } },
];
const ROUTES = [...new Set(CASES.map((c) => c.route))];

// Per split backend: the share of its route's responses it gave.
const share = new Rate('backend_share');

const thresholds = { http_req_failed: ['rate<0.01'] };
for (const route of ROUTES) {
  thresholds[`http_reqs{route:${route}}`] = ['count>0'];
  thresholds[`http_req_failed{route:${route}}`] = ['rate<0.01'];
  thresholds[`http_req_duration{route:${route}}`] = ['p(95)<250', 'p(99)<500'];
  thresholds[`checks{route:${route}}`] = ['rate>0.99'];
}
for (const c of CASES) {
  const names = Object.keys(c.backends);
  if (names.length < 2) continue;
  for (const backend of names) {
    const weight = c.backends[backend];
    thresholds[`backend_share{route:${c.route},backend:${backend}}`] = [
      `rate>${(weight - TOLERANCE).toFixed(3)}`,
      `rate<${(weight + TOLERANCE).toFixed(3)}`,
    ];
  }
}

export const options = steady(thresholds);

export default function () {
  const responses = send(CASES);
  CASES.forEach((c, i) => {
    const res = responses[i];
    const backend = res.headers['X-Backend'];
    check(
      res,
      {
        'status is 200': (r) => r.status === 200,
        'answered by a backend of its route': () => backend in c.backends,
      },
      { route: c.route },
    );
    const names = Object.keys(c.backends);
    if (names.length > 1) {
      for (const name of names) {
        share.add(backend === name, { route: c.route, backend: name });
      }
    }
  });
}

export function handleSummary(data) {
  return summary(data, 'http-steady', ROUTES);
}
