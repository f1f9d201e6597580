//! What the real control plane assigns to Services on create: a cluster IP from the service
//! range (10.96.0.0/12) unless the Service is headless or ExternalName, and node ports
//! (30000–32767) for NodePort and LoadBalancer Services. Values a client asks for are kept.

use std::collections::BTreeSet;

use serde_json::{Value, json};

const SERVICE_RANGE_SIZE: u32 = 1 << 20;
const NODE_PORTS: std::ops::RangeInclusive<i64> = 30000..=32767;

fn ip_at(offset: u32) -> String {
    let base = u32::from(std::net::Ipv4Addr::new(10, 96, 0, 0));
    std::net::Ipv4Addr::from(base + offset).to_string()
}

/// Fills in `spec.clusterIP`, `spec.clusterIPs` and node ports of a new Service, avoiding the
/// values `taken` by existing Services; `seed` spreads choices (the new uid).
pub fn service(object: &mut Value, existing: &[std::sync::Arc<Value>], seed: &uuid::Uuid) {
    let spec = &mut object["spec"];
    let type_ = spec["type"].as_str().unwrap_or("ClusterIP").to_owned();
    if type_ == "ExternalName" {
        return;
    }
    let taken_ips: BTreeSet<String> = existing
        .iter()
        .filter_map(|s| s["spec"]["clusterIP"].as_str().map(str::to_owned))
        .collect();
    if spec["clusterIP"].as_str().is_none_or(str::is_empty) {
        let start = u32::from_le_bytes(seed.as_bytes()[..4].try_into().unwrap_or_default())
            % (SERVICE_RANGE_SIZE - 2)
            + 1;
        let ip = (0..SERVICE_RANGE_SIZE - 2)
            .map(|i| ip_at((start + i) % (SERVICE_RANGE_SIZE - 2) + 1))
            .find(|ip| !taken_ips.contains(ip))
            .unwrap_or_else(|| ip_at(1));
        spec["clusterIP"] = json!(ip);
    }
    if spec["clusterIPs"].as_array().is_none_or(Vec::is_empty) {
        spec["clusterIPs"] = json!([spec["clusterIP"].clone()]);
    }
    if matches!(type_.as_str(), "NodePort" | "LoadBalancer") {
        let mut taken_ports: BTreeSet<i64> = existing
            .iter()
            .flat_map(|s| s["spec"]["ports"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p["nodePort"].as_i64())
            .collect();
        for port in spec["ports"].as_array_mut().into_iter().flatten() {
            if port["nodePort"].as_i64().is_some() {
                continue;
            }
            if let Some(free) = NODE_PORTS.clone().find(|p| !taken_ports.contains(p)) {
                port["nodePort"] = json!(free);
                taken_ports.insert(free);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_unique_ips_and_node_ports_and_keeps_requests() {
        let seed = uuid::Uuid::nil();
        let mut first = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        service(&mut first, &[], &seed);
        let ip = first["spec"]["clusterIP"].as_str().unwrap().to_owned();
        assert!(ip.starts_with("10."), "{ip}");
        assert_eq!(first["spec"]["ports"][0]["nodePort"], 30000);
        let mut second = json!({"spec": {"type": "NodePort", "ports": [{"port": 80}]}});
        service(&mut second, &[std::sync::Arc::new(first.clone())], &seed);
        assert_ne!(second["spec"]["clusterIP"], first["spec"]["clusterIP"]);
        assert_eq!(second["spec"]["ports"][0]["nodePort"], 30001);
        let mut headless = json!({"spec": {"clusterIP": "None", "ports": [{"port": 80}]}});
        service(&mut headless, &[], &seed);
        assert_eq!(headless["spec"]["clusterIP"], "None");
        let mut external = json!({"spec": {"type": "ExternalName", "externalName": "db.example"}});
        service(&mut external, &[], &seed);
        assert!(external["spec"].get("clusterIP").is_none());
    }
}
