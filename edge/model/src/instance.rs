//! What the ALB instance controlling a Gateway asks of its listeners (pure). The Gateway's
//! label `alb.deckhouse.io/instance: <kind>.<name>` (the gateway controller sets it) names
//! the instance; its settings become:
//!
//! - `acceptRequestsFrom` → an RBAC network filter first on every TCP filter chain,
//!   allowing only connections whose real peer (`direct_remote_ip`, not an address a header
//!   or the PROXY protocol claims) is in one of the ranges;
//! - `useProxyProtocol` → the PROXY protocol listener filter first on every TCP listener: the
//!   client's address is the one the load balancer in front reports;
//! - `originalIPDetection` → the client's address from `realIPHeader`, believed only from
//!   peers in `setRealIPFrom`: `X-Forwarded-For` through Envoy's `xff` extension with those
//!   trusted ranges; any other header through the `custom_header` extension, on filter chains
//!   that match only those peers (`direct_source_prefix_ranges`), the others keeping the
//!   connection's address. Never together with `use_remote_address` (Envoy refuses both).
//!
//! - `enableHTTP3` → beside each port terminating HTTPS, a QUIC listener on the same UDP
//!   port serving the same routes over HTTP/3, advertised to TCP clients by `alt-svc`.
//!
//! - `openTelemetry.tracing` → the [`Collector`] the proxies' spans go to: its bootstrap
//!   cluster (the gateway controller renders it) and, for OTLP/HTTP, the URI the connection
//!   managers' tracer posts to.
//!
//! - `geoIP.headers` → Envoy's GeoIP filter (MaxMind provider) before the router in every
//!   connection manager, looking up the client's address as the connection manager found it
//!   (so `originalIPDetection` holds for it too), in the databases of the named editions
//!   (the commercial edition where two fill one provider path), setting the headers a
//!   database serves ([`GeoIp`]). Client-sent headers of those names are removed first, by
//!   the connection manager's early header mutation, on every proxy: the filter sets a header
//!   only when its lookup finds something.
//!
//! A Gateway no instance controls keeps the defaults: every peer, no PROXY protocol, the
//! connection's address, spans to no collector, no GeoIP.

use std::collections::BTreeMap;

use fairlead_edge_api::geoip::{Edition, Field, Slot, by_slot};
use serde::Serialize;

use crate::input::{Gateway, Input};

/// An address range.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Cidr {
    /// Its address.
    pub address: String,
    /// Its prefix length.
    pub prefix: u32,
}

impl Cidr {
    /// `10.0.0.0/8` (an address alone is a /32 or /128); `None` when it is not one.
    pub fn parse(text: &str) -> Option<Self> {
        let (address, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u32>().ok()?)),
            None => (text, None),
        };
        let ip: std::net::IpAddr = address.trim().parse().ok()?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        (prefix <= max).then(|| Self {
            address: ip.to_string(),
            prefix,
        })
    }
}

/// Where the client's address comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RealIp {
    /// `X-Forwarded-For`, trusting these peers' entries.
    ForwardedFor {
        /// The peers (and hops) whose entries are believed.
        trusted: Vec<Cidr>,
    },
    /// A header carrying one address, from these peers only.
    Header {
        /// The header's name, lower-case.
        name: String,
        /// The peers whose header is believed.
        trusted: Vec<Cidr>,
    },
}

/// What the instance asks of a Gateway's listeners.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// Connections are taken only from these peers (all when empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub accept_from: Vec<Cidr>,
    /// A PROXY protocol header starts every connection.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub proxy_protocol: bool,
    /// Where the client's address comes from (the connection's when `None`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub real_ip: Option<RealIp>,
    /// HTTPS ports also serve HTTP/3 (QUIC on the same UDP port, advertised by `alt-svc`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub http3: bool,
    /// The port clients dial for the Gateway's port 443 (the inlet's `httpsPort`), which
    /// `alt-svc` names; 443 when the inlet says nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub https_port: Option<u16>,
    /// Spans are posted over OTLP/HTTP to this URI (through the bootstrap's collector
    /// cluster); OTLP/gRPC when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub otlp_http_uri: Option<String>,
    /// Geolocation headers.
    #[serde(rename = "geoIP", skip_serializing_if = "Option::is_none")]
    pub geoip: Option<GeoIp>,
    /// `/healthz` answers a load balancer's health check (an instance's Gateway): 200 while
    /// the proxy serves, 503 once it drains.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub health_check: bool,
}

