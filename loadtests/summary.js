// What every scenario's handleSummary writes: k6's whole summary as JSON (RESULTS, or
// results/<scenario>.json) and a short table on stdout: per route, requests, p95 and p99,
// failures and checks, then each threshold with whether it held.

function value(data, metric, stat) {
  const m = data.metrics[metric];
  return m && m.values[stat] !== undefined ? m.values[stat] : undefined;
}

function fixed(n, digits) {
  return n === undefined ? '-' : n.toFixed(digits);
}

function pad(text, width) {
  text = String(text);
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

// The table of `routes` (route tag values) in `data`.
export function table(data, routes) {
  const lines = [pad('route', 12) + pad('requests', 10) + pad('p95 ms', 9) + pad('p99 ms', 9) + pad('failed', 9) + 'checks'];
  for (const route of routes) {
    const tag = `{route:${route}}`;
    lines.push(
      pad(route, 12) +
        pad(fixed(value(data, `http_reqs${tag}`, 'count'), 0), 10) +
        pad(fixed(value(data, `http_req_duration${tag}`, 'p(95)'), 2), 9) +
        pad(fixed(value(data, `http_req_duration${tag}`, 'p(99)'), 2), 9) +
        pad(fixed(value(data, `http_req_failed${tag}`, 'rate'), 4), 9) +
        fixed(value(data, `checks${tag}`, 'rate'), 4),
    );
  }
  lines.push('');
  for (const [metric, m] of Object.entries(data.metrics).sort()) {
    for (const [expression, result] of Object.entries(m.thresholds || {})) {
      lines.push(`${result.ok ? 'ok  ' : 'FAIL'} ${metric} ${expression}`);
    }
  }
  return lines.join('\n') + '\n';
}

// handleSummary's answer for the scenario `name` over `routes`.
export function summary(data, name, routes) {
  const out = {};
  out[__ENV.RESULTS || `results/${name}.json`] = JSON.stringify(data, null, 2);
  out.stdout = table(data, routes);
  return out;
}
