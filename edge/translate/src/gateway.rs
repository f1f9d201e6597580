//! Gateways and their listeners: which Gateways are ours, which listeners are valid, their
//! conditions (Accepted, Conflicted, ResolvedRefs, Programmed) and the route kinds each accepts.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Secret;

use crate::refs::Grants;
use crate::status::{Condition, ListenerStatus};
use fairlead_edge_model::input::{GATEWAY_GROUP, Gateway, GroupKind, Input, Listener};
use fairlead_edge_model::names::{LISTEN_ADDRESS, ROUTE_STATISTICS, container_port};
use fairlead_key::ObjectKey;

/// Whether the Gateway asks for statistics per route rule.
pub fn route_statistics(gateway: &Gateway) -> bool {
    gateway
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ROUTE_STATISTICS))
        .is_some_and(|v| v == "true")
}

/// The addresses the Gateway's listeners bind (every address when empty): those its
/// `spec.addresses` ask for by value, else the one its annotation [`LISTEN_ADDRESS`] names;
/// an error naming the field when one is not an IP address, or asks for a type other than
/// `IPAddress` (the proxies bind IP addresses; an address asked for by type only is
/// assigned, not bound).
pub fn listen_addresses(gateway: &Gateway) -> Result<Vec<std::net::IpAddr>, String> {
    let mut asked = Vec::new();
    for (i, address) in gateway.spec.addresses.iter().enumerate() {
        let type_ = address.type_.as_deref().unwrap_or("IPAddress");
        if type_ != "IPAddress" {
            return Err(format!(
                "spec.addresses[{i}].type: {type_:?} is not supported; the proxies bind IP \
                 addresses (IPAddress)"
            ));
        }
        if address.value.is_empty() {
            continue;
        }
        let ip: std::net::IpAddr = address.value.parse().map_err(|_| {
            format!(
                "spec.addresses[{i}].value: {:?} is not an IP address",
                address.value
            )
        })?;
        if !asked.contains(&ip) {
            asked.push(ip);
        }
    }
    if !asked.is_empty() {
        return Ok(asked);
    }
    let Some(value) = gateway
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LISTEN_ADDRESS))
    else {
        return Ok(Vec::new());
    };
    value.parse().map(|ip| vec![ip]).map_err(|_| {
        format!("metadata.annotations[{LISTEN_ADDRESS}]: {value:?} is not an IP address")
    })
}

/// Why the Gateway is not accepted whatever its listeners (nothing of it is served): the
/// condition's reason and a message naming the field. An address it cannot be given
/// ([`listen_addresses`]: `UnsupportedAddress`); parameters, which class `d8-alb` does not take: its settings come
/// from the ALB instance naming the Gateway (`InvalidParameters`).
pub fn refused(gateway: &Gateway) -> Option<(&'static str, String)> {
    if let Err(problem) = listen_addresses(gateway) {
        return Some(("UnsupportedAddress", problem));
    }
    let parameters = gateway
        .spec
        .infrastructure
        .as_ref()
        .and_then(|i| i.parameters_ref.as_ref())?;
    Some((
        "InvalidParameters",
        format!(
            "spec.infrastructure.parametersRef: {} {:?} (group {:?}): the class takes no \
             parameters; an ALB instance naming the Gateway sets up its proxies",
            parameters.kind, parameters.name, parameters.group
        ),
    ))
}

