// http-ramp: a ramping arrival rate in STEPS equal steps up to RATE iterations/s (each step
// held for DURATION/STEPS) until a step breaks: its p99 over P99_MS, 0.1% of its requests
// failed, or 0.1% answered by another backend than the route's. Each step's requests are
// tagged `stage:<its rate>`; a step that breaks aborts the run. The runner reads the steps
// from the summary and reports the knee: the highest rate whose step, and every step
// before it, held (`ramp` in the summary). Run by `fairlead loadtest http-ramp`, which
// applies worlds/http-ramp.yaml and starts the backend.

import { check } from 'k6';
import exec from 'k6/execution';
import http from 'k6/http';
import { TARGET, RATE, DURATION, millis } from './steady.js';
import { summary } from './summary.js';

const STEPS = Math.max(1, Math.min(RATE, Number(__ENV.STEPS || 5)));
const P99_MS = Number(__ENV.P99_MS || 250);
const STEP_MS = Math.max(1000, Math.floor(millis(DURATION) / STEPS));
// The rate of each step, strictly rising (so a rate names its step).
const RATES = Array.from({ length: STEPS }, (_, i) => Math.ceil((RATE * (i + 1)) / STEPS));
// The first quarter of each later step ramps from the step before.
const RAMP_MS = Math.floor(STEP_MS / 4);

const stages = [{ target: RATES[0], duration: `${STEP_MS}ms` }];
for (const rate of RATES.slice(1)) {
  stages.push({ target: rate, duration: `${RAMP_MS}ms` });
  stages.push({ target: rate, duration: `${STEP_MS - RAMP_MS}ms` });
}

const thresholds = {};
for (const rate of RATES) {
  const tag = `{stage:${rate}}`;
  thresholds[`http_req_duration${tag}`] = [{ threshold: `p(99)<${P99_MS}`, abortOnFail: true }];
  thresholds[`http_req_failed${tag}`] = [{ threshold: 'rate<0.001', abortOnFail: true }];
  thresholds[`checks${tag}`] = [{ threshold: 'rate>=0.999', abortOnFail: true }];
}

export const options = {
  scenarios: {
    ramp: {
      executor: 'ramping-arrival-rate',
      startRate: RATES[0],
      timeUnit: '1s',
      stages,
      preAllocatedVUs: Math.max(5, Math.ceil(RATE / 4)),
      maxVUs: Math.max(10, RATE),
    },
  },
  thresholds,
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(95)', 'p(99)'],
};

export default function () {
  const elapsed = Date.now() - exec.scenario.startTime;
  const stage = RATES[Math.min(RATES.length - 1, Math.floor(elapsed / STEP_MS))];
  const res = http.get(`${TARGET}/`, {
    headers: { Host: 'ramp.loadtest.test' },
    tags: { route: 'ramp', stage: String(stage) },
  });
  check(
    res,
    {
      'status is 200': (r) => r.status === 200,
      'answered by the route backend': (r) => r.headers['X-Backend'] === 'ramp',
    },
    { route: 'ramp', stage: String(stage) },
  );
}

export function handleSummary(data) {
  return summary(data, 'http-ramp', RATES, 'stage');
}
