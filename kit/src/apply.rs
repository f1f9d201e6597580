//! Server-side apply for components: one fixed field manager per component, forced (a
//! component owns what it writes), and no request at all when the stored object already
//! carries exactly the fields this manager applies, with the same values.
//!
//! "Exactly" matters: a field the manager applied before and no longer applies must be
//! removed, so the check compares the manager's owned field set (from `managedFields`) with the
//! desired configuration's, not only the values.

use std::fmt::Debug;

use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::fieldset::{self, FieldSet};

/// What [`apply`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum Applied<K> {
    /// The stored object already matched; nothing was sent.
    Unchanged(K),
    /// The configuration was applied; the stored result.
    Written(K),
}

impl<K> Applied<K> {
    /// The object as stored.
    pub fn into_inner(self) -> K {
        match self {
            Applied::Unchanged(k) | Applied::Written(k) => k,
        }
    }
}

/// The fields `manager` owns through apply on the main resource.
fn owned_by(manager: &str, stored: &Value) -> FieldSet {
    stored["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["manager"] == manager
                && e["operation"] == "Apply"
                && e.get("subresource")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .is_empty()
        })
        .flat_map(|e| fieldset::from_fields_v1(&e["fieldsV1"]))
        .collect()
}

/// Whether applying `desired` as `manager` would change nothing in `stored`.
pub fn up_to_date(manager: &str, desired: &Value, stored: &Value) -> bool {
    let wanted = fieldset::fields_of(desired, None);
    wanted == owned_by(manager, stored)
        && wanted
            .iter()
            .all(|path| fieldset::get(desired, path) == fieldset::get(stored, path))
}

/// Applies `desired` (named by its `metadata.name`) under `manager`, forced, unless `current`
/// (the caller's cached copy, or fetched when `None`) is already up to date.
pub async fn apply<K>(
    api: &Api<K>,
    manager: &str,
    desired: &K,
    current: Option<&K>,
) -> Result<Applied<K>, kube::Error>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = desired.meta().name.clone().unwrap_or_default();
    let fetched;
    let current = match current {
        Some(c) => Some(c),
        None => {
            fetched = api.get_opt(&name).await?;
            fetched.as_ref()
        }
    };
    let desired_json = serde_json::to_value(desired).map_err(kube::Error::SerdeError)?;
    if let Some(current) = current {
        let stored = serde_json::to_value(current).map_err(kube::Error::SerdeError)?;
        if up_to_date(manager, &desired_json, &stored) {
            return Ok(Applied::Unchanged(current.clone()));
        }
    }
    let written = api
        .patch(
            &name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(&desired_json),
        )
        .await?;
    Ok(Applied::Written(written))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(fields: Value, data: Value) -> Value {
        json!({"metadata": {"name": "x", "managedFields": [
            {"manager": "ctl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": fields}]},
            "data": data})
    }

    #[test]
    fn up_to_date_needs_the_same_fields_and_values() {
        let desired = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "1"}});
        let owned = json!({"f:data": {"f:a": {}}});
        assert!(up_to_date(
            "ctl",
            &desired,
            &stored(owned.clone(), json!({"a": "1"}))
        ));
        assert!(
            !up_to_date("ctl", &desired, &stored(owned, json!({"a": "2"}))),
            "value differs"
        );
        let more = json!({"f:data": {"f:a": {}, "f:b": {}}});
        assert!(
            !up_to_date("ctl", &desired, &stored(more, json!({"a": "1", "b": "2"}))),
            "b must be removed"
        );
        assert!(!up_to_date(
            "other",
            &desired,
            &stored(json!({"f:data": {"f:a": {}}}), json!({"a": "1"}))
        ));
    }
}
