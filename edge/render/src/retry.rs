//! Retries as Envoy's `RetryPolicy`. A rule's own ([`fairlead_edge_translate::retry`]
//! decides them): connection failures, refused streams and resets — a try that timed out among
//! them — are always retried, the backend's answers only when the rule names their codes.
//!
//! The ALB's default, on every virtual host, for the rules that name none ([`unsent`]): a
//! request that never reached a backend — the connection refused or failed, the stream
//! refused, or reset before the request was sent — is sent to another endpoint, twice at
//! most. It is safe for every method, since no backend saw the request, and it is what
//! ingress-nginx users know (`proxy_next_upstream error`): a backend pod that dies costs no
//! failed request while its probe withdraws it. Every retry goes to an endpoint not yet tried
//! (Envoy's `previous_hosts` predicate).

use envoy_types::pb::envoy::config::route::v3::{RetryPolicy, retry_policy::RetryBackOff};
use envoy_types::pb::google::protobuf::UInt32Value;

use crate::pb::duration;
use fairlead_edge_translate::retry::{DEFAULT_ATTEMPTS, Retry};

/// What Envoy retries on without codes: the backend not reached, the stream refused or
/// reset, or no answer within the try's limit.
const ALWAYS: &str = "connect-failure,refused-stream,reset";

/// What the default retries: what never reached a backend.
const UNSENT: &str = "connect-failure,refused-stream,reset-before-request";

/// How many endpoints Envoy draws for a retry to find one not tried yet.
const HOST_SELECTION_ATTEMPTS: i64 = 5;

/// The retry to another endpoint of every retry policy.
fn other_hosts() -> Vec<envoy_types::pb::envoy::config::route::v3::retry_policy::RetryHostPredicate>
{
    use envoy_types::pb::envoy::config::route::v3::retry_policy::{
        RetryHostPredicate, retry_host_predicate::ConfigType,
    };
    use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
    vec![RetryHostPredicate {
        name: "envoy.retry_host_predicates.previous_hosts".into(),
        config_type: Some(ConfigType::TypedConfig(crate::envoy::any(
            &PreviousHostsPredicate {},
        ))),
    }]
}

/// The ALB's default retry policy (a virtual host's), encoded once.
pub fn unsent() -> &'static [u8] {
    use prost::Message as _;
    static ENCODED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ENCODED.get_or_init(|| {
        RetryPolicy {
            retry_on: UNSENT.into(),
            num_retries: Some(UInt32Value {
                value: DEFAULT_ATTEMPTS,
            }),
            retry_host_predicate: other_hosts(),
            host_selection_retry_max_attempts: HOST_SELECTION_ATTEMPTS,
            ..Default::default()
        }
        .encode_to_vec()
    })
}

/// The route's retry policy (`attempts: 0`: none, in place of the default).
pub fn policy(retry: &Retry) -> RetryPolicy {
    if !retry.retries() {
        return RetryPolicy {
            num_retries: Some(UInt32Value { value: 0 }),
            ..Default::default()
        };
    }
    RetryPolicy {
        retry_host_predicate: other_hosts(),
        host_selection_retry_max_attempts: HOST_SELECTION_ATTEMPTS,
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
        assert_eq!(bare.retry_host_predicate.len(), 1, "another endpoint");
        let none = policy(&Retry {
            attempts: 0,
            codes: vec![],
            backoff: None,
            per_try: None,
        });
        assert_eq!(none.num_retries.map(|n| n.value), Some(0));
        assert!(none.retry_on.is_empty());
    }

    #[test]
    fn the_default_retries_only_what_no_backend_saw_on_another_endpoint() {
        use prost::Message as _;
        let default = RetryPolicy::decode(unsent()).unwrap();
        assert_eq!(
            default.retry_on,
            "connect-failure,refused-stream,reset-before-request"
        );
        assert!(
            !default
                .retry_on
                .split(',')
                .any(|c| c == "reset" || c.ends_with("5xx"))
        );
        assert_eq!(default.num_retries.map(|n| n.value), Some(DEFAULT_ATTEMPTS));
        assert_eq!(
            default.retry_host_predicate[0].name,
            "envoy.retry_host_predicates.previous_hosts"
        );
    }
}
