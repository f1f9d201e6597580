//! The value syntaxes annotations share: positive integers, nginx sizes (`16k`, `1m`),
//! comma-separated lists, header names, `namespace/name` references and JSON objects whose
//! unknown fields are errors.

use super::AnnotationError;

/// A positive integer that fits `u32`.
pub fn positive(annotation: &'static str, text: &str) -> Result<u32, AnnotationError> {
    match text.trim().parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(AnnotationError::new(
            annotation,
            format!("{text:?} is not a positive integer"),
        )),
    }
}

/// A size as nginx writes it: bytes, or a number with `k`/`K` (KiB) or `m`/`M` (MiB).
pub fn size(annotation: &'static str, text: &str) -> Result<u32, AnnotationError> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1024),
        Some((i, 'm' | 'M')) => (&t[..i], 1024 * 1024),
        _ => (t, 1),
    };
    digits
        .parse::<u32>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            AnnotationError::new(
                annotation,
                format!("{text:?} is not a size (bytes, or a number with k or m)"),
            )
        })
}

/// The non-empty items of a comma-separated list, trimmed; an empty list is an error.
pub fn list<'a>(annotation: &'static str, text: &'a str) -> Result<Vec<&'a str>, AnnotationError> {
    let items: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if items.is_empty() {
        return Err(AnnotationError::new(annotation, "an empty list"));
    }
    Ok(items)
}

/// Whether `name` is an HTTP header name (an RFC 9110 token).
pub fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether `name` is a Kubernetes object name (an RFC 1123 subdomain).
pub fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Whether `name` is a DNS host name (RFC 1123: labels of letters, digits and inner hyphens,
/// each at most 63 bytes, 253 in all): what TLS's server name indication may carry.
pub fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// `namespace/name` or `name`: the namespace (if given) and the name, both valid names.
pub fn reference<'a>(
    annotation: &'static str,
    field: &str,
    text: &'a str,
) -> Result<(Option<&'a str>, &'a str), AnnotationError> {
    let text = text.trim();
    let (namespace, name) = match text.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, text),
    };
    if namespace.is_some_and(|ns| !is_object_name(ns)) || !is_object_name(name) {
        return Err(AnnotationError::new(
            annotation,
            format!("{field}{text:?} is not namespace/name or name"),
        ));
    }
    Ok((namespace, name))
}

/// A JSON object read as `T` (whose unknown fields are refused), the error naming the field
/// serde found wrong.
pub fn json<T: serde::de::DeserializeOwned>(
    annotation: &'static str,
    text: &str,
) -> Result<T, AnnotationError> {
    serde_json::from_str(text)
        .map_err(|e| AnnotationError::new(annotation, format!("not the documented JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_nginx_writes_them() {
        assert_eq!(size("x", "4096"), Ok(4096));
        assert_eq!(size("x", "16k"), Ok(16 * 1024));
        assert_eq!(size("x", "1M"), Ok(1024 * 1024));
        assert!(size("x", "0").is_err());
        assert!(size("x", "16kb").is_err());
        assert!(size("x", "5000m").is_err(), "beyond u32");
        assert!(positive("x", "-1").is_err() && positive("x", "0").is_err());
        assert_eq!(positive("x", " 50 "), Ok(50));
    }

    #[test]
    fn names_lists_and_references() {
        assert_eq!(list("x", "a, b,,c").unwrap(), ["a", "b", "c"]);
        assert!(list("x", " , ").is_err());
        assert!(is_header_name("X-Auth-Request-User") && !is_header_name("a b"));
        assert_eq!(
            reference("x", "", "team/users"),
            Ok((Some("team"), "users"))
        );
        assert_eq!(reference("x", "", "users"), Ok((None, "users")));
        assert!(reference("x", "", "Team/users").is_err());
        assert!(reference("x", "", "a/b/c").is_err());
    }
}
