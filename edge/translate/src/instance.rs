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
//! A Gateway no instance controls keeps the defaults: every peer, no PROXY protocol, the
//! connection's address.

use serde::Serialize;

use crate::model::{Gateway, Input};

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
        // Believed from nobody is the connection's address.
        if header.is_empty() || trusted.is_empty() {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
