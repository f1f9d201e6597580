// grpc: unary RPCs through a GRPCRoute at a constant arrival rate — a method match (Say to
// its own backend) and an 80/20 split (Shout) — with thresholds on failed calls, p95/p99 per
// method, checks that each answer is the request echoed by a backend of its rule (the
// backends say who they are in `x-backend`), and each split backend's share within ±0.1.
// Uses k6's gRPC module with loadtests/echo.proto. Run by `fairlead loadtest grpc`, which
// applies worlds/grpc.yaml and starts the backends; TARGET is http://IP:PORT. k6 1.1 cannot
// set a call's :authority, so the script dials grpc.loadtest.test:PORT and k6's `hosts`
// option points that name at TARGET's address (Envoy ignores the port in host matching).

import { check } from 'k6';
import grpc from 'k6/net/grpc';
import { Counter, Rate } from 'k6/metrics';
import { options as steady, TARGET } from './steady.js';
import { summary } from './summary.js';

const TOLERANCE = Number(__ENV.SPLIT_TOLERANCE || 0.1);
const AUTHORITY = 'grpc.loadtest.test';
const [, BRACKETED, PORT] = TARGET.match(/^[a-z]+:\/\/(\[[^\]]+\]|[^:/]+):(\d+)/) || [];
const HOST = BRACKETED && BRACKETED.replace(/^\[(.*)\]$/, '$1');
if (!HOST || !/^[\d.]+$|:/.test(HOST)) {
  throw new Error(`TARGET ${TARGET}: grpc.js needs http://IP:PORT (an address, with its port)`);
}

const CASES = [
  { route: 'say', method: 'fairlead.loadtest.Echo/Say', backends: { say: 1 } },
  { route: 'shout', method: 'fairlead.loadtest.Echo/Shout', backends: { 'shout-v1': 0.8, 'shout-v2': 0.2 } },
];
const ROUTES = CASES.map((c) => c.route);

const client = new grpc.Client();
client.load(['.'], 'echo.proto');

const share = new Rate('backend_share');
const failed = new Rate('grpc_req_failed');
const calls = new Counter('grpc_reqs');

const thresholds = { grpc_req_failed: ['rate<0.01'] };
for (const route of ROUTES) {
  thresholds[`grpc_reqs{route:${route}}`] = ['count>0'];
  thresholds[`grpc_req_duration{route:${route}}`] = ['p(95)<250', 'p(99)<500'];
  thresholds[`grpc_req_failed{route:${route}}`] = ['rate<0.01'];
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

export const options = Object.assign(steady(thresholds), { hosts: { [AUTHORITY]: HOST } });

let connected = false;

export default function () {
  if (!connected) {
    client.connect(`${AUTHORITY}:${PORT}`, { plaintext: true, timeout: '5s' });
    connected = true;
  }
  for (const c of CASES) {
    const text = `${c.route} ${__VU}-${__ITER}`;
    const res = client.invoke(c.method, { text }, { tags: { route: c.route } });
    const backend = (res.headers && res.headers['x-backend'] || [])[0];
    calls.add(1, { route: c.route });
    failed.add(res.status !== grpc.StatusOK, { route: c.route });
    check(
      res,
      {
        'status is OK': (r) => r.status === grpc.StatusOK,
        'the request echoed': (r) => r.message && r.message.text === text,
        'answered by a backend of its rule': () => backend in c.backends,
      },
      { route: c.route },
    );
    const names = Object.keys(c.backends);
    if (names.length > 1) {
      for (const name of names) {
        share.add(backend === name, { route: c.route, backend: name });
      }
    }
  }
}

export function handleSummary(data) {
  return summary(data, 'grpc', ROUTES, 'route', 'grpc');
}