/// A listener protocol the translator serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS terminated here.
    Https,
    /// TLS: passthrough by SNI.
    Tls,
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Protocol {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "HTTP" => Self::Http,
            "HTTPS" => Self::Https,
            "TLS" => Self::Tls,
            "TCP" => Self::Tcp,
            "UDP" => Self::Udp,
            _ => return None,
        })
    }

    /// The route kinds a listener of this protocol accepts (`passthrough`: a TLS listener
    /// that does not terminate). A terminating TLS listener also takes TCPRoutes, whose
    /// connections it decrypts and forwards as plain TCP — Deckhouse's "TLS termination then
    /// TCP".
    pub fn kinds(self, passthrough: bool) -> &'static [&'static str] {
        match self {
            Self::Http | Self::Https => &["HTTPRoute", "GRPCRoute"],
            Self::Tls if passthrough => &["TLSRoute"],
            Self::Tls => &["TLSRoute", "TCPRoute"],
            Self::Tcp => &["TCPRoute"],
            Self::Udp => &["UDPRoute"],
        }
    }

    /// What a listener of this protocol does with its port.
    fn port_class(self) -> PortClass {
        match self {
            Self::Http => PortClass::Http,
            Self::Https | Self::Tls | Self::Tcp => PortClass::Chains,
            Self::Udp => PortClass::Udp,
        }
    }

    /// Lower-case name, for Envoy resource names.
    pub fn name(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
            Self::Tls => "tls",
            Self::Tcp => "tcp",
            Self::Udp => "udp",
        }
    }
}

/// What a listener does with its port: listeners of different classes cannot share a port;
/// HTTPS, TLS and TCP listeners are each a filter chain of the port's Envoy listener, picked
/// by SNI, a TCP listener's (or one without a hostname) the default chain for connections no
/// name picks — so a TLS passthrough listener of a ListenerSet shares an instance's
/// additional TCP port (`tcp-port-N`), as Deckhouse's documentation publishes it. UDP does
/// not use the TCP port, so it shares a port number with anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum PortClass {
    /// Plain HTTP.
    Http,
    /// Filter chains: HTTPS, TLS and TCP.
    Chains,
    /// UDP.
    Udp,
}

/// A listener as resolved for translation.
#[derive(Clone, Debug)]
pub struct ResolvedListener {
    /// The listener's name.
    pub name: String,
    /// Port.
    pub port: u16,
    /// Protocol, when supported.
    pub protocol: Option<Protocol>,
    /// Hostname.
    pub hostname: Option<String>,
    /// TLS passthrough (TLS protocol).
    pub passthrough: bool,
    /// Certificates: `namespace/name` of valid TLS Secrets.
    pub certificates: Vec<ObjectKey>,
    /// How clients' certificates are checked (the Gateway's frontend TLS for the port).
    pub client_validation: Option<std::sync::Arc<crate::frontend::ClientValidation>>,
    /// Route kinds accepted.
    pub kinds: Vec<GroupKind>,
    /// `allowedRoutes.namespaces`.
    pub namespaces: fairlead_edge_model::input::NamespacesFrom,
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// Routes attached.
    pub attached: i32,
    /// The ListenerSet (`namespace/name`) that declares it; `None` for the Gateway's own.
    pub set: Option<ObjectKey>,
    /// The namespace of its declaring object (what `allowedRoutes: Same` means).
    pub home: String,
}

impl ResolvedListener {
    /// A name unique within the Gateway (listener names are unique only within their
    /// Gateway or ListenerSet).
    pub fn envoy_name(&self) -> String {
        match &self.set {
            Some(set) => format!("{set}/{}", self.name),
            None => self.name.clone(),
        }
    }

    /// Whether routes are served through it.
    pub fn programmed(&self) -> bool {
        self.conditions
            .iter()
            .any(|c| c.type_ == "Programmed" && c.holds())
    }

    /// Its status entry.
    pub fn status(&self) -> ListenerStatus {
        ListenerStatus {
            name: self.name.clone(),
            supported_kinds: self.kinds.clone(),
            attached_routes: self.attached,
            conditions: self.conditions.clone(),
        }
    }
}

/// A Secret holds a usable certificate: type `kubernetes.io/tls` with both keys.
pub fn tls_secret<'a>(input: &'a Input, namespace: &str, name: &str) -> Option<&'a Secret> {
    crate::refs::secret(input, namespace, name).filter(|s| {
        s.type_.as_deref() == Some("kubernetes.io/tls")
            && s.data.as_ref().is_some_and(|d| {
                d.get("tls.crt").is_some_and(|v| !v.0.is_empty())
                    && d.get("tls.key").is_some_and(|v| !v.0.is_empty())
            })
    })
}

