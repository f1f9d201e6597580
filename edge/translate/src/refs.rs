//! References between namespaces: allowed only when a `ReferenceGrant` in the target's
//! namespace admits the referrer's kind and namespace; a reference that does not resolve is
//! an [`Unresolved`], its reason the spec's. Grants are not inherited (a route
//! attached to a ListenerSet is still the route, a ListenerSet's certificate is still the
//! ListenerSet's).

use fairlead_edge_model::input::{Input, ReferenceGrant};
use k8s_openapi::api::core::v1::Secret;

/// Checks references against the grants of the input.
pub struct Grants<'a> {
    grants: &'a [std::sync::Arc<ReferenceGrant>],
}

impl<'a> Grants<'a> {
    /// The grants of `input`.
    pub fn new(input: &'a Input) -> Self {
        Self {
            grants: &input.reference_grants,
        }
    }

    /// Whether an object of `from_group/from_kind` in `from_namespace` may refer to
    /// `to_group/to_kind` `to_namespace/to_name`.
    pub fn allows(
        &self,
        (from_group, from_kind, from_namespace): (&str, &str, &str),
        (to_group, to_kind, to_namespace, to_name): (&str, &str, &str, &str),
    ) -> bool {
        if from_namespace == to_namespace {
            return true;
        }
        self.grants
            .iter()
            .filter(|g| g.metadata.namespace.as_deref() == Some(to_namespace))
            .any(|g| {
                g.spec.from.iter().any(|f| {
                    f.group == from_group && f.kind == from_kind && f.namespace == from_namespace
                }) && g.spec.to.iter().any(|t| {
                    t.group == to_group
                        && t.kind == to_kind
                        && t.name.as_deref().is_none_or(|n| n == to_name)
                })
            })
    }
}

/// Why a reference does not resolve: the reason and a message naming the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unresolved {
    /// `InvalidKind`, `RefNotPermitted` or `BackendNotFound`.
    pub reason: &'static str,
    /// For a person.
    pub message: String,
}

/// The Secret `namespace/name`, any type.
pub(crate) fn secret<'a>(input: &'a Input, namespace: &str, name: &str) -> Option<&'a Secret> {
    input
        .secrets
        .iter()
        .find(|s| {
            s.metadata.namespace.as_deref() == Some(namespace)
                && s.metadata.name.as_deref() == Some(name)
        })
        .map(AsRef::as_ref)
}
