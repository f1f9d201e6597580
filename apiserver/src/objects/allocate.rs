//! What the real control plane assigns to Services: a cluster IP from the service range
//! (10.96.0.0/12) unless the Service is headless or ExternalName, its IP family fields
//! (`ipFamilyPolicy`, `ipFamilies`; the cluster is single-stack IPv4), and node ports
//! (30000–32767) for NodePort and LoadBalancer Services. Values a client asks for are kept,
//! and an update that leaves allocated values out keeps those the Service had.

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
    ip_families(spec);
    if matches!(type_.as_str(), "NodePort" | "LoadBalancer") {
        let mut taken_ports: BTreeSet<i64> = existing
            .iter()
            .flat_map(|s| s["spec"]["ports"].as_array().cloned().unwrap_or_default())
            .filter_map(|p| p["nodePort"].as_i64())
            .collect();
        // The Service's own requested or kept node ports are taken too.
        taken_ports.extend(
            spec["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| p["nodePort"].as_i64()),
        );
        for port in spec["ports"].as_array_mut().into_iter().flatten() {
            if port["nodePort"].as_i64().is_some_and(|p| p != 0) {
                continue;
            }
            if let Some(free) = NODE_PORTS.clone().find(|p| !taken_ports.contains(p)) {
                port["nodePort"] = json!(free);
                taken_ports.insert(free);
            }
        }
    }
}

/// `ipFamilyPolicy` and `ipFamilies` as the real allocator sets them on a single-stack IPv4
/// cluster: `SingleStack` and the family of the cluster IPs; a headless Service without a
/// selector is `RequireDualStack` with both families.
fn ip_families(spec: &mut Value) {
    let headless = spec["clusterIP"] == "None";
    let selectorless = spec["selector"].as_object().is_none_or(|s| s.is_empty());
    if spec["ipFamilyPolicy"].is_null() {
        spec["ipFamilyPolicy"] = json!(if headless && selectorless {
            "RequireDualStack"
        } else {
            "SingleStack"
        });
    }
    if spec["ipFamilies"].as_array().is_none_or(Vec::is_empty) {
        let mut families: Vec<&str> = spec["clusterIPs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|ip| ip.as_str()?.parse::<std::net::IpAddr>().ok())
            .map(|ip| if ip.is_ipv6() { "IPv6" } else { "IPv4" })
            .collect();
        if families.is_empty() {
            families.push("IPv4");
        }
        if headless && selectorless && spec["ipFamilyPolicy"] != "SingleStack" {
            families = vec!["IPv4", "IPv6"];
        }
        spec["ipFamilies"] = json!(families);
    }
}

/// An update of a Service: the allocated values it leaves out are kept from `current` (the
/// cluster IPs and families while it still needs them, each port's node port by port and
/// protocol), then anything newly needed is allocated.
pub fn service_update(
    current: &Value,
    new: &mut Value,
    existing: &[std::sync::Arc<Value>],
    seed: &uuid::Uuid,
) {
    let old = &current["spec"];
    let spec = &mut new["spec"];
    let type_of = |spec: &Value| spec["type"].as_str().unwrap_or("ClusterIP").to_owned();
    if type_of(old) != "ExternalName" && type_of(spec) != "ExternalName" {
        for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            let missing = match &spec[field] {
                Value::Null => true,
                Value::String(s) => s.is_empty(),
                Value::Array(a) => a.is_empty(),
                _ => false,
            };
            if missing && !old[field].is_null() {
                spec[field] = old[field].clone();
            }
        }
    }
    if matches!(type_of(spec).as_str(), "NodePort" | "LoadBalancer") {
        let key = |p: &Value| {
            (
                p["port"].clone(),
                p["protocol"].as_str().unwrap_or("TCP").to_owned(),
            )
        };
        for port in spec["ports"].as_array_mut().into_iter().flatten() {
            if port["nodePort"].as_i64().is_some_and(|p| p != 0) {
                continue;
            }
            if let Some(kept) = old["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| key(p) == key(port))
                .and_then(|p| p["nodePort"].as_i64())
            {
                port["nodePort"] = json!(kept);
            }
        }
    }
    let others: Vec<std::sync::Arc<Value>> = existing
        .iter()
        .filter(|s| s["metadata"]["uid"] != current["metadata"]["uid"])
        .cloned()
        .collect();
    service(new, &others, seed);
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
        assert!(external["spec"].get("ipFamilyPolicy").is_none());
    }

    #[test]
    fn ip_families_follow_the_cluster_ips_and_headless_selectorless_services() {
        let seed = uuid::Uuid::nil();
        let mut plain = json!({"spec": {"selector": {"app": "a"}, "ports": [{"port": 80}]}});
        service(&mut plain, &[], &seed);
        assert_eq!(plain["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(plain["spec"]["ipFamilies"], json!(["IPv4"]));
        let mut headless = json!({"spec": {"clusterIP": "None"}});
        service(&mut headless, &[], &seed);
        assert_eq!(headless["spec"]["ipFamilyPolicy"], "RequireDualStack");
        assert_eq!(headless["spec"]["ipFamilies"], json!(["IPv4", "IPv6"]));
    }

    #[test]
    fn an_update_keeps_allocated_values_it_leaves_out() {
        let seed = uuid::Uuid::nil();
        let mut current = json!({"metadata": {"uid": "u"},
            "spec": {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]}});
        service(&mut current, &[], &seed);
        let mut new = json!({"metadata": {"uid": "u"},
            "spec": {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 81}]}});
        service_update(
            &current,
            &mut new,
            &[std::sync::Arc::new(current.clone())],
            &seed,
        );
        assert_eq!(new["spec"]["clusterIP"], current["spec"]["clusterIP"]);
        assert_eq!(new["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(
            new["spec"]["ports"][0]["nodePort"],
            current["spec"]["ports"][0]["nodePort"]
        );
        assert_eq!(
            new["spec"]["ports"][1]["nodePort"], 30001,
            "a new port is allocated"
        );
    }
}