/// Who declares a listener: the Gateway or one of its ListenerSets. It is the referrer of the
/// listener's certificates (ReferenceGrants are not inherited) and the namespace of
/// `allowedRoutes: Same`.
#[derive(Clone, Debug)]
pub struct Owner {
    /// `Gateway` or `ListenerSet`.
    pub kind: &'static str,
    /// Its namespace.
    pub namespace: String,
    /// The ListenerSet's `namespace/name`.
    pub set: Option<ObjectKey>,
    /// Its generation.
    pub generation: Option<i64>,
}

/// Resolves a list of listeners in precedence order (the Gateway's, then its ListenerSets
/// oldest first, then by namespace/name); earlier listeners win conflicts.
pub fn resolve(
    gateway: &Gateway,
    listeners: &[(&Listener, Owner)],
    input: &Input,
    grants: &Grants<'_>,
) -> Vec<ResolvedListener> {
    let mut resolved: Vec<ResolvedListener> = listeners
        .iter()
        .map(|(l, owner)| one(gateway, l, owner, input, grants))
        .collect();
    conflicts(
        &mut resolved,
        &listeners
            .iter()
            .map(|(_, o)| o.generation)
            .collect::<Vec<_>>(),
    );
    resolved
}

fn one(
    gateway: &Gateway,
    listener: &Listener,
    owner: &Owner,
    input: &Input,
    grants: &Grants<'_>,
) -> ResolvedListener {
    let (owner_kind, owner_namespace) = (owner.kind, owner.namespace.as_str());
    let generation = owner.generation;
    let tls = listener.tls.clone().unwrap_or_default();
    let passthrough = tls.mode.as_deref() == Some("Passthrough");
    // An HTTPS listener in Passthrough mode, as Deckhouse's documentation and templates
    // write TLS passthrough on 443: served as the TLS passthrough listener it means (the
    // upstream CRDs refuse the form; Deckhouse's admit it).
    let protocol = match Protocol::parse(&listener.protocol) {
        Some(Protocol::Https) if passthrough => Some(Protocol::Tls),
        protocol => protocol,
    };
    let mut conditions = Vec::new();
    let mut refs_problem: Option<(&str, String)> = None;
    let port = u16::try_from(listener.port).ok().filter(|p| *p > 0);
    match (protocol, port) {
        (None, _) => conditions.push(Condition::new(
            "Accepted",
            false,
            "UnsupportedProtocol",
            format!("protocol {} is not supported", listener.protocol),
            generation,
        )),
        (_, None) => conditions.push(Condition::new(
            "Accepted",
            false,
            "PortUnavailable",
            format!("port {} is out of range", listener.port),
            generation,
        )),
        _ if listener
            .hostname
            .as_deref()
            .is_some_and(|h| !h.is_empty() && !crate::hostname::valid(h)) =>
        {
            conditions.push(Condition::new(
                "Accepted",
                false,
                "UnsupportedValue",
                format!(
                    "hostname {:?} is not a hostname (lowercase RFC 1123 labels, optionally behind *.)",
                    listener.hostname.as_deref().unwrap_or_default()
                ),
                generation,
            ));
        }
        _ => conditions.push(Condition::new(
            "Accepted",
            true,
            "Accepted",
            "listener accepted",
            generation,
        )),
    }
    let mut certificates = Vec::new();
    let needs_certificates =
        protocol == Some(Protocol::Https) || (protocol == Some(Protocol::Tls) && !passthrough);
    if needs_certificates {
        if tls.certificate_refs.is_empty() {
            refs_problem = Some((
                "InvalidCertificateRef",
                "tls.certificateRefs is empty".into(),
            ));
        }
        for (i, r) in tls.certificate_refs.iter().enumerate() {
            let group = r.group.as_deref().unwrap_or_default();
            let kind = r.kind.as_deref().unwrap_or("Secret");
            let namespace = r.namespace.as_deref().unwrap_or(owner_namespace);
            let problem = if !group.is_empty() || kind != "Secret" {
                Some((
                    "InvalidCertificateRef",
                    format!("tls.certificateRefs[{i}]: {group}/{kind} is not a Secret"),
                ))
            } else if !grants.allows(
                (GATEWAY_GROUP, owner_kind, owner_namespace),
                ("", "Secret", namespace, &r.name),
            ) {
                Some((
                    "RefNotPermitted",
                    format!(
                        "tls.certificateRefs[{i}]: Secret {namespace}/{} needs a ReferenceGrant",
                        r.name
                    ),
                ))
            } else {
                match tls_secret(input, namespace, &r.name) {
                    None => Some((
                        "InvalidCertificateRef",
                        format!(
                            "tls.certificateRefs[{i}]: Secret {namespace}/{} is missing or not a kubernetes.io/tls Secret with tls.crt and tls.key",
                            r.name
                        ),
                    )),
                    Some(secret) => {
                        let data = secret.data.as_ref();
                        let bytes = |k: &str| {
                            data.and_then(|d| d.get(k))
                                .map_or(&[][..], |v| v.0.as_slice())
                        };
                        match crate::certificate::problem(bytes("tls.crt"), bytes("tls.key")) {
                            Some(why) => Some((
                                "InvalidCertificateRef",
                                format!(
                                    "tls.certificateRefs[{i}]: Secret {namespace}/{}: {why}",
                                    r.name
                                ),
                            )),
                            None => {
                                certificates.push(ObjectKey::new(namespace, r.name.clone()));
                                None
                            }
                        }
                    }
                }
            };
            if refs_problem.is_none() {
                refs_problem = problem;
            }
        }
    }
    // Clients' certificates, as the Gateway's frontend TLS asks on the port: a port whose CA
    // references all fail is not served (never without the check asked for).
    let client_validation = match (needs_certificates, port) {
        (true, Some(port)) => match crate::frontend::of(gateway, port, input, grants) {
            Ok(validation) => validation,
            Err(refused) => {
                for c in conditions
                    .iter_mut()
                    .filter(|c| c.type_ == "Accepted" && c.holds())
                {
                    *c = Condition::new(
                        "Accepted",
                        false,
                        "NoValidCACertificate",
                        refused.message.clone(),
                        generation,
                    );
                }
                refs_problem.get_or_insert((refused.reason, refused.message));
                None
            }
        },
        _ => None,
    };
    let allowed = listener.allowed_routes.clone().unwrap_or_default();
    let supported = protocol.map_or(&[][..], |p| p.kinds(passthrough));
    let kinds: Vec<GroupKind> = if allowed.kinds.is_empty() {
        supported
            .iter()
            .map(|k| GroupKind {
                group: Some(GATEWAY_GROUP.into()),
                kind: (*k).into(),
            })
            .collect()
    } else {
        let mut valid = Vec::new();
        for k in &allowed.kinds {
            let group = k.group.as_deref().unwrap_or(GATEWAY_GROUP);
            if group == GATEWAY_GROUP && supported.contains(&k.kind.as_str()) {
                valid.push(GroupKind {
                    group: Some(GATEWAY_GROUP.into()),
                    kind: k.kind.clone(),
                });
            } else if refs_problem.is_none() {
                refs_problem = Some((
                    "InvalidRouteKinds",
                    format!(
                        "allowedRoutes.kinds: {group}/{} is not supported on {}",
                        k.kind, listener.protocol
                    ),
                ));
            }
        }
        valid
    };
    conditions.push(match &refs_problem {
        Some((reason, message)) => {
            Condition::new("ResolvedRefs", false, reason, message.clone(), generation)
        }
        None => Condition::new(
            "ResolvedRefs",
            true,
            "ResolvedRefs",
            "references resolved",
            generation,
        ),
    });
    ResolvedListener {
        name: listener.name.clone(),
        port: port.unwrap_or_default(),
        protocol,
        hostname: listener.hostname.clone().filter(|h| !h.is_empty()),
        passthrough,
        certificates,
        client_validation,
        kinds,
        namespaces: allowed.namespaces.unwrap_or_default(),
        conditions,
        attached: 0,
        set: owner.set.clone(),
        home: owner.namespace.clone(),
    }
}

