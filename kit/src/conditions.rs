//! Kubernetes status conditions: when each last changed. A condition keeps the
//! `lastTransitionTime` of the current condition of its type while its status stays the same
//! (as apimachinery's `SetStatusCondition` does); a new type or a changed status starts now.
//! Written once for every component that writes conditions.

use serde_json::{Value, json};

/// The time as conditions carry it (RFC 3339, seconds).
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `desired` conditions (JSON objects with `type` and `status`) with their
/// `lastTransitionTime` from `current` (a JSON list of conditions) where type and status are
/// unchanged, `now` elsewhere.
pub fn merge(
    desired: impl IntoIterator<Item = Value>,
    current: Option<&Value>,
    now: &str,
) -> Value {
    let current = current
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    desired
        .into_iter()
        .map(|mut condition| {
            let since = current
                .iter()
                .find(|c| c["type"] == condition["type"] && c["status"] == condition["status"])
                .and_then(|c| c["lastTransitionTime"].as_str())
                .unwrap_or(now)
                .to_owned();
            condition["lastTransitionTime"] = json!(since);
            condition
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_keeps_its_time_while_its_status_stays() {
        let current = json!([
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Accepted", "status": "True", "lastTransitionTime": "2026-01-02T00:00:00Z"}]);
        let merged = merge(
            [
                json!({"type": "Ready", "status": "True", "reason": "Other"}),
                json!({"type": "Accepted", "status": "False"}),
                json!({"type": "Programmed", "status": "True"}),
            ],
            Some(&current),
            "2026-02-01T00:00:00Z",
        );
        let times: Vec<&str> = merged
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["lastTransitionTime"].as_str().unwrap())
            .collect();
        assert_eq!(
            times,
            [
                "2026-01-01T00:00:00Z",
                "2026-02-01T00:00:00Z",
                "2026-02-01T00:00:00Z"
            ]
        );
        assert_eq!(merged[0]["reason"], "Other");
    }
}
