//! The appliance itself: `fairlead up` serving its API and applying a world of manifests with
//! their statuses, `--strict-endpoints` refusing loopback addresses (naming the field),
//! acknowledged writes surviving a kill with `--data-dir`, a component left out needing the
//! address of the one run apart, and a second `up` on the machine taking free ports.

use std::time::Duration;

use fairlead_e2e::Up;

const DEMO_WORLD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g1, namespace: demo}
spec: {size: 3}
status: {phase: Ready}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: local, namespace: demo}
addressType: IPv4
endpoints: [{addresses: ["127.0.0.1"]}]
ports: [{port: 8080}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_serves_an_api_and_applies_a_demo_world_with_status() {
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(manifests.path().join("world.yaml"), DEMO_WORLD).unwrap();
    let up = Up::with(&["-f", manifests.path().to_str().unwrap()], &[]);
    up.wait_ready().await;
    let client = up.client().await;

    let gvk = kube::core::GroupVersionKind::gvk("example.com", "v1", "Gadget");
    let resource = kube::discovery::ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    let gadgets: kube::Api<kube::core::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), "demo", &resource);
    let g1 = gadgets.get("g1").await.unwrap();
    assert_eq!(g1.data["spec"]["size"], 3);
    assert_eq!(
        g1.data["status"]["phase"], "Ready",
        "status written through /status"
    );

    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(client, "demo");
    let slice = slices.get("local").await.unwrap();
    assert_eq!(
        slice.endpoints.unwrap()[0].addresses,
        vec!["127.0.0.1"],
        "loopback allowed by default"
    );

    let out = up.stop();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("127.0.0.0/8"), "says so at start: {stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_left_out_needs_the_port_of_the_one_run_apart() {
    let up = Up::builder()
        .option("--xds-addr", "127.0.0.1:0")
        .args(&["--without", "xds-server"])
        .start();
    let kubeconfig = up.kubeconfig.clone();
    let out = tokio::task::spawn_blocking(move || up.exited(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("fairlead up should fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--xds-addr 127.0.0.1:0") && stderr.contains("--without xds-server"),
        "names the flag: {stderr}"
    );
    // Refused before anything started.
    assert!(!kubeconfig.exists(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_endpoints_refuse_loopback_in_manifests() {
    let manifests = tempfile::tempdir().unwrap();
    std::fs::write(manifests.path().join("world.yaml"), DEMO_WORLD).unwrap();
    let up = Up::with(
        &[
            "--strict-endpoints",
            "-f",
            manifests.path().to_str().unwrap(),
        ],
        &[],
    );
    let out = tokio::task::spawn_blocking(move || up.exited(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("fairlead up should fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("endpoints[0].addresses[0]") && stderr.contains("loopback"),
        "names the field: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_a_kill_with_a_data_dir() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap().to_owned();
    let up = Up::with(&["--data-dir", &data_dir], &[]);
    up.wait_ready().await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(up.client().await, "default");
    for i in 0..20 {
        let cm =
            serde_json::from_value(serde_json::json!({"metadata": {"name": format!("cm-{i}")}}))
                .unwrap();
        cms.create(&Default::default(), &cm).await.unwrap();
    }
    up.kill();

    let again = Up::with(&["--data-dir", &data_dir], &[]);
    again.wait_ready().await;
    let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(again.client().await, "default");
    let names: Vec<String> = cms
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    for i in 0..20 {
        assert!(names.contains(&format!("cm-{i}")), "cm-{i} lost: {names:?}");
    }
    assert!(again.stop().status.success());
}

/// A `fairlead up` with every default but its directory: what a user starts.
struct Plain {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Plain {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("up.log")).unwrap();
        let child = std::process::Command::new(fairlead_e2e::binary::path())
            .args(["--log-format", "json", "up"])
            .current_dir(dir.path())
            .env("FAIRLEAD_PARENT_PID", std::process::id().to_string())
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Self { child, dir }
    }

    /// Its `endpoints.json`, once it runs.
    async fn endpoints(&self) -> serde_json::Value {
        let path = self.dir.path().join(".fairlead/endpoints.json");
        fairlead_e2e::until("fairlead up writes its endpoints", async || {
            serde_json::from_str(&std::fs::read_to_string(&path).ok()?).ok()
        })
        .await
    }
}

impl Drop for Plain {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_up_on_the_machine_takes_free_ports_and_says_where() {
    let first = Plain::start();
    let one = first.endpoints().await;
    let second = Plain::start();
    let two = second.endpoints().await;
    for key in [
        "api",
        "admin",
        "xds",
        "graph",
        "ingress2gateway",
        "loopbackBlock",
    ] {
        assert!(!one[key].is_null(), "{key} in {one}");
        assert_ne!(one[key], two[key], "{key}: both ups at {}", one[key]);
    }
    // Each is whole: ready, and its kubeconfig reaches its own API server.
    for (up, endpoints) in [(&first, &one), (&second, &two)] {
        let admin = endpoints["admin"].as_str().unwrap();
        let ready = reqwest::get(format!("{admin}/readyz")).await.unwrap();
        assert!(ready.status().is_success());
        let kubeconfig = up.dir.path().join(".fairlead/kubeconfig");
        assert_eq!(endpoints["kubeconfig"].as_str(), kubeconfig.to_str());
        let server = fairlead_e2e::kubectl::run(
            &kubeconfig,
            &[
                "config",
                "view",
                "--minify",
                "-o",
                "jsonpath={.clusters[0].cluster.server}",
            ],
        );
        assert_eq!(
            String::from_utf8_lossy(&server.stdout),
            endpoints["api"].as_str().unwrap()
        );
        let namespaces = fairlead_e2e::kubectl::run(&kubeconfig, &["get", "namespaces"]);
        assert!(namespaces.status.success(), "{namespaces:?}");
    }
    // A third from the first one's directory is refused before it starts anything.
    let mut third = std::process::Command::new(fairlead_e2e::binary::path())
        .arg("up")
        .current_dir(first.dir.path())
        .env("FAIRLEAD_PARENT_PID", std::process::id().to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status =
        fairlead_e2e::until("the third up exits", async || third.try_wait().unwrap()).await;
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut third.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(stderr.contains("another `fairlead up`"), "{stderr}");
}
