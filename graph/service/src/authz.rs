//! Who may see what: the user kube-rbac-proxy authenticated (passed as `x-remote-user` and
//! `x-remote-groups`, groups joined by `|`), and for each node a SubjectAccessReview allowing
//! `list` of its own resource in its namespace (at cluster scope for a cluster-scoped one).
//! Answers are cached for [`TTL`] per user, groups, resource and namespace. A review that
//! fails (API server unreachable) denies, is counted and logged: a user never learns of an
//! object because the API server was down.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fairlead_edge_model::kinds;
use fairlead_graph::{Graph, Node};
use futures::StreamExt as _;
use http::HeaderMap;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::metrics::GraphMetrics;

/// How long an answer is kept.
pub const TTL: Duration = Duration::from_secs(10);

/// Answers kept before the cache is emptied (a bound on memory, not an eviction policy).
const CACHE_LIMIT: usize = 50_000;

/// The header naming the user.
pub const USER_HEADER: &str = "x-remote-user";

/// The header naming the user's groups, joined by `|`.
pub const GROUPS_HEADER: &str = "x-remote-groups";

/// An authenticated user.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct User {
    /// Name.
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
}

impl User {
    /// The user the headers name, if any (groups from every `x-remote-groups` value, each
    /// split at `|`).
    pub fn from_headers(headers: &HeaderMap) -> Option<Self> {
        let name = headers.get(USER_HEADER)?.to_str().ok()?.trim();
        if name.is_empty() {
            return None;
        }
        let groups = headers
            .get_all(GROUPS_HEADER)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split('|'))
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .collect();
        Some(Self {
            name: name.to_owned(),
            groups,
        })
    }
}

/// What a node's visibility is decided by: `list` of `group/resource` in `namespace`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Attributes {
    /// API group.
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Namespace (empty: cluster scope).
    pub namespace: String,
}

/// The plural of a kind the graph draws.
fn plural(kind: &str) -> String {
    match kind {
        "ServiceWithHealthchecks" => "servicewithhealthchecks".into(),
        "Deployment" => "deployments".into(),
        "DaemonSet" => "daemonsets".into(),
        "EndpointSlice" => "endpointslices".into(),
        _ => kinds::KINDS
            .iter()
            .find(|k| k.kind == kind)
            .map(|k| k.plural.to_owned())
            .unwrap_or_else(|| format!("{}s", kind.to_ascii_lowercase())),
    }
}

/// What decides whether `node` is shown: its own resource, or for a listener its
/// Gateway's or ListenerSet's (the id's kind segment names the object it lives in).
pub fn attributes(node: &Node) -> Attributes {
    let (group, kind, namespace) = key(node);
    Attributes {
        group: group.to_owned(),
        resource: plural(kind),
        namespace: namespace.to_owned(),
    }
}

/// The group, kind and namespace [`attributes`] are made of, borrowed from `node`.
fn key(node: &Node) -> (&str, &str, &str) {
    let mut segments = node.id.as_str().split('/');
    let group = segments.next().unwrap_or_default();
    let kind = segments.next().unwrap_or_default();
    (group, kind, node.namespace.as_deref().unwrap_or_default())
}

/// The authorizer.
pub enum Access {
    /// Everyone sees everything (a test's, or a process whose only client is its owner).
    Everything,
    /// SubjectAccessReviews through this client (which needs `create` on them).
    Reviews {
        /// The client.
        client: kube::Client,
        /// Answers by user and attributes, with when they were given.
        cache: Mutex<HashMap<(User, Attributes), (bool, Instant)>>,
    },
}

