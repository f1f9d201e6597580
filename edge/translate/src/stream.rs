//! TLSRoute, TCPRoute and UDPRoute: parents, hostnames (TLS: SNI) and the backends of their
//! rule, weighted; a backend that does not resolve keeps its share, whose connections are
//! rejected, as the spec asks of these kinds.

use crate::backend::Unresolved;
use crate::http::{Rejected, RuleRefs, Weighted};
use crate::refs::Grants;
use fairlead_edge_model::input::{Input, StreamRoute};

/// A stream route's forwarding.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Entry {
    /// `kind/namespace/name`.
    pub name: String,
    /// Oldest first, then by name (which route wins a listener shared by several).
    #[serde(skip)]
    pub order: (String, String),
    /// Weighted backends.
    pub backends: Vec<Weighted>,
}

/// Translates a stream route of `kind`.
pub fn translate(
    route: &StreamRoute,
    kind: &str,
    input: &Input,
    grants: &Grants<'_>,
) -> Result<(Entry, Option<Unresolved>), Rejected> {
    let (namespace, name, created) = crate::http::identity(&route.metadata);
    if route.spec.rules.len() > 1 {
        return Err(Rejected(format!(
            "spec.rules: {kind} supports one rule here, found {}",
            route.spec.rules.len()
        )));
    }
    let mut unresolved = None;
    let refs = RuleRefs {
        kind,
        namespace: &namespace,
        field: "spec.rules[0]",
        http2: false,
        headers_only: false,
        variant: None,
    };
    let backend_refs = route
        .spec
        .rules
        .first()
        .map(|r| r.backend_refs.as_slice())
        .unwrap_or_default();
    let (backends, _) = refs.resolve(backend_refs, &[], input, grants, &mut unresolved)?;
    Ok((
        Entry {
            name: format!("{kind}/{namespace}/{name}"),
            order: (created, format!("{namespace}/{name}")),
            backends,
        },
        unresolved,
    ))
}
