//! Writing the translator's statuses back, only when they change, keeping each condition's
//! `lastTransitionTime` while its status stays the same. A Gateway's status also carries
//! `Synced` ([`synced`]): whether its proxies run what was last translated for it.
//!
//! GatewayClasses and Gateways of our class are ours: their status is merge-patched. A route's
//! `status.parents` is an atomic list shared with other Gateway controllers: it is read, our
//! entries (by `controllerName`) are replaced and the others kept, and the object is written
//! to `/status` with its `resourceVersion` as a precondition; a 409 (someone wrote in between)
//! re-reads and retries. Never a forced apply, which would wipe the others' entries. A
//! BackendTLSPolicy's `status.ancestors` is shared the same way.

use std::sync::Arc;

use fairlead_edge_model::ObjectKey;
use fairlead_edge_translate::status::{Condition, RouteKey, Statuses};
use fairlead_edge_xds::progress::{Progress, Rejection, Tally};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use fairlead_edge_index::Index;

/// A status list shared with other controllers: routes' `parents`, policies' `ancestors`.
#[derive(Clone, Copy)]
struct Shared {
    /// The list under `status`.
    list: &'static str,
    /// The reference field of an entry.
    reference: &'static str,
}

const PARENTS: Shared = Shared {
    list: "parents",
    reference: "parentRef",
};

const ANCESTORS: Shared = Shared {
    list: "ancestors",
    reference: "ancestorRef",
};

/// One of our entries of a shared list.
struct Entry<'a> {
    reference: &'a fairlead_edge_model::input::ParentRef,
    conditions: &'a [Condition],
}

/// How many times a route status write is retried after a conflict.
const CONFLICT_RETRIES: usize = 3;

/// Conditions as JSON, keeping `lastTransitionTime` from `current` where the type's status
/// is unchanged.
pub fn conditions(desired: &[Condition], current: Option<&Value>, now: &str) -> Value {
    fairlead_kit::conditions::merge(
        desired
            .iter()
            .map(|c| serde_json::to_value(c).unwrap_or_default()),
        current,
        now,
    )
}

/// `desired` conditions (as [`conditions`] gives them) followed by the `current` ones of types
/// this writer does not set, so a condition another writer owns on the same object (the
/// `LocalProxy` condition `fairlead up` sets on a Gateway, a load balancer controller's)
/// survives this writer's merge patch.
pub fn with_others(desired: Value, current: Option<&Value>) -> Value {
    let Value::Array(mut list) = desired else {
        return desired;
    };
    let ours: Vec<Value> = list.iter().map(|c| c["type"].clone()).collect();
    for other in current.and_then(Value::as_array).into_iter().flatten() {
        if !ours.contains(&other["type"]) {
            list.push(other.clone());
        }
    }
    Value::Array(list)
}

/// Listener statuses as JSON, keeping each listener's condition times from `current`.
pub fn listeners(
    desired: &[fairlead_edge_translate::status::ListenerStatus],
    current: &Value,
    now: &str,
) -> Vec<Value> {
    desired
        .iter()
        .map(|l| {
            let previous = current["status"]["listeners"]
                .as_array()
                .and_then(|ls| ls.iter().find(|c| c["name"] == l.name.as_str()))
                .map(|c| &c["conditions"]);
            json!({
                "name": l.name,
                "supportedKinds": l.supported_kinds,
                "attachedRoutes": l.attached_routes,
                "conditions": conditions(&l.conditions, previous, now),
            })
        })
        .collect()
}

/// The list `status.<list>` of `current` with our entries replaced by `ours`.
pub fn shared_list(current: &Value, list: &str, controller_name: &str, ours: &[Value]) -> Value {
    let mut parents: Vec<Value> = current["status"][list]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["controllerName"] != controller_name)
        .collect();
    parents.extend(ours.iter().cloned());
    Value::Array(parents)
}

/// What one round of writes did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Objects written.
    pub writes: usize,
    /// Writes that failed (retried next round).
    pub failures: usize,
}

/// Writes statuses that differ from the stored ones.
pub struct StatusWriter {
    client: kube::Client,
    controller_name: String,
    /// What we last wrote per object, and the resourceVersion it produced: a server whose
    /// schema lacks a field we write (an older Gateway API bundle) prunes it, and the stored
    /// status never equals ours; without this, every round would write again.
    written: std::sync::Mutex<std::collections::HashMap<(String, ObjectKey), (Value, String)>>,
}

