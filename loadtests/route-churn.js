// route-churn: steady load while `fairlead loadtest route-churn` changes the route `churn`
// once a second (its split's weights turned around, a path rule added) and makes the pods
// behind its ServiceWithHealthchecks not-ready and ready again, one at a time: not one
// request may fail, on the churned route, its health-checked rule or beside it. The runner
// times each route change from its request to the API server until traffic sees it, and
// each readiness change until traffic leaves the pod and comes back to it, and adds the
// distributions to the summary (`churn`: changes, propagation p50/p99/max in ms;
// `churn.readiness`: changes, left and back p50/p99/max in ms).

import { check } from 'k6';
import { options as steady, send } from './steady.js';
import { summary } from './summary.js';

const CASES = [
  { route: 'churn', host: 'churn.loadtest.test', path: '/', backends: ['churn-a', 'churn-b'] },
  {
    route: 'churn-swh',
    host: 'churn.loadtest.test',
    path: '/swh',
    backends: ['churn-h-0', 'churn-h-1'],
  },
  { route: 'steady', host: 'steady.loadtest.test', path: '/', backends: ['steady'] },
];
const ROUTES = CASES.map((c) => c.route);

const thresholds = { http_req_failed: ['rate==0'] };
for (const route of ROUTES) {
  thresholds[`http_reqs{route:${route}}`] = ['count>0'];
  thresholds[`http_req_failed{route:${route}}`] = ['rate==0'];
  thresholds[`http_req_duration{route:${route}}`] = ['p(99)<500'];
  thresholds[`checks{route:${route}}`] = ['rate==1'];
}

export const options = steady(thresholds);

export default function () {
  const responses = send(CASES);
  CASES.forEach((c, i) => {
    check(
      responses[i],
      {
        'status is 200': (r) => r.status === 200,
        'answered by a backend of its route': (r) => c.backends.includes(r.headers['X-Backend']),
      },
      { route: c.route },
    );
  });
}

export function handleSummary(data) {
  return summary(data, 'route-churn', ROUTES);
}
