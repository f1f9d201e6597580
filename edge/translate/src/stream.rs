//! TLSRoute, TCPRoute and UDPRoute: parents, hostnames (TLS: SNI) and the backends of their
//! rule, weighted; a backend that does not resolve keeps its share, whose connections are
//! rejected, as the spec asks of these kinds.

use crate::backend::{self, Unresolved};
use crate::http::{Rejected, Weighted};
use crate::model::{HeaderModifier, Input, StreamRoute};
use crate::refs::Grants;

/// A stream route's forwarding.
#[derive(Clone, Debug)]
pub struct Entry {
    /// `kind/namespace/name`.
    pub name: String,
    /// Oldest first, then by name (which route wins a listener shared by several).
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
    let namespace = route.metadata.namespace.clone().unwrap_or_default();
    let name = route.metadata.name.clone().unwrap_or_default();
    if route.spec.rules.len() > 1 {
        return Err(Rejected(format!(
            "spec.rules: {kind} supports one rule here, found {}",
            route.spec.rules.len()
        )));
    }
    let mut unresolved = None;
    let mut backends = Vec::new();
    for (b, backend_ref) in route
        .spec
        .rules
        .first()
        .map(|r| r.backend_refs.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let field = format!("spec.rules[0].backendRefs[{b}]");
        let weight = u32::try_from(backend_ref.weight.unwrap_or(1).max(0)).unwrap_or(1);
        let backend = match backend::resolve(
            backend_ref,
            (kind, &namespace),
            &field,
            input,
            grants,
            false,
        ) {
            Ok(b) => Some(b),
            Err(problem) => {
                unresolved.get_or_insert(problem);
                None
            }
        };
        if weight > 0 {
            backends.push(Weighted {
                backend,
                weight,
                request_headers: HeaderModifier::default(),
                response_headers: HeaderModifier::default(),
            });
        }
    }
    let created = route
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    Ok((
        Entry {
            name: format!("{kind}/{namespace}/{name}"),
            order: (created, format!("{namespace}/{name}")),
            backends,
        },
        unresolved,
    ))
}