impl StatusWriter {
    /// A writer for `controller_name`.
    pub fn new(client: kube::Client, controller_name: &str) -> Self {
        Self {
            client,
            controller_name: controller_name.to_owned(),
            written: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Writes what changed; each Gateway's `Synced` condition from `progress`.
    pub async fn write(&self, index: &Index, statuses: &Statuses, progress: &Progress) -> Written {
        let now = fairlead_kit::conditions::now();
        let mut written = self.write_gateways(index, statuses, progress).await;
        let mut count = |r: Result<bool, kube::Error>, what: &str| match r {
            Ok(true) => written.writes += 1,
            Ok(false) => {}
            Err(e) => {
                written.failures += 1;
                tracing::warn!(object = what, error = %e, "status write failed; retrying next round");
            }
        };
        for (name, desired) in &statuses.gateway_classes {
            let Some(current) = index.object("GatewayClass", &ObjectKey::cluster(name.as_str()))
            else {
                continue;
            };
            let status = json!({"conditions": conditions(desired, Some(&current["status"]["conditions"]), &now)});
            count(
                self.merge(
                    index,
                    "GatewayClass",
                    &ObjectKey::cluster(name.as_str()),
                    &current,
                    status,
                )
                .await,
                name,
            );
        }
        for (key, desired) in &statuses.listener_sets {
            // Served as ListenerSet (v1) or, before Gateway API 1.5, as XListenerSet.
            let Some((kind, current)) = ["ListenerSet", "XListenerSet"]
                .into_iter()
                .find_map(|k| index.object(k, key).map(|o| (k, o)))
            else {
                continue;
            };
            let listeners = listeners(&desired.listeners, &current, &now);
            let status = json!({
                "conditions": conditions(&desired.conditions, Some(&current["status"]["conditions"]), &now),
                "listeners": listeners,
            });
            count(
                self.merge(index, kind, key, &current, status).await,
                &key.to_string(),
            );
        }
        use fairlead_edge_model::kinds::{Status, with_status};
        let policies: Vec<&str> = with_status(Status::Ancestors).collect();
        for kind in with_status(Status::Parents).chain(policies.iter().copied()) {
            for current in index.objects(kind) {
                let key = ObjectKey::new(
                    current["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default(),
                    current["metadata"]["name"].as_str().unwrap_or_default(),
                );
                let (shared, desired): (Shared, Vec<Entry<'_>>) = if policies.contains(&kind) {
                    let entries = statuses.backend_tls_policies.get(&key);
                    (
                        ANCESTORS,
                        entries
                            .into_iter()
                            .flatten()
                            .map(|a| Entry {
                                reference: &a.ancestor_ref,
                                conditions: &a.conditions,
                            })
                            .collect(),
                    )
                } else {
                    let entries = statuses.routes.get(&RouteKey::new(kind, key.clone()));
                    (
                        PARENTS,
                        entries
                            .into_iter()
                            .flatten()
                            .map(|p| Entry {
                                reference: &p.parent_ref,
                                conditions: &p.conditions,
                            })
                            .collect(),
                    )
                };
                let had_ours = current["status"][shared.list].as_array().is_some_and(|ps| {
                    ps.iter()
                        .any(|p| p["controllerName"] == self.controller_name.as_str())
                });
                if desired.is_empty() && !had_ours {
                    continue;
                }
                let what = format!("{kind}/{key}");
                count(
                    self.shared(index, kind, shared, current.clone(), &desired, &now)
                        .await,
                    &what,
                );
            }
        }
        written
    }

    /// Writes the Gateways' statuses that changed — all a change of `progress` alone asks.
    pub async fn write_gateways(
        &self,
        index: &Index,
        statuses: &Statuses,
        progress: &Progress,
    ) -> Written {
        let now = fairlead_kit::conditions::now();
        let mut written = Written::default();
        for (key, desired) in &statuses.gateways {
            let Some(current) = index.object("Gateway", key) else {
                continue;
            };
            let listeners = listeners(&desired.listeners, &current, &now);
            let others = Some(&current["status"]["conditions"]);
            let generation = desired
                .conditions
                .first()
                .and_then(|c| c.observed_generation);
            let mut ours = desired.conditions.clone();
            ours.push(synced(progress.of(key), generation));
            if let Some(rejection) = progress.rejected(key) {
                not_programmed(&mut ours, &rejection, generation);
            }
            let status = json!({
                "addresses": desired.addresses,
                "conditions": with_others(conditions(&ours, others, &now), others),
                "listeners": listeners,
                "attachedListenerSets": desired.attached_listener_sets,
            });
            match self.merge(index, "Gateway", key, &current, status).await {
                Ok(true) => written.writes += 1,
                Ok(false) => {}
                Err(e) => {
                    written.failures += 1;
                    tracing::warn!(object = %key, error = %e, "status write failed; retrying next round");
                }
            }
        }
        written
    }

    fn api(&self, index: &Index, kind: &str, namespace: &str) -> Option<Api<DynamicObject>> {
        let resource = index.resource(kind)?;
        Some(if namespace.is_empty() {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        })
    }

    /// Merge-patches `status` when it differs from the stored one.
    async fn merge(
        &self,
        index: &Index,
        kind: &str,
        object: &ObjectKey,
        current: &Value,
        status: Value,
    ) -> Result<bool, kube::Error> {
        if same(&current["status"], &status) {
            return Ok(false);
        }
        let key = (kind.to_owned(), object.clone());
        let version = current["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let unchanged = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .is_some_and(|(last, after)| *last == status && *after == version);
        if unchanged {
            return Ok(false);
        }
        let Some(api) = self.api(index, kind, object.namespace()) else {
            return Ok(false);
        };
        let stored = api
            .patch_status(
                object.name(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status.clone()})),
            )
            .await?;
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                key,
                (status, stored.metadata.resource_version.unwrap_or_default()),
            );
        Ok(true)
    }

    /// Replaces our entries of a shared status list (a route's `parents`, a policy's
    /// `ancestors`), with the resourceVersion as a precondition, re-reading after a conflict.
    async fn shared(
        &self,
        index: &Index,
        kind: &str,
        shared: Shared,
        mut current: Arc<Value>,
        desired: &[Entry<'_>],
        now: &str,
    ) -> Result<bool, kube::Error> {
        let namespace = current["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let name = current["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let Some(api) = self.api(index, kind, &namespace) else {
            return Ok(false);
        };
        for attempt in 0..=CONFLICT_RETRIES {
            let previous = current["status"][shared.list]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let ours: Vec<Value> = desired
                .iter()
                .map(|p| {
                    let before = previous.iter().find(|o| {
                        o["controllerName"] == self.controller_name.as_str()
                            && serde_json::from_value::<fairlead_edge_model::input::ParentRef>(o[shared.reference].clone()).ok().as_ref() == Some(p.reference)
                    });
                    let mut entry = json!({
                        "controllerName": self.controller_name,
                        "conditions": conditions(p.conditions, before.map(|b| &b["conditions"]), now),
                    });
                    entry[shared.reference] = json!(p.reference);
                    entry
                })
                .collect();
            let list = shared_list(&current, shared.list, &self.controller_name, &ours);
            if same(&current["status"][shared.list], &list) {
                return Ok(attempt > 0);
            }
            let mut object = current.as_ref().clone();
            object["status"][shared.list] = list;
            let body: DynamicObject = match serde_json::from_value(object) {
                Ok(body) => body,
                Err(e) => {
                    tracing::warn!(kind, object = %name, error = %e, "object does not read back; skipping its status");
                    return Ok(false);
                }
            };
            match api
                .replace_status(&name, &PostParams::default(), &body)
                .await
            {
                Ok(_) => return Ok(true),
                Err(kube::Error::Api(status))
                    if status.code == 409 && attempt < CONFLICT_RETRIES =>
                {
                    let fresh = api.get_status(&name).await?;
                    current = Arc::new(serde_json::to_value(fresh).unwrap_or_default());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }
}

/// A Gateway's `Synced` condition: whether every proxy connected to this control plane runs
/// the configuration last translated for the Gateway, each type ACKed at its version.
pub fn synced(tally: Tally, generation: Option<i64>) -> Condition {
    let (reason, message) = match tally {
        Tally { streams: 0, .. } => (
            "NoProxies",
            "no proxy of the Gateway is connected to the control plane".to_owned(),
        ),
        Tally { streams, settled } if settled == streams => (
            "Synced",
            format!("{streams} of {streams} proxies run the Gateway's latest configuration"),
        ),
        Tally { streams, settled } => (
            "Pending",
            format!(
                "{settled} of {streams} proxies run the Gateway's latest configuration; the others have not applied it yet (or rejected it: see the Gateway's Events)"
            ),
        ),
    };
    Condition::new(SYNCED, tally.synced(), reason, message, generation)
}

/// A Gateway's `Programmed` condition while a proxy rejects its latest configuration, in
/// place of the translator's, which cannot know: `False`, with the proxy's reason —
/// `AddressNotUsable` when it could not bind the Gateway's addresses (Envoy's "cannot
/// bind"), `Invalid` for anything else it refused (a certificate, a listener, a route). The
/// proxy keeps serving what it had before, which the message says.
pub fn not_programmed(
    conditions: &mut Vec<Condition>,
    rejection: &Rejection,
    generation: Option<i64>,
) {
    let (reason, message) = if rejection.unbound() {
        (
            "AddressNotUsable",
            format!(
                "a proxy could not bind the Gateway's addresses: {}",
                rejection.message
            ),
        )
    } else {
        (
            "Invalid",
            format!(
                "a proxy rejected the Gateway's latest {} configuration and serves its previous one: {}",
                rejection.type_name, rejection.message
            ),
        )
    };
    conditions.retain(|c| c.type_ != "Programmed");
    conditions.push(Condition::new(
        "Programmed",
        false,
        reason,
        message,
        generation,
    ));
}

/// The type of [`synced`]'s condition.
pub const SYNCED: &str = "Synced";

/// Whether two JSON values are the same, a missing value counting as an empty one.
fn same(a: &Value, b: &Value) -> bool {
    let empty = |v: &Value| {
        v.is_null()
            || v.as_array().is_some_and(Vec::is_empty)
            || v.as_object().is_some_and(|o| o.is_empty())
    };
    a == b || (empty(a) && empty(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_of_other_writers_are_kept() {
        let current = json!([
            {"type": "Accepted", "status": "False"},
            {"type": "LocalProxy", "status": "True", "reason": "Ready"}
        ]);
        let desired = json!([{"type": "Accepted", "status": "True"}]);
        assert_eq!(
            with_others(desired, Some(&current)),
            json!([
                {"type": "Accepted", "status": "True"},
                {"type": "LocalProxy", "status": "True", "reason": "Ready"}
            ])
        );
        assert_eq!(with_others(json!([]), None), json!([]));
    }

    #[test]
    fn synced_holds_only_when_every_connected_proxy_is_settled() {
        let none = synced(Tally::default(), Some(3));
        assert_eq!(
            (none.status.as_str(), none.reason.as_str()),
            ("False", "NoProxies")
        );
        let some = synced(
            Tally {
                streams: 2,
                settled: 1,
            },
            Some(3),
        );
        assert_eq!(
            (some.status.as_str(), some.reason.as_str()),
            ("False", "Pending")
        );
        assert!(some.message.starts_with("1 of 2"), "{}", some.message);
        let all = synced(
            Tally {
                streams: 2,
                settled: 2,
            },
            Some(3),
        );
        assert_eq!((all.status.as_str(), all.type_.as_str()), ("True", SYNCED));
        assert_eq!(all.observed_generation, Some(3));
    }

    #[test]
    fn a_configuration_a_proxy_rejects_makes_the_gateway_not_programmed() {
        for (type_name, message, reason) in [
            (
                "listener",
                "cannot bind '192.0.2.1:8080'",
                "AddressNotUsable",
            ),
            ("secret", "OCSP response is required", "Invalid"),
            ("listener", "unknown filter", "Invalid"),
        ] {
            let mut conditions = vec![
                Condition::new("Accepted", true, "Accepted", "ok", Some(2)),
                Condition::new("Programmed", true, "Programmed", "served", Some(2)),
            ];
            let rejection = Rejection {
                type_name,
                message: message.into(),
            };
            not_programmed(&mut conditions, &rejection, Some(2));
            assert_eq!(conditions.len(), 2);
            let programmed = &conditions[1];
            assert_eq!(
                (
                    programmed.type_.as_str(),
                    programmed.status.as_str(),
                    programmed.reason.as_str()
                ),
                ("Programmed", "False", reason)
            );
            assert!(
                programmed.message.contains(message),
                "{}",
                programmed.message
            );
            assert_eq!(conditions[0].status, "True", "acceptance untouched");
        }
    }
}
