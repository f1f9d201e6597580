// What every scenario's handleSummary writes: k6's whole summary as JSON (RESULTS, or
// results/<scenario>.json) and a short table on stdout: per value of a tag (the route, or a
// ramp's step), requests, p95 and p99, failures and checks, then each threshold with
// whether it held. HTTP scenarios read k6's http_* metrics; gRPC's read grpc_req_duration
// and the script's own grpc_reqs and grpc_req_failed.

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

// The requests of the metrics tagged `tag`: their count, or (with no threshold on the count)
// the requests that failed and those that did not.
function requests(data, tag, protocol) {
  const count = value(data, `${protocol}_reqs${tag}`, 'count');
  if (count !== undefined) return count;
  const passes = value(data, `${protocol}_req_failed${tag}`, 'passes');
  const fails = value(data, `${protocol}_req_failed${tag}`, 'fails');
  return passes === undefined ? undefined : passes + fails;
}

// The table of `values` of the tag `key` in `data`, from the metrics of `protocol`.
export function table(data, values, key, protocol = 'http') {
  const lines = [pad(key, 12) + pad('requests', 10) + pad('p95 ms', 9) + pad('p99 ms', 9) + pad('failed', 9) + 'checks'];
  for (const v of values) {
    const tag = `{${key}:${v}}`;
    lines.push(
      pad(v, 12) +
        pad(fixed(requests(data, tag, protocol), 0), 10) +
        pad(fixed(value(data, `${protocol}_req_duration${tag}`, 'p(95)'), 2), 9) +
        pad(fixed(value(data, `${protocol}_req_duration${tag}`, 'p(99)'), 2), 9) +
        pad(fixed(value(data, `${protocol}_req_failed${tag}`, 'rate'), 4), 9) +
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

// handleSummary's answer for the scenario `name`, its table over the `values` of the tag
// `key` (`route` unless named) from the metrics of `protocol` (`http` unless named).
export function summary(data, name, values, key = 'route', protocol = 'http') {
  const out = {};
  out[__ENV.RESULTS || `results/${name}.json`] = JSON.stringify(data, null, 2);
  out.stdout = table(data, values, key, protocol);
  return out;
}