/// What `spec.geoIP` asks of the connection managers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GeoIp {
    /// The edition whose database fills each provider path a header reads.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub databases: BTreeMap<Slot, Edition>,
    /// The headers Envoy's filter sets (lower-case), by field: those a database serves.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<Field, String>,
    /// Headers removed from every request before anything reads it: every one named, lower
    /// case.
    pub removed: Vec<String>,
}

impl GeoIp {
    /// What `spec` asks, when it names headers, of an instance whose client address comes
    /// from `real_ip_header`: the databases serving them (no other: Envoy opens every one
    /// it is given). A field no named edition serves is left out (the CRD refuses such a
    /// spec; Envoy would look up a database it does not have), and so are unknown editions
    /// and fields, and headers the admission webhook refuses
    /// ([`fairlead_edge_api::geoip::header_problems`]: removing them would break requests).
    pub fn of(
        spec: &fairlead_edge_api::types::GeoIp,
        real_ip_header: Option<&str>,
    ) -> Option<Self> {
        let given = spec.headers.as_ref().filter(|h| !h.is_empty())?;
        let named: BTreeMap<&String, &String> = given
            .iter()
            .filter(|(field, header)| {
                let one = BTreeMap::from([((*field).clone(), (*header).clone())]);
                fairlead_edge_api::geoip::header_problems(&one, real_ip_header).is_empty()
            })
            .collect();
        let editions: Vec<Edition> = spec
            .maxmind_edition_ids
            .iter()
            .flatten()
            .filter_map(|id| id.parse().ok())
            .collect();
        let available: BTreeMap<Slot, Edition> = by_slot(&editions).into_iter().collect();
        let mut databases = BTreeMap::new();
        let headers = named
            .iter()
            .filter_map(|(key, header)| {
                let field: Field = key.parse().ok()?;
                // The provider's first choice among the databases there are.
                let slot = field.slots().iter().find(|s| available.contains_key(s))?;
                databases.insert(*slot, available[slot]);
                Some((field, header.trim().to_ascii_lowercase()))
            })
            .collect();
        let mut removed: Vec<String> = named
            .values()
            .map(|h| h.trim().to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        removed.sort();
        removed.dedup();
        Some(Self {
            databases,
            headers,
            removed,
        })
    }

    /// Whether Envoy's filter runs: some header is served by a database.
    pub fn filters(&self) -> bool {
        !self.headers.is_empty()
    }

    /// The editions a proxy must hold before it is given the filter (Envoy does not load a
    /// provider whose database file is missing); none when no filter runs.
    pub fn editions(&self) -> Vec<Edition> {
        if self.filters() {
            self.databases.values().copied().collect()
        } else {
            Vec::new()
        }
    }

    /// The same without the filter, for proxies that lack a database: the removals stay.
    pub fn without_filter(&self) -> Self {
        Self {
            databases: BTreeMap::new(),
            headers: BTreeMap::new(),
            removed: self.removed.clone(),
        }
    }
}

/// Where an instance's proxies send their spans (`openTelemetry.tracing`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Collector {
    /// Its host: a Service's `<name>.<namespace>.svc`, or the URL's host.
    pub host: String,
    /// Its port (4317 for gRPC and 4318 for HTTP when none is given).
    pub port: u16,
    /// OTLP/HTTP to this path; OTLP/gRPC when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_path: Option<String>,
    /// TLS to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<CollectorTls>,
}

/// TLS to a collector.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectorTls {
    /// The name its certificate must carry (SNI): `tls.sni`, else its host.
    pub sni: String,
    /// The Secret (key `cacert`, in the Gateway's namespace) of the CA it chains to; the
    /// system's trust store when `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_secret: Option<String>,
}

impl Collector {
    /// The URI OTLP/HTTP posts to.
    pub fn http_uri(&self) -> Option<String> {
        let path = self.http_path.as_ref()?;
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        Some(format!("{scheme}://{}:{}{path}", self.host, self.port))
    }
}

/// The key of the CA certificate in a collector's CA Secret.
pub const COLLECTOR_CA_KEY: &str = "cacert";

