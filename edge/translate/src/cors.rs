//! A rule's `CORS` filter (GEP-1767): which origins may read its answers, with which methods
//! and headers, whether credentials go along, what a page may read and how long a preflight
//! holds. Origins are matched whole: `https://www.example.com`, `https://*.example.com` (the
//! `*` standing for one or more leftmost labels), `https://*` (any host of the scheme), or `*`
//! (any). An error is a message naming the field.

/// How an origin is matched.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Origin {
    /// Any origin.
    Any,
    /// This origin exactly.
    Exact(String),
    /// A regular expression over the whole origin (from a `*` pattern).
    Pattern(String),
}

/// A rule's CORS policy.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Cors {
    /// The origins allowed.
    pub origins: Vec<Origin>,
    /// Methods allowed (`*` among them: any).
    pub methods: Vec<String>,
    /// Request headers allowed (`*` among them: any).
    pub headers: Vec<String>,
    /// Response headers a page may read.
    pub expose: Vec<String>,
    /// Seconds a preflight's answer holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_age: Option<u32>,
    /// Whether credentials may go along.
    pub credentials: bool,
}

/// The policy of a `cors` filter at `field`.
pub fn cors(field: &str, cors: &fairlead_edge_model::input::HttpCors) -> Result<Cors, String> {
    let origins = cors
        .allow_origins
        .iter()
        .enumerate()
        .map(|(i, o)| origin(o).ok_or_else(|| format!("{field}.allowOrigins[{i}]: {o:?} is not an origin (scheme://host[:port], a leading * label, or *)")))
        .collect::<Result<Vec<_>, _>>()?;
    let max_age = cors
        .max_age
        .map(|age| {
            u32::try_from(age)
                .map_err(|_| format!("{field}.maxAge: {age} is not a number of seconds"))
        })
        .transpose()?;
    Ok(Cors {
        origins,
        methods: cors.allow_methods.clone(),
        headers: cors.allow_headers.clone(),
        expose: cors.expose_headers.clone(),
        max_age,
        credentials: cors.allow_credentials.unwrap_or(false),
    })
}

/// How `text` matches origins: `*`, or `scheme://host[:port]` with an optional leading `*`
/// label.
fn origin(text: &str) -> Option<Origin> {
    if text == "*" {
        return Some(Origin::Any);
    }
    let (scheme, rest) = text.split_once("://")?;
    let valid_scheme = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid_scheme || rest.is_empty() || rest.contains(['/', '?', '#', ' ']) {
        return None;
    }
    if rest == "*" {
        return Some(Origin::Pattern(format!(
            "{}://[^/]+",
            regex::escape(scheme)
        )));
    }
    match rest.strip_prefix("*.") {
        None if !rest.contains('*') => Some(Origin::Exact(text.to_owned())),
        Some(domain) if !domain.contains('*') && !domain.is_empty() => {
            Some(Origin::Pattern(format!(
                "{}://[^/]+\\.{}",
                regex::escape(scheme),
                regex::escape(domain)
            )))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlead_edge_model::input::HttpCors;

    #[test]
    fn origins_exact_wildcard_and_any() {
        assert_eq!(origin("*"), Some(Origin::Any));
        assert_eq!(
            origin("https://www.foo.com"),
            Some(Origin::Exact("https://www.foo.com".into()))
        );
        let Some(Origin::Pattern(p)) = origin("https://*.bar.com") else {
            panic!("a pattern");
        };
        let re = regex::Regex::new(&format!("^{p}$")).unwrap();
        assert!(re.is_match("https://www.bar.com"));
        assert!(re.is_match("https://xpto.www.bar.com"));
        assert!(!re.is_match("https://bar.com"));
        assert!(!re.is_match("http://www.bar.com"));
        assert!(!re.is_match("https://www.bar.com.evil.org"));
        let Some(Origin::Pattern(any_host)) = origin("https://*") else {
            panic!("a pattern");
        };
        let re = regex::Regex::new(&format!("^{any_host}$")).unwrap();
        assert!(re.is_match("https://anything.example:8443"));
        assert!(!re.is_match("http://anything.example"));
        for bad in [
            "www.foo.com",
            "https://",
            "https://a/b",
            "https://www.*.com",
        ] {
            assert_eq!(origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn errors_name_the_field() {
        let asked = HttpCors {
            allow_origins: vec!["https://ok.example".into(), "nope".into()],
            ..HttpCors::default()
        };
        let err = cors("spec.rules[0].filters[0].cors", &asked).unwrap_err();
        assert!(
            err.starts_with("spec.rules[0].filters[0].cors.allowOrigins[1]"),
            "{err}"
        );
    }
}
