//! The health rules, each a pure function of what an object's status, its endpoints or its
//! certificate say: Gateway API conditions, ready endpoints per Service port, probe results,
//! certificate expiry, ready replicas.

use serde_json::{Value, json};

use crate::model::{Health, Verdict};

/// A certificate this close to expiry (in seconds) makes its Secret degraded.
pub const EXPIRY_WARNING: i64 = 14 * 24 * 3600;

/// The conditions of a status, each summarized as `{type, status, reason, message}` (times
/// and generations dropped: the graph changes when a condition does, not when it is
/// rewritten).
pub fn summarize(conditions: Option<&Value>) -> Vec<Value> {
    conditions
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|c| {
                    json!({
                        "type": c["type"],
                        "status": c["status"],
                        "reason": c["reason"],
                        "message": c["message"],
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What Gateway API conditions say: unknown without any; failing when `Accepted`,
/// `Programmed` or `Ready` is `False` or `Conflicted` is `True`; degraded when
/// `ResolvedRefs` is `False`; unknown while a condition is `Unknown`; healthy otherwise.
pub fn conditions(conditions: &[Value]) -> Verdict {
    if conditions.is_empty() {
        return Verdict::of(
            Health::Unknown,
            "NoStatus: no controller has reported on it",
        );
    }
    let mut verdict = Verdict::healthy();
    for c in conditions {
        let type_ = c["type"].as_str().unwrap_or_default();
        let status = c["status"].as_str().unwrap_or_default();
        let health = match (type_, status) {
            (_, "Unknown") => Health::Unknown,
            ("Accepted" | "Programmed" | "Ready", "False") | ("Conflicted", "True") => {
                Health::Failing
            }
            ("ResolvedRefs", "False") => Health::Degraded,
            _ => continue,
        };
        let reason = format!(
            "{}: {}",
            c["reason"].as_str().unwrap_or(type_),
            c["message"].as_str().unwrap_or_default()
        );
        verdict.worsen(Verdict::of(health, reason));
    }
    verdict
}

/// The condition of `type_` among summarized conditions.
pub fn condition<'a>(conditions: &'a [Value], type_: &str) -> Option<&'a Value> {
    conditions.iter().find(|c| c["type"] == type_)
}

/// Endpoint counts of one Service port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Endpoints (not terminating).
    pub total: usize,
    /// Ready.
    pub ready: usize,
    /// Serving (ready or not, while terminating too).
    pub serving: usize,
    /// Terminating.
    pub terminating: usize,
}

/// A port's endpoints: failing with none ready, degraded with some not ready.
pub fn endpoints(counts: Counts, port: &str) -> Verdict {
    if counts.total == 0 {
        Verdict::of(
            Health::Failing,
            format!("NoEndpoints: port {port} has no endpoints"),
        )
    } else if counts.ready == 0 {
        Verdict::of(
            Health::Failing,
            format!(
                "NoReadyEndpoints: none of the {} endpoints of port {port} is ready",
                counts.total
            ),
        )
    } else if counts.ready < counts.total {
        Verdict::of(
            Health::Degraded,
            format!(
                "EndpointsNotReady: {} of {} endpoints of port {port} ready",
                counts.ready, counts.total
            ),
        )
    } else {
        Verdict::healthy()
    }
}

/// A whole of parts (a Service of ports, a route of rules or parents): failing when every
/// part fails, degraded when some part is not healthy, unknown when nothing is known.
pub fn of_parts(parts: &[Verdict], what: &str) -> Verdict {
    if parts.is_empty() {
        return Verdict::healthy();
    }
    let failing = parts.iter().filter(|p| p.health == Health::Failing).count();
    let mut verdict = if failing == parts.len() {
        Verdict {
            health: Health::Failing,
            reasons: Vec::new(),
        }
    } else {
        let worst = parts.iter().map(|p| p.health).max().unwrap_or_default();
        Verdict {
            health: match worst {
                Health::Failing => Health::Degraded,
                other => other,
            },
            reasons: Vec::new(),
        }
    };
    if failing > 0 && failing < parts.len() {
        verdict.reasons.push(format!(
            "Partial: {failing} of {} {what} failing",
            parts.len()
        ));
    }
    for p in parts {
        for r in &p.reasons {
            if !verdict.reasons.contains(r) {
                verdict.reasons.push(r.clone());
            }
        }
    }
    verdict
}

/// A certificate expiring at `not_after` (Unix seconds), seen at `now`.
pub fn certificate(not_after: i64, now: i64) -> Verdict {
    if not_after <= now {
        Verdict::of(
            Health::Failing,
            format!("CertificateExpired: expired {}", rfc3339(not_after)),
        )
    } else if not_after - now <= EXPIRY_WARNING {
        Verdict::of(
            Health::Degraded,
            format!(
                "CertificateExpiresSoon: expires {} (in {} days)",
                rfc3339(not_after),
                (not_after - now) / 86_400
            ),
        )
    } else {
        Verdict::healthy()
    }
}

/// Ready replicas of a workload.
pub fn replicas(desired: i32, ready: i32) -> Verdict {
    if desired > 0 && ready == 0 {
        Verdict::of(
            Health::Failing,
            format!("NoReadyReplicas: 0 of {desired} ready"),
        )
    } else if ready < desired {
        Verdict::of(
            Health::Degraded,
            format!("ReplicasNotReady: {ready} of {desired} ready"),
        )
    } else {
        Verdict::healthy()
    }
}

/// Unix seconds as `YYYY-MM-DDThh:mm:ssZ`.
pub fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_else(|| unix.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, reason: &str) -> Value {
        json!({"type": type_, "status": status, "reason": reason, "message": "m"})
    }

    #[test]
    fn conditions_decide_health() {
        assert_eq!(conditions(&[]).health, Health::Unknown);
        let ok = [
            cond("Accepted", "True", "Accepted"),
            cond("ResolvedRefs", "True", "ResolvedRefs"),
        ];
        assert_eq!(conditions(&ok), Verdict::healthy());
        let refs = [
            cond("Accepted", "True", "Accepted"),
            cond("ResolvedRefs", "False", "BackendNotFound"),
        ];
        assert_eq!(
            conditions(&refs),
            Verdict::of(Health::Degraded, "BackendNotFound: m")
        );
        let refused = [
            cond("Accepted", "False", "NoMatchingParent"),
            cond("ResolvedRefs", "False", "BackendNotFound"),
        ];
        let v = conditions(&refused);
        assert_eq!(v.health, Health::Failing);
        assert_eq!(v.reasons, ["NoMatchingParent: m", "BackendNotFound: m"]);
        assert_eq!(
            conditions(&[cond("Conflicted", "True", "HostnameConflict")]).health,
            Health::Failing
        );
        assert_eq!(
            conditions(&[cond("Programmed", "Unknown", "Pending")]).health,
            Health::Unknown
        );
    }

    #[test]
    fn parts_fail_together_and_degrade_alone() {
        let down = Verdict::of(Health::Failing, "down");
        let up = Verdict::healthy();
        assert_eq!(
            of_parts(&[down.clone(), down.clone()], "x").health,
            Health::Failing
        );
        let partial = of_parts(&[down, up.clone()], "backends");
        assert_eq!(partial.health, Health::Degraded);
        assert_eq!(
            partial.reasons,
            ["Partial: 1 of 2 backends failing", "down"]
        );
        assert_eq!(of_parts(&[up.clone(), up], "x"), Verdict::healthy());
    }

    #[test]
    fn endpoints_and_certificates_and_replicas() {
        let c = |total, ready| Counts {
            total,
            ready,
            serving: ready,
            terminating: 0,
        };
        assert_eq!(endpoints(c(0, 0), "80").health, Health::Failing);
        assert_eq!(endpoints(c(2, 0), "80").health, Health::Failing);
        assert_eq!(endpoints(c(2, 1), "80").health, Health::Degraded);
        assert_eq!(endpoints(c(2, 2), "80"), Verdict::healthy());
        let now = 1_800_000_000;
        assert_eq!(certificate(now - 1, now).health, Health::Failing);
        assert_eq!(certificate(now + 86_400, now).health, Health::Degraded);
        assert_eq!(
            certificate(now + EXPIRY_WARNING + 1, now),
            Verdict::healthy()
        );
        assert_eq!(replicas(2, 0).health, Health::Failing);
        assert_eq!(replicas(2, 1).health, Health::Degraded);
        assert_eq!(replicas(0, 0), Verdict::healthy());
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_798_761_599), "2026-12-31T23:59:59Z");
    }
}