impl Access {
    /// Reviews through `client`.
    pub fn reviews(client: kube::Client) -> Self {
        Self::Reviews {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// What `user` may see of `graph`.
    pub async fn allowed(&self, user: &User, graph: &Graph, metrics: &GraphMetrics) -> Visible {
        let Self::Reviews { client, cache } = self else {
            return Visible::Everything;
        };
        // The distinct attributes the nodes need, borrowed from them.
        let needed: BTreeSet<(&str, &str, &str)> = graph.nodes.values().map(|n| key(n)).collect();
        let needed: Vec<Attributes> = needed
            .into_iter()
            .map(|(group, kind, namespace)| Attributes {
                group: group.to_owned(),
                resource: plural(kind),
                namespace: namespace.to_owned(),
            })
            .collect();
        let now = Instant::now();
        let mut allowed = BTreeSet::new();
        let mut ask = Vec::new();
        let mut denied = false;
        {
            let cache = cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for a in needed {
                match cache.get(&(user.clone(), a.clone())) {
                    Some((answer, at)) if now.duration_since(*at) < TTL => {
                        if *answer {
                            allowed.insert(a);
                        } else {
                            denied = true;
                        }
                    }
                    _ => ask.push(a),
                }
            }
        }
        let answers: Vec<(Attributes, Option<bool>)> = futures::stream::iter(ask)
            .map(|a| async move {
                let answer = review(client, user, &a).await;
                (a, answer)
            })
            .buffer_unordered(16)
            .collect()
            .await;
        let mut cache = cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() > CACHE_LIMIT {
            cache.clear();
        }
        for (a, answer) in answers {
            let result = match answer {
                Some(true) => "allowed",
                Some(false) => "denied",
                None => "error",
            };
            metrics.reviews.with_label_values(&[result]).inc();
            if let Some(answer) = answer {
                cache.insert((user.clone(), a.clone()), (answer, now));
            }
            if answer == Some(true) {
                allowed.insert(a);
            } else {
                denied = true;
            }
        }
        if denied {
            Visible::Only(allowed)
        } else {
            Visible::Everything
        }
    }
}

/// What a user may see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Visible {
    /// Every node of the graph it was asked for.
    Everything,
    /// The nodes of these attributes.
    Only(BTreeSet<Attributes>),
}

impl Visible {
    /// Whether `node` is seen.
    pub fn admits(&self, node: &Node) -> bool {
        match self {
            Self::Everything => true,
            Self::Only(allowed) => allowed.contains(&attributes(node)),
        }
    }
}

/// Asks whether `user` may list `a`; `None` when the review failed.
async fn review(client: &kube::Client, user: &User, a: &Attributes) -> Option<bool> {
    let mut attributes = json!({"verb": "list", "group": a.group, "resource": a.resource});
    if !a.namespace.is_empty() {
        attributes["namespace"] = a.namespace.clone().into();
    }
    let request: SubjectAccessReview = serde_json::from_value(json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user.name, "groups": user.groups, "resourceAttributes": attributes},
    }))
    .ok()?;
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    match api.create(&PostParams::default(), &request).await {
        Ok(answer) => Some(answer.status.is_some_and(|s| s.allowed)),
        Err(e) => {
            tracing::warn!(error = %e, user = %user.name, resource = %a.resource, namespace = %a.namespace, "SubjectAccessReview failed; not showing what it was for");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_come_from_the_proxys_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(User::from_headers(&headers), None);
        headers.insert(USER_HEADER, "alice".parse().unwrap());
        headers.insert(
            GROUPS_HEADER,
            "team-a|system:authenticated".parse().unwrap(),
        );
        headers.append(GROUPS_HEADER, "oncall".parse().unwrap());
        assert_eq!(
            User::from_headers(&headers),
            Some(User {
                name: "alice".into(),
                groups: vec![
                    "team-a".into(),
                    "system:authenticated".into(),
                    "oncall".into()
                ],
            })
        );
    }

    #[test]
    fn listeners_and_port_summaries_are_seen_through_their_resources() {
        let node = |id: &str, ns: Option<&str>| Node {
            id: fairlead_graph::NodeId::parse(id).unwrap(),
            group: String::new(),
            kind: String::new(),
            namespace: ns.map(str::to_owned),
            name: "x".into(),
            parent: None,
            missing: false,
            health: fairlead_graph::Health::Healthy,
            reasons: Vec::new(),
            status: fairlead_graph::status::Status::default(),
            traffic: None,
            digest: Default::default(),
        };
        let a = attributes(&node(
            "gateway.networking.k8s.io/Gateway/web/gw/https",
            Some("web"),
        ));
        assert_eq!(
            (a.group.as_str(), a.resource.as_str(), a.namespace.as_str()),
            ("gateway.networking.k8s.io", "gateways", "web")
        );
        let a = attributes(&node(
            "discovery.k8s.io/EndpointSlice/web/svc/80",
            Some("web"),
        ));
        assert_eq!(a.resource, "endpointslices");
        let a = attributes(&node(
            "gateway.networking.k8s.io/GatewayClass//d8-alb",
            None,
        ));
        assert_eq!(
            (a.resource.as_str(), a.namespace.as_str()),
            ("gatewayclasses", "")
        );
        let a = attributes(&node(
            "network.deckhouse.io/ServiceWithHealthchecks/db/pg",
            Some("db"),
        ));
        assert_eq!(a.resource, "servicewithhealthchecks");
        assert_eq!(
            attributes(&node("/Secret/web/tls", Some("web"))).resource,
            "secrets"
        );
    }
}
