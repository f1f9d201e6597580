//! What the real server sets on objects of built-in kinds that a client did not send: the
//! fields its registries fill in on create ([`on_create`]) and its decoding defaults on every
//! write ([`on_write`]). Custom resources get their CRD schema's defaults instead. The README
//! lists which of the real server's defaults are kept and which are not.

use serde_json::{Map, Value, json};

/// The label every Namespace carries, naming it (Kubernetes 1.22+).
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Fields set once, when an object is created (the registries' `PrepareForCreate` and the
/// admission plugins that default Pods), then the defaults of every write.
pub fn on_create(kind: &str, object: &mut Value) {
    match kind {
        "Namespace" => {
            let finalizers = object["spec"]["finalizers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if !finalizers.iter().any(|f| f == "kubernetes") {
                let mut finalizers = finalizers;
                finalizers.push(json!("kubernetes"));
                object["spec"]["finalizers"] = json!(finalizers);
            }
            object["status"] = json!({"phase": "Active"});
        }
        "Pod" => {
            let spec = &mut object["spec"];
            set(spec, "serviceAccountName", json!("default"));
            set(spec, "priority", json!(0));
            set(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
            let qos = qos_class(spec);
            object["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        "Service" => {
            object["status"] = json!({"loadBalancer": {}});
        }
        "Deployment" | "DaemonSet" | "StatefulSet" => {
            object["status"] = json!({});
        }
        "Ingress" => {
            object["status"] = json!({"loadBalancer": {}});
        }
        _ => {}
    }
    on_write(kind, object);
}

/// Defaults applied to every write of an object (create, update, patch, apply): what the real
/// server's decoding defaults.
pub fn on_write(kind: &str, object: &mut Value) {
    match kind {
        "Namespace" => {
            let name = object["metadata"]["name"].clone();
            if !object["metadata"]["labels"].is_object() {
                object["metadata"]["labels"] = json!({});
            }
            object["metadata"]["labels"][NAMESPACE_NAME_LABEL] = name;
        }
        "Secret" => {
            if object["type"].as_str().is_none_or(str::is_empty) {
                object["type"] = json!("Opaque");
            }
            // `stringData` is write-only: merged into `data` (over the same keys) as the
            // real server's conversion does, and never stored. One that is not all strings
            // stays for validation to refuse.
            let strings = object["stringData"]
                .as_object()
                .filter(|s| s.values().all(Value::is_string))
                .cloned();
            if let Some(strings) = strings {
                use base64::Engine as _;
                if let Some(o) = object.as_object_mut() {
                    o.remove("stringData");
                }
                if !object["data"].is_object() {
                    object["data"] = json!({});
                }
                for (key, value) in strings {
                    let text = value.as_str().unwrap_or_default();
                    object["data"][key] =
                        json!(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
        }
        "Service" => service(&mut object["spec"]),
        "Pod" => {
            pod_spec(&mut object["spec"]);
            set(&mut object["spec"], "enableServiceLinks", json!(true));
            // `serviceAccount` is the deprecated twin the real server keeps equal.
            if let Some(account) = object["spec"]["serviceAccountName"].as_str() {
                object["spec"]["serviceAccount"] = json!(account);
            }
            default_tolerations(&mut object["spec"]);
        }
        "Deployment" => {
            let spec = &mut object["spec"];
            set(spec, "replicas", json!(1));
            set(spec, "revisionHistoryLimit", json!(10));
            set(spec, "progressDeadlineSeconds", json!(600));
            set(spec, "strategy", json!({}));
            set(&mut spec["strategy"], "type", json!("RollingUpdate"));
            if spec["strategy"]["type"] == "RollingUpdate" {
                set(&mut spec["strategy"], "rollingUpdate", json!({}));
                let rolling = &mut spec["strategy"]["rollingUpdate"];
                set(rolling, "maxUnavailable", json!("25%"));
                set(rolling, "maxSurge", json!("25%"));
            }
            pod_template(spec);
        }
        "DaemonSet" => {
            let spec = &mut object["spec"];
            set(spec, "revisionHistoryLimit", json!(10));
            set(spec, "updateStrategy", json!({}));
            set(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
            if spec["updateStrategy"]["type"] == "RollingUpdate" {
                set(&mut spec["updateStrategy"], "rollingUpdate", json!({}));
                let rolling = &mut spec["updateStrategy"]["rollingUpdate"];
                set(rolling, "maxUnavailable", json!(1));
                set(rolling, "maxSurge", json!(0));
            }
            pod_template(spec);
        }
        "StatefulSet" => {
            let spec = &mut object["spec"];
            set(spec, "replicas", json!(1));
            set(spec, "revisionHistoryLimit", json!(10));
            set(spec, "podManagementPolicy", json!("OrderedReady"));
            set(spec, "updateStrategy", json!({}));
            set(&mut spec["updateStrategy"], "type", json!("RollingUpdate"));
            if spec["updateStrategy"]["type"] == "RollingUpdate" {
                set(
                    &mut spec["updateStrategy"],
                    "rollingUpdate",
                    json!({"partition": 0}),
                );
            }
            set(
                spec,
                "persistentVolumeClaimRetentionPolicy",
                json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
            );
            pod_template(spec);
        }
        "EndpointSlice" => {
            for port in items(&mut object["ports"]) {
                set(port, "name", json!(""));
                set(port, "protocol", json!("TCP"));
            }
        }
        "Node"
            if object["status"]["allocatable"].is_null()
                && object["status"]["capacity"].is_object() =>
        {
            object["status"]["allocatable"] = object["status"]["capacity"].clone();
        }
        "IngressClass" if object["spec"]["parameters"].is_object() => {
            set(&mut object["spec"]["parameters"], "scope", json!("Cluster"));
        }
        _ => {}
    }
}

/// Sets `field` of an object (made one if it is not) unless it has a value.
fn set(object: &mut Value, field: &str, value: Value) {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    if object[field].is_null() {
        object[field] = value;
    }
}

/// The items of an array field (none when it is not one).
fn items(value: &mut Value) -> impl Iterator<Item = &mut Value> {
    value.as_array_mut().into_iter().flatten()
}

fn service(spec: &mut Value) {
    set(spec, "type", json!("ClusterIP"));
    set(spec, "sessionAffinity", json!("None"));
    if spec["sessionAffinity"] == "ClientIP" {
        set(spec, "sessionAffinityConfig", json!({}));
        set(&mut spec["sessionAffinityConfig"], "clientIP", json!({}));
        set(
            &mut spec["sessionAffinityConfig"]["clientIP"],
            "timeoutSeconds",
            json!(10800),
        );
    }
    let type_ = spec["type"].as_str().unwrap_or_default().to_owned();
    for port in items(&mut spec["ports"]) {
        set(port, "protocol", json!("TCP"));
        let unset = match &port["targetPort"] {
            Value::Null => true,
            Value::Number(n) => n.as_i64() == Some(0),
            Value::String(s) => s.is_empty(),
            _ => false,
        };
        if unset {
            port["targetPort"] = port["port"].clone();
        }
    }
    if type_ != "ExternalName" {
        set(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    let external = matches!(type_.as_str(), "NodePort" | "LoadBalancer")
        || spec["externalIPs"]
            .as_array()
            .is_some_and(|ips| !ips.is_empty());
    if external {
        set(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if type_ == "LoadBalancer" {
        set(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

/// The defaults of a workload's pod template (those of a Pod's spec, without the ones only
/// Pods get).
fn pod_template(spec: &mut Value) {
    if spec["template"].is_object() {
        pod_spec(&mut spec["template"]["spec"]);
    }
}

fn pod_spec(spec: &mut Value) {
    set(spec, "dnsPolicy", json!("ClusterFirst"));
    set(spec, "restartPolicy", json!("Always"));
    set(spec, "securityContext", json!({}));
    set(spec, "terminationGracePeriodSeconds", json!(30));
    set(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(&mut spec[list]) {
            container_defaults(container);
        }
    }
    for volume in items(&mut spec["volumes"]) {
        volume_defaults(volume);
    }
}

fn container_defaults(container: &mut Value) {
    set(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    set(container, "terminationMessagePolicy", json!("File"));
    let policy = pull_policy(container["image"].as_str().unwrap_or_default());
    set(container, "imagePullPolicy", json!(policy));
    for port in items(&mut container["ports"]) {
        set(port, "protocol", json!("TCP"));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if container[probe].is_object() {
            let probe = &mut container[probe];
            set(probe, "timeoutSeconds", json!(1));
            set(probe, "periodSeconds", json!(10));
            set(probe, "successThreshold", json!(1));
            set(probe, "failureThreshold", json!(3));
            if probe["httpGet"].is_object() {
                set(&mut probe["httpGet"], "path", json!("/"));
                set(&mut probe["httpGet"], "scheme", json!("HTTP"));
            }
        }
    }
    for env in items(&mut container["env"]) {
        if env["valueFrom"]["fieldRef"].is_object() {
            set(&mut env["valueFrom"]["fieldRef"], "apiVersion", json!("v1"));
        }
    }
}

/// `Always` for the `latest` tag (or none), `IfNotPresent` otherwise (a digest counts).
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) if tag != "latest" => "IfNotPresent",
        _ => "Always",
    }
}

fn volume_defaults(volume: &mut Value) {
    let Some(map) = volume.as_object_mut() else {
        return;
    };
    if map.keys().all(|k| k == "name") {
        map.insert("emptyDir".into(), json!({}));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = map.get_mut(source).filter(|s| s.is_object()) {
            set(source, "defaultMode", json!(420));
        }
    }
    if let Some(projected) = map.get_mut("projected") {
        for source in items(&mut projected["sources"]) {
            if source["serviceAccountToken"].is_object() {
                set(
                    &mut source["serviceAccountToken"],
                    "expirationSeconds",
                    json!(3600),
                );
            }
        }
    }
}

/// The DefaultTolerationSeconds admission plugin: Pods tolerate a not-ready or unreachable
/// node for 300 s unless they say otherwise.
fn default_tolerations(spec: &mut Value) {
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let covered = spec["tolerations"].as_array().is_some_and(|all| {
            all.iter().any(|t| {
                t["key"].as_str().is_none_or(|k| k.is_empty() || k == key)
                    && t["effect"]
                        .as_str()
                        .is_none_or(|e| e.is_empty() || e == "NoExecute")
            })
        });
        if !covered {
            if !spec["tolerations"].is_array() {
                spec["tolerations"] = json!([]);
            }
            if let Some(all) = spec["tolerations"].as_array_mut() {
                all.push(
                    json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 300}),
                );
            }
        }
    }
}

/// The quality-of-service class of a Pod's containers: `BestEffort` without requests or
/// limits, `Guaranteed` when every container limits CPU and memory and requests (where it
/// does) the same, `Burstable` otherwise.
fn qos_class(spec: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .flat_map(|list| spec[*list].as_array().into_iter().flatten())
        .collect();
    let resources = |c: &Value, kind: &str| c["resources"][kind].as_object().cloned();
    let any = containers.iter().any(|c| {
        resources(c, "requests").is_some_and(|r| !r.is_empty())
            || resources(c, "limits").is_some_and(|l| !l.is_empty())
    });
    if !any {
        return "BestEffort";
    }
    let guaranteed = containers.iter().all(|c| {
        let limits = resources(c, "limits").unwrap_or_default();
        let requests = resources(c, "requests").unwrap_or_default();
        ["cpu", "memory"].iter().all(|r| {
            limits
                .get(*r)
                .is_some_and(|limit| requests.get(*r).is_none_or(|request| request == limit))
        })
    });
    if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_namespace_is_labelled_with_its_name_whatever_the_client_sends() {
        let mut created = json!({"metadata": {"name": "demo"}});
        on_create("Namespace", &mut created);
        assert_eq!(created["metadata"]["labels"][NAMESPACE_NAME_LABEL], "demo");
        assert_eq!(created["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(created["status"]["phase"], "Active");

        let mut updated = json!({"metadata": {"name": "demo",
            "labels": {NAMESPACE_NAME_LABEL: "other", "team": "a"}}});
        on_write("Namespace", &mut updated);
        assert_eq!(
            updated["metadata"]["labels"],
            json!({NAMESPACE_NAME_LABEL: "demo", "team": "a"})
        );
    }

    #[test]
    fn services_get_the_real_servers_defaults_and_keep_what_was_sent() {
        let mut service = json!({"spec": {"type": "NodePort", "ports": [
            {"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}});
        on_create("Service", &mut service);
        assert_eq!(
            service["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP", "targetPort": 80},
                {"port": 53, "protocol": "UDP", "targetPort": "dns"}])
        );
        for (field, value) in [
            ("sessionAffinity", json!("None")),
            ("internalTrafficPolicy", json!("Cluster")),
            ("externalTrafficPolicy", json!("Cluster")),
        ] {
            assert_eq!(service["spec"][field], value, "{field}");
        }
        assert_eq!(service["status"], json!({"loadBalancer": {}}));
        let mut external = json!({"spec": {"type": "ExternalName", "externalName": "db.example"}});
        on_write("Service", &mut external);
        assert!(external["spec"].get("internalTrafficPolicy").is_none());
    }

    #[test]
    fn pods_get_spec_container_and_admission_defaults() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}],
             "readinessProbe": {"httpGet": {"port": 80}}},
            {"name": "b", "image": "registry.local:5000/app:1.2"}],
            "volumes": [{"name": "scratch"}, {"name": "cfg", "configMap": {"name": "c"}}]},
            "status": {"phase": "Running"}});
        on_create("Pod", &mut pod);
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(spec["containers"][1]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(spec["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(
            spec["containers"][0]["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(spec["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(spec["volumes"][1]["configMap"]["defaultMode"], 420);
        assert_eq!(
            pod["status"],
            json!({"phase": "Pending", "qosClass": "BestEffort"}),
            "a client's status is not taken on create"
        );

        // A toleration of its own for a key keeps the default off for that key.
        let mut tolerant = json!({"spec": {"containers": [], "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]}});
        on_write("Pod", &mut tolerant);
        assert_eq!(tolerant["spec"]["tolerations"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn qos_classes_follow_requests_and_limits() {
        let with = |resources: Value| json!({"containers": [{"resources": resources}]});
        assert_eq!(qos_class(&with(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&with(
                json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}})
            )),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&with(json!({"requests": {"cpu": "100m"}}))),
            "Burstable"
        );
    }

    #[test]
    fn workloads_get_their_strategies_and_template_defaults() {
        let template = json!({"spec": {"containers": [{"name": "a", "image": "app:1"}]}});
        let mut deployment = json!({"spec": {"template": template}});
        on_create("Deployment", &mut deployment);
        assert_eq!(deployment["spec"]["replicas"], 1);
        assert_eq!(
            deployment["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["dnsPolicy"], "ClusterFirst");
        assert!(
            pod.get("enableServiceLinks").is_none() && pod.get("serviceAccountName").is_none(),
            "templates get no Pod-only defaults"
        );
        let mut zero = json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}}});
        on_write("Deployment", &mut zero);
        assert_eq!(zero["spec"]["replicas"], 0);
        assert!(zero["spec"]["strategy"].get("rollingUpdate").is_none());

        let mut set = json!({"spec": {"template": template}});
        on_create("StatefulSet", &mut set);
        assert_eq!(set["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(
            set["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        let mut daemons = json!({"spec": {"template": template}});
        on_create("DaemonSet", &mut daemons);
        assert_eq!(
            daemons["spec"]["updateStrategy"]["rollingUpdate"],
            json!({"maxUnavailable": 1, "maxSurge": 0})
        );
    }

    #[test]
    fn secrets_slices_and_nodes() {
        let mut secret = json!({"data": {}});
        on_write("Secret", &mut secret);
        assert_eq!(secret["type"], "Opaque");
        let mut strings = json!({"type": "Opaque", "data": {"a": "eA==", "b": "eQ=="},
            "stringData": {"b": "two", "c": "three"}});
        on_write("Secret", &mut strings);
        assert_eq!(
            strings,
            json!({"type": "Opaque", "data": {"a": "eA==", "b": "dHdv", "c": "dGhyZWU="}}),
            "stringData wins over data, and is not kept"
        );
        let mut slice = json!({"ports": [{"port": 80}]});
        on_write("EndpointSlice", &mut slice);
        assert_eq!(
            slice["ports"],
            json!([{"port": 80, "name": "", "protocol": "TCP"}])
        );
        let mut node = json!({"status": {"capacity": {"cpu": "2"}}});
        on_write("Node", &mut node);
        assert_eq!(node["status"]["allocatable"], json!({"cpu": "2"}));
    }
}
