//! Ingresses to draft Gateway API objects for one ALB instance's Gateway.
//!
//! - Ingresses of the asked ingress class (`spec.ingressClassName` or the
//!   `kubernetes.io/ingress.class` annotation; one without a class is converted and said so).
//! - One ListenerSet per namespace, `ingress-nginx`, naming the Gateway: an HTTP listener
//!   (port 80) per host, an HTTPS one (443) per host the Ingress gives a certificate Secret.
//!   An Ingress's default backend takes its hosts' requests no path takes; one without host
//!   rules (a catch-all for every host) is not converted: the Gateway's listeners without
//!   hostname are the platform's. Scope
//!   `cluster` (a ClusterALBInstance's Gateway, which takes ListenerSets from every
//!   namespace) puts it in the Ingress's namespace; `namespaced` (an ALBInstance's, which
//!   takes its own namespace's only) in the Gateway's, with ReferenceGrants for the routes
//!   (`to: ListenerSet`) and the certificates (`to: Secret`) left in the Ingress's.
//! - One HTTPRoute per Ingress host, a rule per path (`Prefix` → `PathPrefix`, `Exact` →
//!   `Exact`, `ImplementationSpecific` → `PathPrefix`, or `RegularExpression` under
//!   `use-regex` or `rewrite-target`), named Service ports resolved from the Services sent
//!   along; the annotations [`crate::nginx`] maps. A host with a certificate gets its route
//!   on HTTPS and, as ingress-nginx's `ssl-redirect` (on by default) does, a second route on
//!   HTTP redirecting there (308).
//! - Every object carries, as YAML comments, what could not be carried.

use std::collections::{BTreeMap, BTreeSet};

use fairlead_edge_model::input::{
    BackendRef, GATEWAY_GROUP, GrantFrom, GrantTo, HttpFilter, HttpMatch, HttpRoute, HttpRouteSpec,
    HttpRule, Listener, ListenerSet, ListenerSetSpec, ListenerTls, ObjectRef, ParentRef, PathMatch,
    ReferenceGrant, ReferenceGrantSpec, RequestRedirect, UrlRewrite,
};
use fairlead_key::ObjectKey;
use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::nginx;
use crate::read::Inputs;

/// The ListenerSet each namespace's hosts go to.
pub const LISTENER_SET: &str = "ingress-nginx";

/// Which kind of instance the Gateway is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scope {
    /// A ClusterALBInstance's: ListenerSets from every namespace.
    #[default]
    Cluster,
    /// An ALBInstance's: ListenerSets from its own namespace only.
    Namespaced,
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "cluster" => Ok(Self::Cluster),
            "namespaced" => Ok(Self::Namespaced),
            other => Err(format!("scope {other:?}: cluster or namespaced")),
        }
    }
}

/// What to convert for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// The Gateway the ListenerSets name.
    pub gateway: ObjectKey,
    /// The kind of instance it is.
    pub scope: Scope,
    /// The ingress class converted.
    pub ingress_class: String,
}

impl Default for Options {
    /// Deckhouse's defaults: `d8-alb/public-gw`, `cluster`, `nginx`.
    fn default() -> Self {
        Self {
            gateway: ObjectKey::new("d8-alb", "public-gw"),
            scope: Scope::Cluster,
            ingress_class: "nginx".into(),
        }
    }
}

/// A drafted object and what its comments say.
#[derive(Clone, Debug, PartialEq)]
pub struct Draft {
    /// Notes, a sentence each.
    pub notes: Vec<String>,
    /// The object.
    pub object: serde_json::Value,
}

/// The conversion: notes about the input as a whole, and the drafts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Converted {
    /// About the input.
    pub notes: Vec<String>,
    /// ListenerSets, ReferenceGrants, HTTPRoutes.
    pub drafts: Vec<Draft>,
}

