//! Gateway API durations (GEP-2257: `1h`, `30s`, `500ms`, `1m30s`; no fractions, no days),
//! as timeouts and retries write them.

use std::time::Duration;

/// Parses a Gateway API duration (`1h`, `30s`, `500ms`, `1m30s`).
pub fn parse(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        let value: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, len) = if rest.starts_with("ms") {
            (Duration::from_millis(1), 2)
        } else if rest.starts_with('h') {
            (Duration::from_secs(3600), 1)
        } else if rest.starts_with('m') {
            (Duration::from_secs(60), 1)
        } else if rest.starts_with('s') {
            (Duration::from_secs(1), 1)
        } else {
            return None;
        };
        total += unit * u32::try_from(value).ok()?;
        rest = &rest[len..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_the_spec_writes_them() {
        assert_eq!(parse("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse("0s"), Some(Duration::ZERO));
        assert_eq!(parse("10"), None);
        assert_eq!(parse("s"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("1d"), None);
    }
}
