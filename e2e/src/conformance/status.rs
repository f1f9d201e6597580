//! The suite's whole-list status checks: a Gateway's or ListenerSet's listeners exactly as a
//! test lists them (`GatewayStatusMustHaveListeners`, `ListenerSetStatusMustHaveListeners`),
//! and a route's parents exactly as it declared them (`HTTPRouteMustHaveParents`).

use serde_json::Value;

use super::{World, holds};

/// One listener's status as a test wants it: its name, the route kinds it must list among
/// its supported kinds, its attached routes, and conditions (type, status, reason unless
/// empty) it must carry.
#[derive(Clone, Copy, Debug)]
pub struct ListenerWant<'a> {
    /// Its name.
    pub name: &'a str,
    /// Kinds (of `gateway.networking.k8s.io`) among its supported kinds.
    pub kinds: &'a [&'a str],
    /// Its attached routes.
    pub attached: i64,
    /// Its conditions.
    pub conditions: &'a [(&'a str, &'a str, &'a str)],
}

/// Whether `conditions` (a status's) all carry `generation`.
fn latest(conditions: &Value, generation: i64) -> bool {
    conditions.as_array().is_some_and(|list| {
        list.iter()
            .all(|c| c["observedGeneration"].as_i64() == Some(generation))
    })
}

/// Whether the status `listeners` are exactly `wanted` (the suite's `listenersMatch`).
fn listeners_match(listeners: &[Value], wanted: &[ListenerWant<'_>]) -> bool {
    listeners.len() == wanted.len()
        && wanted.iter().all(|want| {
            let Some(found) = listeners.iter().find(|l| l["name"] == want.name) else {
                return false;
            };
            let kinds = found["supportedKinds"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let group = |k: &Value| {
                k["group"]
                    .as_str()
                    .unwrap_or("gateway.networking.k8s.io")
                    .to_owned()
            };
            let conditions = found["conditions"].as_array().cloned().unwrap_or_default();
            want.kinds.iter().all(|kind| {
                kinds
                    .iter()
                    .any(|k| k["kind"] == *kind && group(k) == "gateway.networking.k8s.io")
            }) && found["attachedRoutes"].as_i64() == Some(want.attached)
                && want
                    .conditions
                    .iter()
                    .all(|w| conditions.iter().any(|c| holds(c, *w)))
        })
}

impl World {
    /// Waits until the `kind` `key` (a Gateway or a ListenerSet), its conditions at its latest
    /// generation, lists exactly the listeners `wanted`.
    pub async fn listeners(&self, kind: &str, key: &str, wanted: &[ListenerWant<'_>]) {
        let (api, name) = self.api(kind, key).await;
        crate::wait::until_seen(&format!("{kind} {key}: listeners {wanted:?}"), async || {
            let object = api.get(name).await.map_err(|e| e.to_string())?;
            let generation = object.metadata.generation.unwrap_or_default();
            let status = &object.data["status"];
            let listeners = status["listeners"].as_array().cloned().unwrap_or_default();
            if latest(&status["conditions"], generation) && listeners_match(&listeners, wanted) {
                Ok(())
            } else {
                Err(format!("generation {generation}, status {status}"))
            }
        })
        .await;
    }

    /// Waits until the route `kind` `key` has exactly one parent status per entry of
    /// `parents` (`(kind, namespace/name)` of a Gateway or ListenerSet), each naming its
    /// parent fully (group, kind, namespace), written by fairlead's controller and accepted
    /// — and none for anything else (the suite's `HTTPRouteMustHaveParents`, namespaces
    /// required).
    pub async fn route_parents(&self, kind: &str, key: &str, parents: &[(&str, &str)]) {
        let (api, name) = self.api(kind, key).await;
        crate::wait::until_seen(
            &format!("{kind} {key}: parents exactly {parents:?}"),
            async || {
                let route = api.get(name).await.map_err(|e| e.to_string())?;
                let listed = route.data["status"]["parents"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                let each = parents.iter().all(|(parent_kind, parent)| {
                    let (namespace, parent_name) = parent.split_once('/').expect("namespace/name");
                    listed.iter().any(|p| {
                        let r = &p["parentRef"];
                        r["group"] == "gateway.networking.k8s.io"
                            && r["kind"] == *parent_kind
                            && r["name"] == parent_name
                            && r["namespace"] == namespace
                            && p["controllerName"] == fairlead_edge_model::CONTROLLER_NAME
                            && p["conditions"].as_array().is_some_and(|c| {
                                c.iter().any(|c| holds(c, ("Accepted", "True", "")))
                            })
                    })
                });
                if listed.len() == parents.len() && each {
                    Ok(())
                } else {
                    Err(format!("parents {listed:?}"))
                }
            },
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listeners_match_exactly_by_name_kinds_routes_and_conditions() {
        let listeners: Vec<Value> = serde_json::from_str(
            r#"[{"name": "http", "attachedRoutes": 1,
                 "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"},
                                    {"kind": "GRPCRoute"}],
                 "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted"}]}]"#,
        )
        .unwrap();
        let want =
            |name: &'static str, attached: i64, kinds: &'static [&'static str]| ListenerWant {
                name,
                kinds,
                attached,
                conditions: &[("Accepted", "True", "")],
            };
        assert!(listeners_match(
            &listeners,
            &[want("http", 1, &["HTTPRoute", "GRPCRoute"])]
        ));
        assert!(!listeners_match(
            &listeners,
            &[want("http", 2, &["HTTPRoute"])]
        ));
        assert!(!listeners_match(
            &listeners,
            &[want("http", 1, &["TLSRoute"])]
        ));
        assert!(!listeners_match(
            &listeners,
            &[want("http", 1, &[]), want("https", 1, &[])]
        ));
        assert!(!listeners_match(&listeners, &[]));
    }
}