/// The collector `spec.openTelemetry.tracing` names for a Gateway in `namespace` (a Service
/// without a namespace is in the Gateway's), or why it names none that can be used.
pub fn collector(
    spec: &fairlead_edge_api::InstanceSpec,
    namespace: &str,
) -> Result<Option<Collector>, String> {
    let Some(tracing) = spec
        .open_telemetry
        .as_ref()
        .and_then(|o| o.tracing.as_ref())
    else {
        return Ok(None);
    };
    let http = tracing.protocol.as_deref() == Some("HTTP");
    let default_port = if http { 4318 } else { 4317 };
    let (host, port, url_path, https) = match (&tracing.url, &tracing.service) {
        (Some(url), _) => {
            let parsed = url::Url::parse(url).map_err(|e| {
                format!("spec.openTelemetry.tracing.url: {url:?} is not a URL: {e}")
            })?;
            let https = match parsed.scheme() {
                "http" => false,
                "https" => true,
                other => {
                    return Err(format!(
                        "spec.openTelemetry.tracing.url: scheme {other:?} is neither http nor https"
                    ));
                }
            };
            let host = parsed
                .host_str()
                .ok_or_else(|| format!("spec.openTelemetry.tracing.url: {url:?} has no host"))?
                .trim_matches(['[', ']'])
                .to_owned();
            let path = Some(parsed.path()).filter(|p| *p != "/").map(str::to_owned);
            (host, parsed.port().unwrap_or(default_port), path, https)
        }
        (None, Some(service)) => {
            let namespace = service.namespace.as_deref().unwrap_or(namespace);
            let port = match tracing.port {
                Some(p) => u16::try_from(p)
                    .map_err(|_| format!("spec.openTelemetry.tracing.port: {p} is not a port"))?,
                None => default_port,
            };
            (
                format!("{}.{namespace}.svc", service.name),
                port,
                None,
                false,
            )
        }
        (None, None) => {
            return Err(
                "spec.openTelemetry.tracing: neither service nor url names the collector".into(),
            );
        }
    };
    let tls = (https || tracing.tls.is_some()).then(|| {
        let given = tracing.tls.as_ref();
        CollectorTls {
            sni: given
                .and_then(|t| t.sni.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| host.clone()),
            ca_secret: given
                .and_then(|t| t.ca_secret_name.clone())
                .filter(|s| !s.is_empty()),
        }
    });
    let http_path = http.then(|| {
        tracing
            .path
            .clone()
            .filter(|p| !p.is_empty())
            .or(url_path)
            .unwrap_or_else(|| "/v1/traces".into())
    });
    Ok(Some(Collector {
        host,
        port,
        http_path,
        tls,
    }))
}

impl Settings {
    /// The port clients dial for the Gateway port `port`: the inlet's HTTPS port for 443,
    /// the port itself otherwise.
    pub fn exposed(&self, port: u16) -> u16 {
        match (port, self.https_port) {
            (443, Some(exposed)) => exposed,
            _ => port,
        }
    }
}

impl Settings {
    /// Whether nothing is asked (beyond where clients reach it).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// Whether `gateway` is an ALB instance's (labelled with its instance).
pub fn managed(gateway: &Gateway) -> bool {
    gateway
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(fairlead_edge_api::INSTANCE_LABEL))
}

/// The settings of the instance controlling `gateway` (the defaults when none does).
pub fn of(gateway: &Gateway, input: &Input) -> Settings {
    let Some(label) = gateway
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(fairlead_edge_api::INSTANCE_LABEL))
    else {
        return Settings::default();
    };
    let Some((kind, name)) = label.split_once('.') else {
        return Settings::default();
    };
    let namespace = gateway.metadata.namespace.as_deref();
    let Some(instance) = input.instances.iter().find(|i| {
        i.kind == kind
            && i.metadata.name.as_deref() == Some(name)
            && (kind == "ClusterALBInstance" || i.metadata.namespace.as_deref() == namespace)
    }) else {
        return Settings::default();
    };
    let spec = &instance.spec;
    let ranges = |list: Option<&Vec<String>>| -> Vec<Cidr> {
        let mut ranges: Vec<Cidr> = list
            .into_iter()
            .flatten()
            .filter_map(|c| Cidr::parse(c))
            .collect();
        ranges.sort();
        ranges.dedup();
        ranges
    };
    let real_ip = spec.original_ip_detection.as_ref().and_then(|d| {
        let header = d.real_ip_header.as_deref()?.trim().to_ascii_lowercase();
        let trusted = ranges(d.set_real_ip_from.as_ref());
        // Believed from nobody is the connection's address; so is a header that is no header
        // (the admission webhook refuses it; objects read from files never met it).
        if !fairlead_edge_api::geoip::is_header_name(&header) || trusted.is_empty() {
            return None;
        }
        Some(if header == "x-forwarded-for" {
            RealIp::ForwardedFor { trusted }
        } else {
            RealIp::Header {
                name: header,
                trusted,
            }
        })
    });
    let mut accept_from = ranges(spec.accept_requests_from.as_ref());
    if accept_from.is_empty()
        && spec
            .accept_requests_from
            .as_ref()
            .is_some_and(|l| !l.is_empty())
    {
        // Ranges given but none readable (the CRD refuses such a list): nobody, rather than
        // everybody. No connection comes from 0.0.0.0.
        accept_from = vec![Cidr {
            address: "0.0.0.0".into(),
            prefix: 32,
        }];
    }
    Settings {
        health_check: true,
        accept_from,
        proxy_protocol: spec.use_proxy_protocol == Some(true),
        real_ip,
        http3: spec.enable_http3 == Some(true),
        https_port: spec.inlet.as_ref().and_then(|inlet| {
            let port = inlet
                .load_balancer
                .as_ref()
                .and_then(|lb| lb.https_port)
                .or(inlet.host_port.as_ref().and_then(|h| h.https_port))?;
            u16::try_from(port).ok().filter(|p| *p != 0 && *p != 443)
        }),
        otlp_http_uri: collector(spec, namespace.unwrap_or_default())
            .ok()
            .flatten()
            .and_then(|c| c.http_uri()),
        geoip: spec.geo_ip.as_ref().and_then(|g| {
            let real_ip = spec
                .original_ip_detection
                .as_ref()
                .and_then(|d| d.real_ip_header.as_deref());
            GeoIp::of(g, real_ip)
        }),
    }
}

