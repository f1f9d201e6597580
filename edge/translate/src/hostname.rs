//! Hostname matching as the Gateway API defines it: a listener hostname and a route hostname
//! intersect when they are equal, or when a wildcard (`*.example.com`, matching one or more
//! labels) covers the other; the intersection is the more specific of the two.

/// Whether `name` is a hostname as the Gateway API's `Hostname` type defines it (the CRDs'
/// pattern, which objects read from files never met): lowercase RFC 1123 labels, optionally
/// behind a leading `*.`, 253 bytes at most.
pub fn valid(name: &str) -> bool {
    let labels = name.strip_prefix("*.").unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && labels.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The hostnames a route serves on a listener: the intersections of the route's hostnames
/// with the listener's (`None` = any). `Some(empty)` means they do not intersect at all.
pub fn intersect(listener: Option<&str>, route: &[String]) -> Option<Vec<String>> {
    match (listener, route.is_empty()) {
        (None, true) => None,
        (None, false) => Some(route.to_vec()),
        (Some(l), true) => Some(vec![l.to_owned()]),
        (Some(l), false) => {
            let mut out: Vec<String> = route.iter().filter_map(|r| pair(l, r)).collect();
            out.sort();
            out.dedup();
            Some(out)
        }
    }
}

/// How specifically `pattern` (a hostname, a `*.` wildcard, or `None` for any) matches the
/// virtual host `host`: `None` when it does not; more specific patterns compare greater (an
/// exact name, then the longer wildcard, then any host).
pub fn specificity(pattern: Option<&str>, host: &str) -> Option<(u8, usize)> {
    match pattern {
        None => Some((0, 0)),
        Some(p) if p.eq_ignore_ascii_case(host) => {
            Some((if p.starts_with('*') { 1 } else { 2 }, p.len()))
        }
        Some(p) => covers(p, host).then_some((1, p.len())),
    }
}

/// Whether `wildcard` (`*.example.com`) covers `host` (one or more labels in front of its
/// suffix), case-insensitively.
fn covers(wildcard: &str, host: &str) -> bool {
    wildcard.strip_prefix('*').is_some_and(|suffix| {
        host.len() > suffix.len()
            && host.is_char_boundary(host.len() - suffix.len())
            && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    })
}

/// The hostnames claimed on one listener by the routes of one kind (HTTPRoutes or
/// GRPCRoutes), for finding the other kind's overlaps without comparing every pair.
#[derive(Debug, Default)]
pub struct Claims {
    /// A route without hostnames (any host) is attached.
    any: bool,
    /// Exact names, lowercase.
    exact: crate::FastSet<String>,
    /// Wildcard names (`*.example.com`), lowercase.
    wildcards: Vec<String>,
}

impl Claims {
    /// Whether `names` (`None` = any) share a hostname with the claims.
    pub fn overlaps(&self, names: Option<&[String]>) -> bool {
        let claimed = self.any || !self.exact.is_empty() || !self.wildcards.is_empty();
        let Some(names) = names else {
            return claimed;
        };
        if names.is_empty() || !claimed {
            return false;
        }
        if self.any {
            return true;
        }
        names.iter().any(|n| {
            let n = n.to_ascii_lowercase();
            if n.starts_with('*') {
                self.wildcards.iter().any(|w| pair(w, &n).is_some())
                    || self.exact.iter().any(|e| pair(&n, e).is_some())
            } else {
                self.exact.contains(&n) || self.wildcards.iter().any(|w| pair(w, &n).is_some())
            }
        })
    }

    /// Adds `names` (`None` = any).
    pub fn add(&mut self, names: Option<&[String]>) {
        let Some(names) = names else {
            self.any = true;
            return;
        };
        for n in names {
            let n = n.to_ascii_lowercase();
            if n.starts_with('*') {
                self.wildcards.push(n);
            } else {
                self.exact.insert(n);
            }
        }
    }
}

fn pair(listener: &str, route: &str) -> Option<String> {
    if listener.eq_ignore_ascii_case(route) || covers(listener, route) {
        Some(route.to_ascii_lowercase())
    } else if covers(route, listener) {
        Some(listener.to_ascii_lowercase())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{intersect, valid};

    /// Listener hostname, route hostnames, expected intersection.
    type Case<'a> = (Option<&'a str>, &'a [&'a str], Option<&'a [&'a str]>);

    fn hosts(h: &[&str]) -> Vec<String> {
        h.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Found by fuzzing (`fuzz/regressions/translate`): a listener hostname with line breaks,
    /// from a file, became a virtual host domain Envoy refuses.
    #[test]
    fn a_hostname_is_what_the_gateway_api_pattern_admits() {
        for ok in ["example.com", "*.example.com", "a-1.b", "x"] {
            assert!(valid(ok), "{ok}");
        }
        let long = format!("{}.com", "a".repeat(64));
        for bad in [
            "",
            "*",
            "*.",
            "a..b",
            "-a.com",
            "a-.com",
            "Example.com",
            "a b",
            "a\nb",
            "*.*.com",
            "a.*.com",
            "1.2.3.4:80",
            long.as_str(),
        ] {
            assert!(!valid(bad), "{bad:?}");
        }
    }

    #[test]
    fn intersections_follow_the_spec() {
        let cases: &[Case<'_>] = &[
            (None, &[], None),
            (None, &["a.example.com"], Some(&["a.example.com"])),
            (Some("a.example.com"), &[], Some(&["a.example.com"])),
            (
                Some("*.example.com"),
                &["a.example.com", "x.org"],
                Some(&["a.example.com"]),
            ),
            (
                Some("*.example.com"),
                &["b.a.example.com"],
                Some(&["b.a.example.com"]),
            ),
            (Some("*.example.com"), &["example.com"], Some(&[])),
            (
                Some("a.example.com"),
                &["*.example.com"],
                Some(&["a.example.com"]),
            ),
            (
                Some("*.example.com"),
                &["*.a.example.com"],
                Some(&["*.a.example.com"]),
            ),
            (
                Some("A.Example.com"),
                &["a.example.COM"],
                Some(&["a.example.com"]),
            ),
            (Some("a.example.com"), &["b.example.com"], Some(&[])),
        ];
        for (listener, route, want) in cases {
            assert_eq!(
                intersect(*listener, &hosts(route)),
                want.map(hosts),
                "{listener:?} x {route:?}"
            );
        }
    }
}