impl Converted {
    /// Multi-document YAML, each note a comment above what it is about.
    pub fn yaml(&self) -> String {
        let mut out = String::from(
            "# Drafted from ingress-nginx Ingresses by fairlead's ingress2gateway: review before applying.\n",
        );
        for note in &self.notes {
            out.push_str(&format!("# {note}\n"));
        }
        for draft in &self.drafts {
            out.push_str("---\n");
            for note in &draft.notes {
                out.push_str(&format!("# {note}\n"));
            }
            out.push_str(&serde_yaml_ng::to_string(&draft.object).unwrap_or_default());
        }
        out
    }
}

/// A name for `host` after `prefix` (`http-shop-example-com`; no prefix:
/// `shop-example-com`).
fn label(prefix: &str, host: &str) -> String {
    let host = host
        .to_ascii_lowercase()
        .replace('*', "wildcard")
        .replace('.', "-");
    if prefix.is_empty() {
        host
    } else {
        format!("{prefix}-{host}")
    }
}

/// The ingress class of `ingress`, if it names one.
fn class_of(ingress: &Ingress) -> Option<&str> {
    ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref())
        .or_else(|| {
            ingress
                .metadata
                .annotations
                .as_ref()?
                .get("kubernetes.io/ingress.class")
                .map(String::as_str)
        })
}

/// The ListenerSets being drafted, by namespace: their listeners by name.
type Sets = BTreeMap<String, BTreeMap<String, Listener>>;

/// Converts `inputs` for `options`.
pub fn convert(inputs: &Inputs, options: &Options) -> Converted {
    let mut out = Converted::default();
    for (kind, count) in &inputs.ignored {
        out.notes.push(format!(
            "{count} {kind} object(s) ignored: not read by the converter"
        ));
    }
    let mut sets = Sets::new();
    let mut grants: BTreeSet<(String, String, String, String)> = BTreeSet::new();
    let mut routes = Vec::new();
    for ingress in &inputs.ingresses {
        let namespace = ingress.metadata.namespace.clone().unwrap_or_default();
        let name = ingress.metadata.name.clone().unwrap_or_default();
        match class_of(ingress) {
            Some(class) if class != options.ingress_class => {
                out.notes.push(format!(
                    "Ingress {namespace}/{name}: class {class}, not {}: not converted",
                    options.ingress_class
                ));
                continue;
            }
            None => out.notes.push(format!(
                "Ingress {namespace}/{name}: no ingress class; converted as {}",
                options.ingress_class
            )),
            Some(_) => {}
        }
        let set_namespace = match options.scope {
            Scope::Cluster => namespace.clone(),
            Scope::Namespaced => options.gateway.namespace().to_owned(),
        };
        let context = Context {
            inputs,
            ingress,
            namespace: &namespace,
            name: &name,
            set_namespace: &set_namespace,
        };
        routes.extend(context.routes(&mut sets, &mut grants, &mut out.notes));
    }
    for (namespace, listeners) in sets {
        let set = ListenerSet {
            metadata: meta(&namespace, LISTENER_SET, BTreeMap::new()),
            spec: ListenerSetSpec {
                parent_ref: ObjectRef {
                    name: options.gateway.name().to_owned(),
                    namespace: Some(options.gateway.namespace().to_owned()),
                    ..ObjectRef::default()
                },
                listeners: listeners.into_values().collect(),
            },
        };
        out.drafts.push(Draft {
            notes: Vec::new(),
            object: document("ListenerSet", &set),
        });
    }
    for (namespace, from_kind, from_namespace, to) in grants {
        let (to_kind, to_name) = to.split_once('/').unwrap_or_default();
        let grant = ReferenceGrant {
            metadata: meta(
                &namespace,
                &format!(
                    "ingress-nginx-{}-from-{from_namespace}",
                    to_kind.to_ascii_lowercase()
                ),
                BTreeMap::new(),
            ),
            spec: ReferenceGrantSpec {
                from: vec![GrantFrom {
                    group: GATEWAY_GROUP.into(),
                    kind: from_kind,
                    namespace: from_namespace,
                }],
                to: vec![GrantTo {
                    group: if to_kind == "Secret" {
                        String::new()
                    } else {
                        GATEWAY_GROUP.into()
                    },
                    kind: to_kind.to_owned(),
                    name: Some(to_name.to_owned()),
                }],
            },
        };
        out.drafts.push(Draft {
            notes: Vec::new(),
            object: document("ReferenceGrant", &grant),
        });
    }
    out.drafts.extend(routes);
    out
}

