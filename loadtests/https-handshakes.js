// https-handshakes: new TLS connections per second on an HTTPS listener. Every request opens
// a connection of its own (noConnectionReuse) with its route's hostname as SNI, so RATE
// iterations/s are RATE handshakes/s per hostname; thresholds on the handshake's p95/p99
// per route, failures, and checks that each answer came over a new handshake from the
// route's own backend. k6 verifies the listener's certificate: `fairlead loadtest
// https-handshakes` issues it from a CA of the run and hands k6 that CA (SSL_CERT_FILE);
// against a target of your own, set SSL_CERT_FILE, or INSECURE=true to skip verification.

import { check } from 'k6';
import http from 'k6/http';
import { options as steady, TARGET } from './steady.js';
import { summary } from './summary.js';

const CASES = [
  { route: 'tls-a', host: 'tls-a.loadtest.test', backend: 'tls-a' },
  { route: 'tls-b', host: 'tls-b.loadtest.test', backend: 'tls-b' },
];
const ROUTES = CASES.map((c) => c.route);

// TARGET is https://ADDRESS:PORT; each hostname resolves to ADDRESS.
const [, ADDRESS, PORT] = TARGET.match(/^https:\/\/([^/:]+):?(\d+)?/) || [];
if (!ADDRESS) throw new Error(`TARGET ${TARGET} is not an https:// address`);

const thresholds = { http_req_failed: ['rate<0.01'] };
for (const route of ROUTES) {
  thresholds[`http_reqs{route:${route}}`] = ['count>0'];
  thresholds[`http_req_failed{route:${route}}`] = ['rate<0.01'];
  thresholds[`http_req_tls_handshaking{route:${route}}`] = ['p(95)<100', 'p(99)<250'];
  thresholds[`http_req_duration{route:${route}}`] = ['p(99)<500'];
  thresholds[`checks{route:${route}}`] = ['rate>0.99'];
}

export const options = Object.assign(steady(thresholds), {
  hosts: Object.fromEntries(CASES.map((c) => [c.host, ADDRESS])),
  noConnectionReuse: true,
  insecureSkipTLSVerify: __ENV.INSECURE === 'true',
});

export default function () {
  const responses = http.batch(
    CASES.map((c) => ({
      method: 'GET',
      url: `https://${c.host}:${PORT || 443}/`,
      params: { headers: { Host: c.host }, tags: { route: c.route, name: c.host } },
    })),
  );
  CASES.forEach((c, i) => {
    check(
      responses[i],
      {
        'status is 200': (r) => r.status === 200,
        'answered by the route backend': (r) => r.headers['X-Backend'] === c.backend,
        'over a new TLS handshake': (r) => r.timings.tls_handshaking > 0 && r.tls_version !== '',
      },
      { route: c.route },
    );
  });
}

export function handleSummary(data) {
  return summary(data, 'https-handshakes', ROUTES);
}
