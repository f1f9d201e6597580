// What the constant-arrival-rate scenarios share: TARGET, RATE and DURATION from
// `fairlead loadtest`, their k6 options, and one iteration's requests — every case of the
// scenario at once (in parallel, so no route waits behind another), tagged by route.

import http from 'k6/http';

export const TARGET = __ENV.TARGET || 'http://127.0.2.1:8088';
export const RATE = Number(__ENV.RATE || 50);
export const DURATION = __ENV.DURATION || '30s';

// The milliseconds of a k6 duration (`1m30s`, `500ms`).
export function millis(duration) {
  const unit = { ms: 1, s: 1000, m: 60000, h: 3600000 };
  let total = 0;
  for (const [, n, u] of duration.matchAll(/(\d+)(ms|s|m|h)/g)) total += Number(n) * unit[u];
  return total;
}

// The options of a scenario with `thresholds`, and dropped iterations under 1% of the rate.
export function options(thresholds) {
  return {
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
    thresholds: Object.assign(
      { dropped_iterations: [`count<${Math.max(1, Math.ceil(RATE * 0.01))}`] },
      thresholds,
    ),
    summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(95)', 'p(99)'],
  };
}

// Sends every case ({route, host, path, headers}) at once; the responses, in order.
export function send(cases) {
  return http.batch(
    cases.map((c) => ({
      method: 'GET',
      url: `${TARGET}${c.path}`,
      params: {
        headers: Object.assign({ Host: c.host }, c.headers || {}),
        tags: { route: c.route, name: `${c.route} ${c.path}` },
      },
    })),
  );
}