/// One Ingress being converted.
struct Context<'a> {
    inputs: &'a Inputs,
    ingress: &'a Ingress,
    namespace: &'a str,
    name: &'a str,
    set_namespace: &'a str,
}

impl Context<'_> {
    /// The HTTPRoutes of the Ingress, adding its listeners to `sets`, the grants they need
    /// to `grants` (namespace, from kind, from namespace, `Kind/name`), and what is not
    /// converted at all to `notes`.
    fn routes(
        &self,
        sets: &mut Sets,
        grants: &mut BTreeSet<(String, String, String, String)>,
        notes: &mut Vec<String>,
    ) -> Vec<Draft> {
        let spec = self.ingress.spec.clone().unwrap_or_default();
        let annotations = self
            .ingress
            .metadata
            .annotations
            .clone()
            .unwrap_or_default();
        let certificates: BTreeMap<String, Option<String>> = spec
            .tls
            .iter()
            .flatten()
            .flat_map(|t| {
                t.hosts
                    .iter()
                    .flatten()
                    .map(|h| (h.clone(), t.secret_name.clone()))
            })
            .collect();
        let rules = spec.rules.clone().unwrap_or_default();
        if rules.is_empty() {
            if spec.default_backend.is_some() {
                notes.push(format!(
                    "Ingress {}/{}: a default backend alone (a catch-all for every host) has no place on the ALB, whose Gateway listeners without hostname are the platform's: give it a host",
                    self.namespace, self.name
                ));
            }
            return Vec::new();
        }
        let many = rules.len() > 1;
        let mut drafts = Vec::new();
        for rule in &rules {
            let Some(host) = rule.host.as_deref() else {
                notes.push(format!(
                    "Ingress {}/{}: a rule without host (a catch-all for every host) has no place on the ALB, whose Gateway listeners without hostname are the platform's: give it a host",
                    self.namespace, self.name
                ));
                continue;
            };
            let paths = rule
                .http
                .as_ref()
                .map(|h| h.paths.clone())
                .unwrap_or_default();
            let route_name = if many {
                format!("{}-{}", self.name, label("", host))
            } else {
                self.name.to_owned()
            };
            let mut paths: Vec<(Option<String>, String, IngressBackend)> = paths
                .into_iter()
                .map(|p| (p.path, p.path_type, p.backend))
                .collect();
            // The Ingress's default backend takes the host's requests no path takes.
            let has_root = paths
                .iter()
                .any(|(p, t, _)| p.as_deref().unwrap_or("/") == "/" && t != "Exact");
            if let (Some(backend), false) = (&spec.default_backend, has_root) {
                paths.push((
                    Some("/".to_owned()),
                    DEFAULT_BACKEND.to_owned(),
                    backend.clone(),
                ));
            }
            drafts.extend(self.host_routes(
                &route_name,
                host,
                certificates.get(host),
                &paths,
                &annotations,
                sets,
                grants,
            ));
        }
        drafts
    }

    /// The route (and, for a host with a certificate, the HTTP → HTTPS redirect) of one
    /// Ingress host.
    #[allow(clippy::too_many_arguments)]
    fn host_routes(
        &self,
        route_name: &str,
        host: &str,
        certificate: Option<&Option<String>>,
        paths: &[(Option<String>, String, IngressBackend)],
        annotations: &BTreeMap<String, String>,
        sets: &mut Sets,
        grants: &mut BTreeSet<(String, String, String, String)>,
    ) -> Vec<Draft> {
        let fallback = self.authenticator_domain(annotations);
        let mapped = nginx::map(annotations, host, fallback.as_deref());
        let mut notes = mapped.notes.clone();
        let listeners = sets.entry(self.set_namespace.to_owned()).or_default();
        let http = label("http", host);
        listeners.entry(http.clone()).or_insert_with(|| Listener {
            name: http.clone(),
            hostname: Some(host.to_owned()),
            port: 80,
            protocol: "HTTP".into(),
            ..Listener::default()
        });
        let https = match certificate {
            Some(Some(secret)) => {
                let name = label("https", host);
                let cross = self.set_namespace != self.namespace;
                listeners.entry(name.clone()).or_insert_with(|| Listener {
                    name: name.clone(),
                    hostname: Some(host.to_owned()),
                    port: 443,
                    protocol: "HTTPS".into(),
                    tls: Some(ListenerTls {
                        mode: Some("Terminate".into()),
                        certificate_refs: vec![ObjectRef {
                            name: secret.clone(),
                            namespace: cross.then(|| self.namespace.to_owned()),
                            ..ObjectRef::default()
                        }],
                    }),
                    ..Listener::default()
                });
                if cross {
                    grants.insert((
                        self.namespace.to_owned(),
                        "ListenerSet".into(),
                        self.set_namespace.to_owned(),
                        format!("Secret/{secret}"),
                    ));
                }
                Some(name)
            }
            Some(None) => {
                notes.push(format!(
                    "spec.tls: {} has no secretName (ingress-nginx's default certificate): no HTTPS listener drafted; give it a certificate",
                    host
                ));
                None
            }
            None => None,
        };
        if mapped.force_ssl_redirect && https.is_none() {
            notes.push(format!(
                "{}force-ssl-redirect without a certificate here (HTTPS ends in front of the ALB): not carried",
                nginx::NGINX
            ));
        }
        if self.set_namespace != self.namespace {
            grants.insert((
                self.set_namespace.to_owned(),
                "HTTPRoute".into(),
                self.namespace.to_owned(),
                format!("ListenerSet/{LISTENER_SET}"),
            ));
        }
        let parent = |section: &str| ParentRef {
            group: Some(GATEWAY_GROUP.into()),
            kind: Some("ListenerSet".into()),
            namespace: (self.set_namespace != self.namespace)
                .then(|| self.set_namespace.to_owned()),
            name: LISTENER_SET.into(),
            section_name: Some(section.to_owned()),
            port: None,
        };
        let redirect = https.is_some() && (mapped.ssl_redirect || mapped.force_ssl_redirect);
        let parents = match (&https, redirect) {
            (Some(https), true) => vec![parent(https)],
            (Some(https), false) => vec![parent(&http), parent(https)],
            (None, _) => vec![parent(&http)],
        };
        let hostnames = vec![host.to_owned()];
        let rules: Vec<HttpRule> = paths
            .iter()
            .filter_map(|(path, path_type, backend)| {
                let backend = self.backend(backend, &mut notes)?;
                Some(HttpRule {
                    matches: vec![HttpMatch {
                        path: Some(path_match(path.as_deref(), path_type, mapped.regex)),
                        ..HttpMatch::default()
                    }],
                    filters: mapped
                        .upstream_vhost
                        .iter()
                        .map(|vhost| HttpFilter {
                            type_: "URLRewrite".into(),
                            url_rewrite: Some(UrlRewrite {
                                hostname: Some(vhost.clone()),
                                path: None,
                            }),
                            ..HttpFilter::default()
                        })
                        .collect(),
                    backend_refs: vec![backend],
                    ..HttpRule::default()
                })
            })
            .collect();
        let route = HttpRoute {
            metadata: meta(self.namespace, route_name, mapped.alb.clone()),
            spec: HttpRouteSpec {
                parent_refs: parents,
                hostnames: hostnames.clone(),
                rules,
            },
        };
        let mut notes_first = vec![format!("from Ingress {}/{}", self.namespace, self.name)];
        notes_first.extend(notes);
        let mut drafts = vec![Draft {
            notes: notes_first,
            object: document("HTTPRoute", &route),
        }];
        if redirect {
            let to_https = HttpRoute {
                metadata: meta(
                    self.namespace,
                    &format!("{route_name}-https-redirect"),
                    BTreeMap::new(),
                ),
                spec: HttpRouteSpec {
                    parent_refs: vec![parent(&http)],
                    hostnames,
                    rules: vec![HttpRule {
                        filters: vec![HttpFilter {
                            type_: "RequestRedirect".into(),
                            request_redirect: Some(RequestRedirect {
                                scheme: Some("https".into()),
                                status_code: Some(308),
                                ..RequestRedirect::default()
                            }),
                            ..HttpFilter::default()
                        }],
                        ..HttpRule::default()
                    }],
                },
            };
            drafts.push(Draft {
                notes: vec![format!(
                    "ingress-nginx's ssl-redirect for Ingress {}/{}: HTTP to HTTPS",
                    self.namespace, self.name
                )],
                object: document("HTTPRoute", &to_https),
            });
        }
        drafts
    }

    /// The backendRef of an Ingress backend; `None` (and a note) when it cannot be one.
    fn backend(&self, backend: &IngressBackend, notes: &mut Vec<String>) -> Option<BackendRef> {
        let Some(service) = &backend.service else {
            notes.push("a resource backend: not carried (Gateway API routes to Services)".into());
            return None;
        };
        let port = service.port.as_ref();
        let number = match (
            port.and_then(|p| p.number),
            port.and_then(|p| p.name.as_deref()),
        ) {
            (Some(n), _) => Some(n),
            (None, Some(port_name)) => self
                .inputs
                .services
                .get(&(self.namespace.to_owned(), service.name.clone()))
                .and_then(|s| s.spec.as_ref()?.ports.as_ref())
                .and_then(|ports| {
                    ports
                        .iter()
                        .find(|p| p.name.as_deref() == Some(port_name))
                        .map(|p| p.port)
                }),
            (None, None) => None,
        };
        let Some(number) = number else {
            notes.push(format!(
                "Service {}/{}: port {:?} not found (send the Service along to resolve named ports); its paths are left out",
                self.namespace,
                service.name,
                port.and_then(|p| p.name.clone()).unwrap_or_default()
            ));
            return None;
        };
        Some(BackendRef {
            name: service.name.clone(),
            port: Some(number),
            ..BackendRef::default()
        })
    }

    /// The application domain of the DexAuthenticator whose Service `auth-url` names.
    fn authenticator_domain(&self, annotations: &BTreeMap<String, String>) -> Option<String> {
        let url = annotations.get(&format!("{}auth-url", nginx::NGINX))?;
        self.inputs
            .authenticators
            .iter()
            .find(|((_, name), _)| url.contains(&format!("{name}-dex-authenticator")))
            .map(|(_, domain)| domain.clone())
    }
}