/// Marks conflicts: on one port, protocols of different classes (ProtocolConflict); within a
/// class, the same hostname twice (HostnameConflict). The first owner (the Gateway, then
/// ListenerSets oldest first, as GEP-1713 orders them) whose listeners on a port are of one
/// class claims it: a later owner's listeners of another class conflict, its others serve;
/// an owner before it with several classes has no winner (all of them conflict, as the spec
/// says of one Gateway).
fn conflicts(listeners: &mut [ResolvedListener], generations: &[Option<i64>]) {
    let mut by_port: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        if l.protocol.is_some() && l.port > 0 {
            by_port.entry(l.port).or_default().push(i);
        }
    }
    // Listeners on a port that a privileged port of the same kind (TCP or UDP) moves to.
    let mut shadowed: BTreeMap<usize, u16> = BTreeMap::new();
    for (i, l) in listeners.iter().enumerate() {
        let udp = l.protocol == Some(Protocol::Udp);
        let Some(below) = l.port.checked_sub(10_000).filter(|b| *b > 0 && *b < 1024) else {
            continue;
        };
        let taken = by_port.get(&below).is_some_and(|others| {
            others
                .iter()
                .any(|o| (listeners[*o].protocol == Some(Protocol::Udp)) == udp)
        });
        if taken && container_port(below) == l.port {
            shadowed.insert(i, below);
        }
    }
    let mut reasons: BTreeMap<usize, (&str, String)> = BTreeMap::new();
    for indices in by_port.values() {
        // Protocols of different classes on one port. Within one owner (the Gateway, or one
        // ListenerSet) no listener wins: all of them are conflicted, as the spec says. Between
        // owners, the first in precedence order with one class claims the port (GEP-1713), so
        // a ListenerSet cannot take a port from its Gateway or an older set.
        let mut owners: Vec<(&Option<ObjectKey>, BTreeSet<PortClass>)> = Vec::new();
        for i in indices {
            let l = &listeners[*i];
            let Some(class) = l
                .protocol
                .map(Protocol::port_class)
                .filter(|c| *c != PortClass::Udp)
            else {
                continue;
            };
            match owners.iter_mut().find(|(o, _)| **o == l.set) {
                Some((_, classes)) => {
                    classes.insert(class);
                }
                None => owners.push((&l.set, BTreeSet::from([class]))),
            }
        }
        // The first owner with one class claims the port; the owners before it are torn
        // (several classes of their own); those after it are judged by the claim alone, so
        // a ListenerSet's listeners of the claimed class keep serving beside one that
        // conflicts.
        let claim_at = owners.iter().position(|(_, classes)| classes.len() == 1);
        let claim = claim_at.and_then(|at| {
            let (owner, classes) = &owners[at];
            Some(((*owner).clone(), *classes.first()?))
        });
        let torn: Vec<Option<ObjectKey>> = owners
            .iter()
            .take(claim_at.unwrap_or(owners.len()))
            .map(|(owner, _)| (*owner).clone())
            .collect();
        let mut seen: BTreeMap<(PortClass, String), usize> = BTreeMap::new();
        for i in indices {
            let l = &listeners[*i];
            let class = l.protocol.map_or(PortClass::Http, Protocol::port_class);
            let message = if class == PortClass::Udp {
                None
            } else if torn.contains(&l.set) {
                Some(format!(
                    "port {} is used with incompatible protocols by listeners of the same {}",
                    l.port,
                    if l.set.is_some() {
                        "ListenerSet"
                    } else {
                        "Gateway"
                    }
                ))
            } else if claim
                .as_ref()
                .is_some_and(|(owner, c)| *c != class && *owner != l.set)
            {
                Some(format!(
                    "port {} is already used by an earlier listener with an incompatible protocol",
                    l.port
                ))
            } else {
                None
            };
            if let Some(message) = message {
                reasons.insert(*i, ("ProtocolConflict", message));
                continue;
            }
            let host = l.hostname.clone().unwrap_or_default();
            if let Some(first) = seen.get(&(class, host.clone())) {
                reasons.insert(
                    *i,
                    (
                        "HostnameConflict",
                        format!(
                            "listener {} already serves port {} for hostname {:?}",
                            listeners[*first].envoy_name(),
                            l.port,
                            if host.is_empty() { "*" } else { &host }
                        ),
                    ),
                );
            } else {
                seen.insert((class, host), *i);
            }
        }
    }
    // HTTPS listeners of one port whose hostnames overlap (a wildcard and a name it covers):
    // served, but a client's HTTP/2 connection to one may be reused for the other, so both
    // say OverlappingTLSConfig (set only when it holds).
    let mut overlapping: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for indices in by_port.values() {
        let https: Vec<(usize, Option<&str>)> = indices
            .iter()
            .filter(|i| listeners[**i].protocol == Some(Protocol::Https))
            .filter(|i| !reasons.contains_key(i))
            .map(|i| (*i, listeners[*i].hostname.as_deref()))
            .collect();
        // `None` (any host) covers every name; a wildcard covers the names below it.
        let covers = |x: Option<&str>, y: Option<&str>| match (x, y) {
            (None, Some(_)) => true,
            (Some(x), Some(y)) => x != y && crate::hostname::specificity(Some(x), y).is_some(),
            _ => false,
        };
        for (a, (i, h)) in https.iter().enumerate() {
            for (j, g) in &https[a + 1..] {
                if covers(*h, *g) || covers(*g, *h) {
                    overlapping
                        .entry(*i)
                        .or_default()
                        .push(listeners[*j].name.clone());
                    overlapping
                        .entry(*j)
                        .or_default()
                        .push(listeners[*i].name.clone());
                }
            }
        }
    }
    for (i, l) in listeners.iter_mut().enumerate() {
        let generation = generations.get(i).copied().flatten();
        if let Some(others) = overlapping.get(&i) {
            l.conditions.push(Condition::new(
                "OverlappingTLSConfig",
                true,
                "OverlappingHostnames",
                format!(
                    "hostname {} overlaps listener(s) {} on port {}",
                    l.hostname.as_deref().unwrap_or("(any)"),
                    others.join(", "),
                    l.port
                ),
                generation,
            ));
        }
        // A port where Envoy serves a port below 1024 of the same Gateway (10080 beside 80)
        // cannot be bound as well.
        if let Some(below) = shadowed.get(&i) {
            for c in l.conditions.iter_mut().filter(|c| c.type_ == "Accepted") {
                *c = Condition::new(
                    "Accepted",
                    false,
                    "PortUnavailable",
                    format!(
                        "port {} is where the proxies serve port {below} (ports below 1024 move up by 10000, as the proxies run without privileges); use another port",
                        l.port
                    ),
                    generation,
                );
            }
        }
        let conflict = reasons.get(&i);
        // A conflicted listener makes no configuration: not accepted, for the conflict's
        // reason.
        if let Some((reason, message)) = conflict {
            for c in l
                .conditions
                .iter_mut()
                .filter(|c| c.type_ == "Accepted" && c.holds())
            {
                *c = Condition::new("Accepted", false, reason, message.clone(), generation);
            }
        }
        l.conditions.push(match conflict {
            Some((reason, message)) => {
                Condition::new("Conflicted", true, reason, message.clone(), generation)
            }
            None => Condition::new(
                "Conflicted",
                false,
                "NoConflicts",
                "no conflicts",
                generation,
            ),
        });
        let accepted = l
            .conditions
            .iter()
            .any(|c| c.type_ == "Accepted" && c.holds());
        // Unsupported kinds in allowedRoutes are reported, but the listener still serves the
        // kinds it does support.
        // Nor does a certificate reference that does not resolve stop the listener while
        // another of its certificates does: those keep serving.
        let resolved = l.conditions.iter().any(|c| {
            c.type_ == "ResolvedRefs"
                && (c.holds()
                    || (c.reason == "InvalidRouteKinds" && !l.kinds.is_empty())
                    || (matches!(
                        c.reason.as_str(),
                        "InvalidCertificateRef" | "RefNotPermitted"
                    ) && !l.certificates.is_empty()))
        });
        let ok = accepted && resolved && conflict.is_none();
        l.conditions.push(match (ok, conflict) {
            (true, _) => Condition::new(
                "Programmed",
                true,
                "Programmed",
                "listener programmed",
                generation,
            ),
            (false, Some((reason, message))) => {
                Condition::new("Programmed", false, reason, message.clone(), generation)
            }
            (false, None) => Condition::new(
                "Programmed",
                false,
                "Invalid",
                "listener is not valid; see its other conditions",
                generation,
            ),
        });
    }
}

