//! Running k6: the command line and environment a scenario is run with, and what its
//! summary says of the thresholds.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// How k6 runs a scenario.
#[derive(Clone, Debug)]
pub struct Run {
    /// The script.
    pub script: PathBuf,
    /// Where its requests go (`TARGET`).
    pub target: url::Url,
    /// Iterations per second (`RATE`).
    pub rate: u32,
    /// How long (`DURATION`, k6's notation).
    pub duration: String,
    /// Where its `handleSummary` writes the summary (`RESULTS`).
    pub results: PathBuf,
    /// Prometheus's remote-write receiver, for k6's metrics.
    pub prometheus_rw: Option<url::Url>,
    /// The CA k6 trusts instead of the system's (`SSL_CERT_FILE`, which k6 reads as Go
    /// programs do), for a world's own certificates.
    pub ca_file: Option<PathBuf>,
}

/// The `k6 run` command of `run`, with the program `k6`.
pub fn command(k6: &Path, run: &Run) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(k6);
    command.arg("run").arg("--quiet");
    command
        .env("K6_NO_USAGE_REPORT", "true")
        .env("TARGET", run.target.as_str().trim_end_matches('/'))
        .env("RATE", run.rate.to_string())
        .env("DURATION", &run.duration)
        .env("RESULTS", &run.results);
    if let Some(url) = &run.prometheus_rw {
        command
            .args(["-o", "experimental-prometheus-rw"])
            .env("K6_PROMETHEUS_RW_SERVER_URL", url.as_str())
            .env("K6_PROMETHEUS_RW_TREND_STATS", "p(50),p(95),p(99),avg,max");
    }
    if let Some(file) = &run.ca_file {
        command.env("SSL_CERT_FILE", file);
    }
    command.arg(&run.script);
    command
}

/// One threshold of a summary: its metric, its expression, whether it held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Threshold {
    /// The metric (with its tags, as the script names it).
    pub metric: String,
    /// The expression.
    pub expression: String,
    /// Whether it held.
    pub ok: bool,
}

/// The thresholds of a `handleSummary` summary, sorted by metric.
pub fn thresholds(summary: &Value) -> Vec<Threshold> {
    let mut found = Vec::new();
    for (metric, data) in summary["metrics"].as_object().into_iter().flatten() {
        for (expression, result) in data["thresholds"].as_object().into_iter().flatten() {
            found.push(Threshold {
                metric: metric.clone(),
                expression: expression.clone(),
                ok: result["ok"].as_bool().unwrap_or(false),
            });
        }
    }
    found.sort_by(|a, b| (&a.metric, &a.expression).cmp(&(&b.metric, &b.expression)));
    found
}

/// Whether `text` is a k6 duration (`30s`, `1m30s`, `500ms`, `2h`).
pub fn is_duration(text: &str) -> bool {
    duration(text).is_some()
}

/// The length of a k6 duration (`30s`, `1m30s`, `500ms`, `2h`), if `text` is one.
pub fn duration(text: &str) -> Option<std::time::Duration> {
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    let mut total = std::time::Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, millis) = [("ms", 1), ("s", 1_000), ("m", 60_000), ("h", 3_600_000)]
            .into_iter()
            .find(|(u, _)| rest.starts_with(u))?;
        total += std::time::Duration::from_millis(n.checked_mul(millis)?);
        rest = &rest[unit.len()..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_carries_the_scenario_and_prometheus_settings() {
        let run = Run {
            script: "loadtests/http-steady.js".into(),
            target: url::Url::parse("http://127.0.2.1:8080/").unwrap(),
            rate: 20,
            duration: "5s".into(),
            results: "out.json".into(),
            prometheus_rw: Some(url::Url::parse("http://127.0.0.1:9090/api/v1/write").unwrap()),
            ca_file: Some("ca.pem".into()),
        };
        let command = command(Path::new("k6"), &run);
        let std = command.as_std();
        let args: Vec<_> = std
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "run",
                "--quiet",
                "-o",
                "experimental-prometheus-rw",
                "loadtests/http-steady.js"
            ]
        );
        let env: std::collections::BTreeMap<_, _> = std
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.unwrap().to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert_eq!(env["TARGET"], "http://127.0.2.1:8080");
        assert_eq!(env["RATE"], "20");
        assert_eq!(env["K6_NO_USAGE_REPORT"], "true");
        assert_eq!(
            env["K6_PROMETHEUS_RW_SERVER_URL"],
            "http://127.0.0.1:9090/api/v1/write"
        );
        assert!(env["K6_PROMETHEUS_RW_TREND_STATS"].contains("p(99)"));
        assert_eq!(env["SSL_CERT_FILE"], "ca.pem");
    }

    #[test]
    fn thresholds_are_read_from_a_summary() {
        let summary = serde_json::json!({"metrics": {
            "http_req_failed": {"thresholds": {"rate<0.01": {"ok": false}}},
            "checks{route:web}": {"thresholds": {"rate>0.99": {"ok": true}}},
            "iterations": {"values": {"count": 3}},
        }});
        let found = thresholds(&summary);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].metric, "checks{route:web}");
        assert!(found[0].ok);
        assert_eq!(found[1].expression, "rate<0.01");
        assert!(!found[1].ok);
    }

    #[test]
    fn durations_are_k6_durations() {
        for ok in ["30s", "1m30s", "500ms", "2h"] {
            assert!(is_duration(ok), "{ok}");
            assert!(duration(ok).is_some_and(|d| !d.is_zero()), "{ok}");
        }
        assert_eq!(duration("1m30s"), Some(std::time::Duration::from_secs(90)));
        assert_eq!(
            duration("500ms"),
            Some(std::time::Duration::from_millis(500))
        );
        for bad in ["", "30", "s", "1.5s", "10x", "-1s"] {
            assert!(!is_duration(bad), "{bad}");
        }
    }
}