/// The path type of the rule a default backend adds to a host.
const DEFAULT_BACKEND: &str = "DefaultBackend";

/// The path match of an Ingress path.
fn path_match(path: Option<&str>, path_type: &str, regex: bool) -> PathMatch {
    let value = path.unwrap_or("/").to_owned();
    let type_ = match path_type {
        "Exact" => "Exact",
        DEFAULT_BACKEND => "PathPrefix",
        _ if regex => "RegularExpression",
        _ => "PathPrefix",
    };
    PathMatch {
        type_: Some(type_.into()),
        value: Some(value),
    }
}

fn meta(namespace: &str, name: &str, annotations: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        annotations: (!annotations.is_empty()).then_some(annotations),
        ..ObjectMeta::default()
    }
}

/// `object` as a document of `kind` (`gateway.networking.k8s.io/v1`, ReferenceGrants
/// `v1beta1`), without empty fields.
fn document(kind: &str, object: &impl serde::Serialize) -> serde_json::Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    prune(&mut value);
    if let serde_json::Value::Object(map) = &mut value {
        let version = if kind == "ReferenceGrant" {
            "v1beta1"
        } else {
            "v1"
        };
        map.insert(
            "apiVersion".into(),
            format!("{GATEWAY_GROUP}/{version}").into(),
        );
        map.insert("kind".into(), kind.into());
    }
    value
}

/// Drops nulls and empty lists and objects, recursively.
fn prune(value: &mut serde_json::Value) {
    use serde_json::Value;
    let empty = |v: &Value| match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    match value {
        Value::Object(map) => {
            for v in map.values_mut() {
                prune(v);
            }
            map.retain(|_, v| !empty(v));
        }
        Value::Array(items) => items.iter_mut().for_each(prune),
        _ => {}
    }
}
