//! What a younger instance of a shared Gateway asks that the Gateway does not do: the
//! Gateway-level settings come from the oldest instance naming it, and each younger
//! instance's status says which of its own differ — Deckhouse's `conflictPorts`,
//! `conflictFrontendTLS` and `conflictBackendTLS`, each with the controlling instance as its
//! `…Owner`. Deckhouse documents the three flags without the fields behind them; fairlead's
//! instance fields fall into them as:
//!
//! - ports: the Gateway's listeners — `d8-http` / `d8-https` on or off (`httpPort` /
//!   `httpsPort: 0`) and `inlet.additionalPorts`;
//! - frontend: what the listeners do with clients' connections — `useProxyProtocol`,
//!   `enableHTTP3`, `acceptRequestsFrom`, `originalIPDetection`, `geoIP`;
//! - backend: what the proxies open themselves — `openTelemetry` (the collector, its TLS).

use fairlead_edge_api::InstanceSpec;

/// The settings of a younger instance that differ from the controlling one's, by flag,
/// each a field path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Differences {
    /// `conflictPorts`.
    pub ports: Vec<&'static str>,
    /// `conflictFrontendTLS`.
    pub frontend: Vec<&'static str>,
    /// `conflictBackendTLS`.
    pub backend: Vec<&'static str>,
}

impl Differences {
    /// Every differing field, in flag order.
    pub fn fields(&self) -> Vec<&'static str> {
        [&self.ports, &self.frontend, &self.backend]
            .into_iter()
            .flatten()
            .copied()
            .collect()
    }
}

/// How `younger` differs from `controlling` where the Gateway follows `controlling`.
pub fn differences(younger: &InstanceSpec, controlling: &InstanceSpec) -> Differences {
    let listener = |spec: &InstanceSpec, name: &str| {
        crate::workload::ports(spec)
            .into_iter()
            .any(|p| p.name == name && p.listener_protocol.is_some())
    };
    let additional = |spec: &InstanceSpec| {
        let mut ports: Vec<(i32, String)> = spec
            .inlet
            .as_ref()
            .and_then(|i| i.additional_ports.as_ref())
            .into_iter()
            .flatten()
            .map(|p| (p.port, p.protocol.to_ascii_uppercase()))
            .collect();
        ports.sort();
        ports.dedup();
        ports
    };
    let mut out = Differences::default();
    if listener(younger, "d8-http") != listener(controlling, "d8-http") {
        out.ports.push("inlet.httpPort");
    }
    if listener(younger, "d8-https") != listener(controlling, "d8-https") {
        out.ports.push("inlet.httpsPort");
    }
    if additional(younger) != additional(controlling) {
        out.ports.push("inlet.additionalPorts");
    }
    let flag = |list: &mut Vec<&'static str>, field: &'static str, differs: bool| {
        if differs {
            list.push(field);
        }
    };
    let (y, c) = (younger, controlling);
    let frontend = &mut out.frontend;
    flag(
        frontend,
        "useProxyProtocol",
        y.use_proxy_protocol.unwrap_or(false) != c.use_proxy_protocol.unwrap_or(false),
    );
    flag(
        frontend,
        "enableHTTP3",
        y.enable_http3.unwrap_or(false) != c.enable_http3.unwrap_or(false),
    );
    flag(
        frontend,
        "acceptRequestsFrom",
        sorted(y.accept_requests_from.as_deref()) != sorted(c.accept_requests_from.as_deref()),
    );
    flag(
        frontend,
        "originalIPDetection",
        y.original_ip_detection != c.original_ip_detection,
    );
    flag(frontend, "geoIP", y.geo_ip != c.geo_ip);
    flag(
        &mut out.backend,
        "openTelemetry",
        y.open_telemetry != c.open_telemetry,
    );
    out
}

/// A list of CIDRs as a set (`None` and empty alike).
fn sorted(list: Option<&[String]>) -> Vec<&str> {
    let mut list: Vec<&str> = list.into_iter().flatten().map(String::as_str).collect();
    list.sort_unstable();
    list.dedup();
    list
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlead_edge_api::types::{
        AdditionalPort, HostPortInlet, Inlet, LoadBalancerInlet, OpenTelemetry,
    };

    fn spec(http_port: Option<i32>, additional: &[i32]) -> InstanceSpec {
        InstanceSpec {
            gateway_name: "main".into(),
            inlet: Some(Inlet {
                type_: "LoadBalancer".into(),
                load_balancer: Some(LoadBalancerInlet {
                    http_port,
                    ..LoadBalancerInlet::default()
                }),
                additional_ports: Some(
                    additional
                        .iter()
                        .map(|p| AdditionalPort {
                            port: *p,
                            protocol: "TCP".into(),
                        })
                        .collect(),
                ),
                ..Inlet::default()
            }),
            ..InstanceSpec::default()
        }
    }

    #[test]
    fn a_new_inlet_with_the_same_gateway_settings_conflicts_in_nothing() {
        // Another LoadBalancer port number for d8-http is the inlet's, not the Gateway's.
        let mut younger = spec(Some(8080), &[5432]);
        younger.inlet.as_mut().unwrap().type_ = "HostPort".into();
        younger.inlet.as_mut().unwrap().host_port = Some(HostPortInlet {
            http_port: Some(8080),
            https_port: Some(8443),
        });
        assert_eq!(
            differences(&younger, &spec(None, &[5432])),
            Differences::default()
        );
    }

    #[test]
    fn each_gateway_level_setting_falls_in_its_flag() {
        let controlling = spec(None, &[5432]);
        let mut younger = spec(Some(0), &[5432, 6379]);
        younger.enable_http3 = Some(true);
        younger.accept_requests_from = Some(vec!["10.0.0.0/8".into()]);
        younger.open_telemetry = Some(OpenTelemetry::default());
        let d = differences(&younger, &controlling);
        assert_eq!(d.ports, ["inlet.httpPort", "inlet.additionalPorts"]);
        assert_eq!(d.frontend, ["enableHTTP3", "acceptRequestsFrom"]);
        assert_eq!(d.backend, ["openTelemetry"]);
        assert_eq!(d.fields().len(), 5);
        // The same CIDRs in another order are the same setting.
        let mut a = spec(None, &[]);
        a.accept_requests_from = Some(vec!["10.0.0.0/8".into(), "192.168.0.0/16".into()]);
        let mut b = a.clone();
        b.accept_requests_from = Some(vec!["192.168.0.0/16".into(), "10.0.0.0/8".into()]);
        assert_eq!(differences(&a, &b), Differences::default());
    }
}
