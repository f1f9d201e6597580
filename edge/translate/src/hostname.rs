//! Hostname matching as the Gateway API defines it: a listener hostname and a route hostname
//! intersect when they are equal, or when a wildcard (`*.example.com`, matching one or more
//! labels) covers the other; the intersection is the more specific of the two.

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
        Some(p) => p
            .strip_prefix('*')
            .filter(|suffix| host.len() > suffix.len() && host.ends_with(suffix))
            .map(|_| (1, p.len())),
    }
}

/// Whether two hostname sets (`None` = any) share a hostname.
pub fn overlap(a: Option<&[String]>, b: Option<&[String]>) -> bool {
    match (a, b) {
        (None, None) => true,
        (None, Some(names)) | (Some(names), None) => !names.is_empty(),
        (Some(a), Some(b)) => a.iter().any(|x| b.iter().any(|y| pair(x, y).is_some())),
    }
}

fn pair(listener: &str, route: &str) -> Option<String> {
    let covers = |wildcard: &str, host: &str| {
        wildcard
            .strip_prefix('*')
            .is_some_and(|suffix| host.len() > suffix.len() && host.ends_with(suffix))
    };
    let (l, r) = (listener.to_ascii_lowercase(), route.to_ascii_lowercase());
    if l == r || covers(&l, &r) {
        Some(r)
    } else if covers(&r, &l) {
        Some(l)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::intersect;

    /// Listener hostname, route hostnames, expected intersection.
    type Case<'a> = (Option<&'a str>, &'a [&'a str], Option<&'a [&'a str]>);

    fn hosts(h: &[&str]) -> Vec<String> {
        h.iter().map(|s| (*s).to_owned()).collect()
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
