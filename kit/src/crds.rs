//! A component's own CRDs kept at its version: applied at start (Helm never upgrades a
//! chart's `crds/`), marked with the version that wrote them (`fairlead.io/version`), and
//! never taken back by an older replica during a rollout or a rollback (its schema would
//! prune fields the newer one knows).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;

/// The annotation naming the version that wrote a CRD.
pub const VERSION_ANNOTATION: &str = "fairlead.io/version";

/// This build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// What [`keep_current`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// The CRD is this version's (written, or already so).
    Current,
    /// A newer version wrote it; left alone.
    Newer(String),
}

/// `a` is a newer dotted version than `b` (numeric parts; a part that is not a number is 0).
pub fn newer(a: &str, b: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> {
        v.split(['.', '-', '+'])
            .take(3)
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    };
    parts(a) > parts(b)
}

/// Applies `crd` as `manager`, marked with [`VERSION`], unless the cluster's was written by a
/// newer version.
pub async fn keep_current(
    api: &Api<CustomResourceDefinition>,
    manager: &str,
    crd: &CustomResourceDefinition,
) -> Result<Kept, kube::Error> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let existing = api.get_opt(&name).await?;
    if let Some(written) = existing
        .as_ref()
        .and_then(|e| e.metadata.annotations.as_ref())
        .and_then(|a| a.get(VERSION_ANNOTATION))
        .filter(|written| newer(written, VERSION))
    {
        tracing::warn!(crd = %name, written = %written, ours = VERSION, "the CRD was written by a newer version; leaving it");
        return Ok(Kept::Newer(written.clone()));
    }
    let mut marked = crd.clone();
    marked
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(VERSION_ANNOTATION.into(), VERSION.into());
    crate::apply::apply(api, manager, &marked, existing.as_ref()).await?;
    Ok(Kept::Current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_number() {
        assert!(newer("0.10.0", "0.9.3"));
        assert!(newer("1.0.0", "0.99.99"));
        assert!(!newer("0.1.0", "0.1.0"));
        assert!(!newer("0.1.0-rc1", "0.1.0"));
        assert!(!newer("garbage", "0.1.0"));
    }
}
