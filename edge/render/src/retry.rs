//! A rule's retries as Envoy's `RetryPolicy` ([`fairlead_edge_translate::retry`] decides
//! them): connection failures, refused streams and resets — a try that timed out among them —
//! are always retried, the backend's answers only when the rule names their codes.

use envoy_types::pb::envoy::config::route::v3::{RetryPolicy, retry_policy::RetryBackOff};
use envoy_types::pb::google::protobuf::UInt32Value;

use crate::pb::duration;
use fairlead_edge_translate::retry::Retry;

/// What Envoy retries on without codes: the backend not reached, the stream refused or
/// reset, or no answer within the try's limit.
const ALWAYS: &str = "connect-failure,refused-stream,reset";

/// The route's retry policy.
pub fn policy(retry: &Retry) -> RetryPolicy {
    RetryPolicy {
        retry_on: if retry.codes.is_empty() {
            ALWAYS.to_owned()
        } else {
            format!("{ALWAYS},retriable-status-codes")
        },
        num_retries: Some(UInt32Value {
            value: retry.attempts,
        }),
        per_try_timeout: retry.per_try.map(duration),
        retriable_status_codes: retry.codes.clone(),
        retry_back_off: retry.backoff.map(|base| RetryBackOff {
            base_interval: Some(duration(base)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn codes_add_retriable_status_codes() {
        let retry = Retry {
            attempts: 3,
            codes: vec![500],
            backoff: Some(Duration::from_millis(100)),
            per_try: Some(Duration::from_millis(200)),
        };
        let p = policy(&retry);
        assert_eq!(
            p.retry_on,
            "connect-failure,refused-stream,reset,retriable-status-codes"
        );
        assert_eq!(p.num_retries.map(|n| n.value), Some(3));
        assert_eq!(p.retriable_status_codes, vec![500]);
        assert_eq!(p.per_try_timeout.map(|d| d.nanos), Some(200_000_000));
        let bare = policy(&Retry {
            codes: vec![],
            backoff: None,
            per_try: None,
            ..retry
        });
        assert_eq!(bare.retry_on, ALWAYS);
        assert!(bare.retry_back_off.is_none() && bare.per_try_timeout.is_none());
    }
}
