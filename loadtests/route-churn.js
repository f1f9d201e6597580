// route-churn: steady load while `fairlead loadtest route-churn` changes the route `churn`
// once a second (its split's weights turned around, a path rule added): not one request may
// fail, on the churned route or beside it. The runner times each change from its request to
// the API server until traffic sees it, and adds the distribution to the summary (`churn`:
// changes, propagation p50/p99/max in ms).

import http from 'k6/http';
import { check } from 'k6';
import { summary } from './summary.js';

const TARGET = __ENV.TARGET || 'http://127.0.2.1:8088';
const RATE = Number(__ENV.RATE || 50);
const DURATION = __ENV.DURATION || '30s';

const CASES = [
  { route: 'churn', host: 'churn.loadtest.test', path: '/', backends: ['churn-a', 'churn-b'] },
  { route: 'steady', host: 'steady.loadtest.test', path: '/', backends: ['steady'] },
];
const ROUTES = CASES.map((c) => c.route);

const thresholds = {
  http_req_failed: ['rate==0'],
  dropped_iterations: [`count<${Math.max(1, Math.ceil(RATE * 0.01))}`],
};
for (const route of ROUTES) {
  thresholds[`http_reqs{route:${route}}`] = ['count>0'];
  thresholds[`http_req_failed{route:${route}}`] = ['rate==0'];
  thresholds[`http_req_duration{route:${route}}`] = ['p(99)<500'];
  thresholds[`checks{route:${route}}`] = ['rate==1'];
}

export const options = {
  scenarios: {
    steady: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      preAllocatedVUs: Math.max(5, Math.ceil(RATE / 2)),
      maxVUs: Math.max(10, RATE),
    },
  },
  thresholds,
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(95)', 'p(99)'],
};

// One iteration sends every case at once (in parallel, so no route waits behind another).
export default function () {
  const responses = http.batch(
    CASES.map((c) => ({
      method: 'GET',
      url: `${TARGET}${c.path}`,
      params: { headers: { Host: c.host }, tags: { route: c.route } },
    })),
  );
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