impl Settings {
    /// The editions a proxy must hold to be served these settings ([`GeoIp::editions`]).
    pub fn geoip_editions(&self) -> Vec<Edition> {
        self.geoip.as_ref().map(GeoIp::editions).unwrap_or_default()
    }

    /// The same without Envoy's GeoIP filter ([`GeoIp::without_filter`]).
    pub fn without_geoip_filter(&self) -> Self {
        Self {
            geoip: self.geoip.as_ref().map(GeoIp::without_filter),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracing(value: serde_json::Value) -> fairlead_edge_api::InstanceSpec {
        serde_json::from_value(serde_json::json!({"gatewayName": "main",
            "openTelemetry": {"tracing": value}}))
        .unwrap()
    }

    #[test]
    fn the_collector_is_a_service_or_a_url_over_grpc_or_http_with_tls() {
        let grpc = collector(
            &tracing(serde_json::json!({"service": {"name": "otel"}})),
            "d8-alb",
        );
        assert_eq!(
            grpc,
            Ok(Some(Collector {
                host: "otel.d8-alb.svc".into(),
                port: 4317,
                http_path: None,
                tls: None
            }))
        );
        let http = collector(
            &tracing(
                serde_json::json!({"service": {"name": "otel", "namespace": "monitoring"},
                "port": 4318, "protocol": "HTTP", "tls": {"caSecretName": "otel-ca"}}),
            ),
            "d8-alb",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            http.http_uri().as_deref(),
            Some("https://otel.monitoring.svc:4318/v1/traces")
        );
        assert_eq!(
            http.tls,
            Some(CollectorTls {
                sni: "otel.monitoring.svc".into(),
                ca_secret: Some("otel-ca".into())
            })
        );
        let url = collector(
            &tracing(
                serde_json::json!({"url": "https://collector.example.com/custom/traces",
                "protocol": "HTTP", "tls": {"sni": "otel.example.com"}}),
            ),
            "d8-alb",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            url.http_uri().as_deref(),
            Some("https://collector.example.com:4318/custom/traces")
        );
        assert_eq!(url.tls.unwrap().sni, "otel.example.com");
        let plain = collector(
            &tracing(serde_json::json!({"url": "http://10.0.0.5:4317"})),
            "x",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (plain.host.as_str(), plain.port, plain.tls),
            ("10.0.0.5", 4317, None)
        );
        assert!(
            collector(&tracing(serde_json::json!({"url": "ftp://x"})), "x")
                .unwrap_err()
                .starts_with("spec.openTelemetry.tracing.url: scheme \"ftp\"")
        );
        assert!(
            collector(&tracing(serde_json::json!({})), "x")
                .unwrap_err()
                .contains("neither service nor url")
        );
    }

    #[test]
    fn geoip_sets_only_served_headers_and_removes_every_named_one() {
        let spec: fairlead_edge_api::types::GeoIp = serde_json::from_value(serde_json::json!({
            "maxmindEditionIDs": ["GeoLite2-City", "GeoIP2-ISP", "GeoIP2-City", "Unknown"],
            "headers": {"country": " X-Country ", "asn": "x-asn", "anon": "x-anon", "moon": "x-moon"}
        }))
        .unwrap();
        let geoip = GeoIp::of(&spec, None).unwrap();
        assert_eq!(
            geoip.databases,
            BTreeMap::from([(Slot::City, Edition::City), (Slot::Isp, Edition::Isp)])
        );
        assert_eq!(
            geoip.headers,
            BTreeMap::from([
                (Field::Country, "x-country".to_owned()),
                (Field::Asn, "x-asn".to_owned())
            ]),
            "the ASN from the ISP edition; no anonymity database, no unknown field"
        );
        assert_eq!(geoip.removed, ["x-anon", "x-asn", "x-country", "x-moon"]);
        assert_eq!(geoip.editions(), [Edition::City, Edition::Isp]);
        let without = geoip.without_filter();
        assert!(!without.filters() && without.editions().is_empty());
        assert_eq!(without.removed, geoip.removed);
        let none: fairlead_edge_api::types::GeoIp =
            serde_json::from_value(serde_json::json!({"maxmindEditionIDs": ["GeoIP2-City"]}))
                .unwrap();
        assert_eq!(GeoIp::of(&none, None), None, "no headers, nothing to do");
        // A header that would break requests is neither removed nor set.
        let unsafe_header: fairlead_edge_api::types::GeoIp =
            serde_json::from_value(serde_json::json!({"maxmindEditionIDs": ["GeoIP2-City"],
                "headers": {"country": "x-country", "city": "X-Forwarded-For", "region": "x-client"}}))
            .unwrap();
        let kept = GeoIp::of(&unsafe_header, Some("X-Client")).unwrap();
        assert_eq!(kept.removed, ["x-country"]);
        assert_eq!(kept.headers.len(), 1);
    }

    #[test]
    fn ranges_read_as_envoy_takes_them() {
        assert_eq!(
            Cidr::parse("10.1.0.0/16"),
            Some(Cidr {
                address: "10.1.0.0".into(),
                prefix: 16
            })
        );
        assert_eq!(Cidr::parse("192.0.2.7").unwrap().prefix, 32);
        assert_eq!(Cidr::parse("2001:db8::/32").unwrap().prefix, 32);
        assert_eq!(Cidr::parse("10.0.0.0/33"), None);
        assert_eq!(Cidr::parse("not-an-address"), None);
    }

    fn input(yaml: &str) -> Input {
        Input::from_yaml(yaml).unwrap()
    }

    #[test]
    fn a_gateway_takes_the_settings_of_the_instance_its_label_names() {
        let world = input(
            "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {name: main}
spec:
  gatewayName: public
  acceptRequestsFrom: [10.0.0.0/8, 192.0.2.1]
  useProxyProtocol: true
  originalIPDetection: {realIPHeader: X-Real-IP, setRealIPFrom: [10.0.0.0/8]}
---
apiVersion: network.deckhouse.io/v1alpha1
kind: ALBInstance
metadata: {name: main, namespace: team}
spec: {gatewayName: shop, originalIPDetection: {realIPHeader: X-Forwarded-For, setRealIPFrom: [172.16.0.0/12]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: public, namespace: d8-alb, labels: {alb.deckhouse.io/instance: ClusterALBInstance.main}}
spec: {gatewayClassName: d8-alb, listeners: []}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: shop, namespace: team, labels: {alb.deckhouse.io/instance: ALBInstance.main}}
spec: {gatewayClassName: d8-alb, listeners: []}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: plain, namespace: team}
spec: {gatewayClassName: d8-alb, listeners: []}
",
        );
        let public = of(&world.gateways[0], &world);
        assert_eq!(public.accept_from.len(), 2);
        assert!(public.proxy_protocol);
        assert_eq!(
            public.real_ip,
            Some(RealIp::Header {
                name: "x-real-ip".into(),
                trusted: vec![Cidr::parse("10.0.0.0/8").unwrap()]
            })
        );
        let shop = of(&world.gateways[1], &world);
        assert!(shop.accept_from.is_empty() && !shop.proxy_protocol);
        assert_eq!(
            shop.real_ip,
            Some(RealIp::ForwardedFor {
                trusted: vec![Cidr::parse("172.16.0.0/12").unwrap()]
            }),
            "the ALBInstance of the Gateway's own namespace"
        );
        assert!(of(&world.gateways[2], &world).is_default());
    }
}
