//! A rule's `retry` (GEP-1731) and the timeouts it changes (an error is a message naming the
//! field, which the route's translation turns into its refusal). A request is retried up to
//! `attempts` times (not counting the first try; 2 when not given, as Envoy Gateway and Istio
//! do) when the backend cannot be reached, resets the stream, or does not answer within
//! `timeouts.backendRequest`, and when it answers one of `codes`; `backoff` is the first
//! pause between tries (Envoy's default, 25 ms, when not given). With retries,
//! `timeouts.request` bounds the whole exchange, tries and pauses included, and
//! `timeouts.backendRequest` each try. A rule without `retry` gets the ALB's default (the
//! render stage's: a request that never reached a backend is sent to another); `attempts: 0`
//! is no retry at all, not even that.

use std::time::Duration;

use fairlead_edge_model::input::{HttpRetry, HttpTimeouts};

use fairlead_edge_model::duration;

/// Retries when no `attempts` is given.
pub const DEFAULT_ATTEMPTS: u32 = 2;

/// How a rule's requests are retried.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// Retries after the first try.
    pub attempts: u32,
    /// The backend's answers retried.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<u32>,
    /// The first pause between tries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Duration>,
    /// Each try's limit (`timeouts.backendRequest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_try: Option<Duration>,
}

impl Retry {
    /// Whether a request is tried more than once.
    pub fn retries(&self) -> bool {
        self.attempts > 0
    }
}

/// The retries `retry` asks for (`None`: the default; `attempts: 0` is none), each try
/// bounded by `timeouts.backendRequest`; an error names the field (`field` is the rule's).
pub fn retry(
    field: &str,
    retry: Option<&HttpRetry>,
    timeouts: Option<&HttpTimeouts>,
) -> Result<Option<Retry>, String> {
    let Some(retry) = retry else {
        return Ok(None);
    };
    let attempts = match retry.attempts {
        None => DEFAULT_ATTEMPTS,
        Some(n) => u32::try_from(n).map_err(|_| {
            format!("{field}.retry.attempts: {n} is not a number of retries (0 or more)")
        })?,
    };
    let codes = retry
        .codes
        .iter()
        .enumerate()
        .map(|(i, &code)| match u32::try_from(code) {
            Ok(code @ 400..=599) => Ok(code),
            _ => Err(format!(
                "{field}.retry.codes[{i}]: {code} is not an HTTP error status (400–599)"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let backoff = match &retry.backoff {
        None => None,
        Some(text) => Some(
            duration::parse(text)
                .ok_or_else(|| format!("{field}.retry.backoff: {text:?} is not a duration"))?,
        ),
    };
    let per_try = match timeouts.and_then(|t| t.backend_request.as_ref()) {
        None => None,
        Some(text) => Some(duration::parse(text).ok_or_else(|| {
            format!("{field}.timeouts.backendRequest: {text:?} is not a duration")
        })?),
    }
    .filter(|d| !d.is_zero());
    Ok(Some(Retry {
        attempts,
        codes,
        backoff,
        per_try,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(codes: Vec<i64>, attempts: Option<i64>, backoff: Option<&str>) -> HttpRetry {
        HttpRetry {
            codes,
            attempts,
            backoff: backoff.map(str::to_owned),
        }
    }

    #[test]
    fn codes_attempts_backoff_and_each_tries_limit() {
        let timeouts = HttpTimeouts {
            request: Some("1s".into()),
            backend_request: Some("200ms".into()),
        };
        let got = retry(
            "spec.rules[0]",
            Some(&asked(vec![500, 503], Some(3), Some("50ms"))),
            Some(&timeouts),
        )
        .unwrap();
        assert_eq!(
            got,
            Some(Retry {
                attempts: 3,
                codes: vec![500, 503],
                backoff: Some(Duration::from_millis(50)),
                per_try: Some(Duration::from_millis(200)),
            })
        );
        let default = retry("r", Some(&asked(vec![], None, None)), None).unwrap();
        assert_eq!(default.map(|r| r.attempts), Some(DEFAULT_ATTEMPTS));
        assert_eq!(
            retry("r", Some(&asked(vec![], Some(0), None)), None).map(|r| r.map(|r| r.attempts)),
            Ok(Some(0)),
            "none at all, not the default"
        );
        assert_eq!(retry("r", None, Some(&timeouts)), Ok(None));
    }

    #[test]
    fn errors_name_the_field() {
        let err = |r: HttpRetry| retry("spec.rules[1]", Some(&r), None).unwrap_err();
        assert!(
            err(asked(vec![500, 200], None, None)).starts_with("spec.rules[1].retry.codes[1]: 200")
        );
        assert!(err(asked(vec![], Some(-1), None)).starts_with("spec.rules[1].retry.attempts"));
        assert!(err(asked(vec![], None, Some("soon"))).starts_with("spec.rules[1].retry.backoff"));
    }
}