/// The client certificate the Gateway's proxies present to backends that ask for one
/// (`spec.tls.backend.clientCertificateRef`, a `kubernetes.io/tls` Secret checked as Envoy
/// loads it; another namespace's only with a ReferenceGrant): `Ok(None)` when it names none;
/// else the Secret, or the `ResolvedRefs` reason and what is wrong.
pub fn backend_client_certificate(
    gateway: &Gateway,
    input: &Input,
    grants: &Grants<'_>,
) -> Result<Option<ObjectKey>, (&'static str, String)> {
    let Some(r) = gateway
        .spec
        .tls
        .as_ref()
        .and_then(|t| t.backend.as_ref())
        .and_then(|b| b.client_certificate_ref.as_ref())
    else {
        return Ok(None);
    };
    const FIELD: &str = "spec.tls.backend.clientCertificateRef";
    const INVALID: &str = "InvalidClientCertificateRef";
    let group = r.group.as_deref().unwrap_or_default();
    let kind = r.kind.as_deref().unwrap_or("Secret");
    let own = gateway.metadata.namespace.as_deref().unwrap_or_default();
    let namespace = r.namespace.as_deref().unwrap_or(own);
    if !group.is_empty() || kind != "Secret" {
        return Err((INVALID, format!("{FIELD}: {group}/{kind} is not a Secret")));
    }
    if !grants.allows(
        (GATEWAY_GROUP, "Gateway", own),
        ("", "Secret", namespace, &r.name),
    ) {
        return Err((
            "RefNotPermitted",
            format!(
                "{FIELD}: Secret {namespace}/{} needs a ReferenceGrant in its namespace",
                r.name
            ),
        ));
    }
    let Some(secret) = tls_secret(input, namespace, &r.name) else {
        return Err((
            INVALID,
            format!(
                "{FIELD}: Secret {namespace}/{} is missing or not a kubernetes.io/tls Secret with tls.crt and tls.key",
                r.name
            ),
        ));
    };
    let bytes = |k: &str| {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(k))
            .map_or(&[][..], |v| v.0.as_slice())
    };
    match crate::certificate::problem(bytes("tls.crt"), bytes("tls.key")) {
        Some(why) => Err((
            INVALID,
            format!("{FIELD}: Secret {namespace}/{}: {why}", r.name),
        )),
        None => Ok(Some(ObjectKey::new(namespace, r.name.clone()))),
    }
}

/// `namespace/name` of a Gateway.
pub fn key(gateway: &Gateway) -> ObjectKey {
    fairlead_edge_model::input::key(&gateway.metadata)
}
