//! GeoIP for the worlds that need it: City databases written for a test (laid out as
//! MaxMind's GeoIP2-City, what Envoy's provider reads), the MaxMind mirror of
//! `fairlead loadtest`, serving the databases a test publishes, and the GeoIP world
//! ([`world`], step by step in [`World`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fairlead_kit::testing::free_port;
use k8s_openapi::api::core::v1::Pod;

pub use fairlead_loadtest::geo::Mirror;

use crate::alb::{cluster_instances, route_to};
use crate::{Up, backends, until};

/// A City database: 81.2.69.0/24 in `city`, `country`, `region`, built at `epoch`.
pub fn city_database(epoch: u64, city: &str, country: &str, region: &str) -> Vec<u8> {
    let mut writer = mmdb_writer::Writer::builder("GeoIP2-City")
        .build_epoch(std::time::UNIX_EPOCH + Duration::from_secs(epoch))
        .build();
    let record = serde_json::json!({
        "city": {"names": {"en": city}},
        "country": {"iso_code": country},
        "subdivisions": [{"iso_code": region}],
    });
    writer
        .insert(
            "81.2.69.0/24".parse::<ipnet::IpNet>().expect("a network"),
            &record,
        )
        .expect("the record is written");
    writer.to_bytes().expect("the database is written")
}

/// The GeoIP world `up` runs (started with `--geo-downloader-interval 10`): ClusterALBInstance
/// `geo` with a licence (a geoproxy downloading from its mirror) and `lite` downloading from
/// a mirror of its own directly, their routes to a backend echoing headers; its two mirrors,
/// serving while held.
pub async fn world(up: &Up) -> [Mirror; 2] {
    let world = World::apply(up).await;
    world.lite_waits_for_its_databases().await;
    world.both_become_ready().await;
    world.the_geoproxy_holds_its_claim_licence_and_lease().await;
    world.headers_come_from_the_databases().await;
    world
        .a_newer_database_replaces_the_old_under_traffic()
        .await;
    world.without_its_licence_the_geoproxy_goes().await;
    // They serve on for the rest of the test, as the geoproxy and downloaders look again.
    [world.mirror, world.lite_mirror]
}

/// The GeoIP world, as its steps see it.
pub struct World<'a> {
    up: &'a Up,
    client: kube::Client,
    http: reqwest::Client,
    mirror: Mirror,
    lite_mirror: Mirror,
    geo_port: u16,
    lite_port: u16,
    /// The directory standing for the geoproxy's claim, holding what an earlier one left.
    claim_dir: std::path::PathBuf,
}

/// lite's proxies.
const LITE_PROXIES: &str = "alb.deckhouse.io/gateway=lite,app.kubernetes.io/name=alb-proxy";

impl<'a> World<'a> {
    /// Publishes geo's databases (lite's mirror stays empty), and applies the instances, the
    /// licence and the routes.
    pub async fn apply(up: &'a Up) -> Self {
        up.wait_ready().await;
        let mirror = Mirror::start().await.unwrap();
        let asn =
            std::fs::read(crate::workspace().join("edge/geoip/tests/data/GeoLite2-ASN-Test.mmdb"))
                .unwrap();
        mirror.publish("GeoLite2-ASN", asn).unwrap();
        mirror
            .publish(
                "GeoIP2-City",
                city_database(1_770_000_000, "London", "GB", "ENG"),
            )
            .unwrap();
        // The second instance's own mirror, empty until its proxy has been seen waiting.
        let lite_mirror = Mirror::start().await.unwrap();
        let echo = backends::echo().await;
        let (geo_port, lite_port) = (free_port(), free_port());
        let mut yaml = format!(
            "apiVersion: v1
kind: Secret
metadata: {{name: maxmind, namespace: d8-alb}}
stringData: {{licenseKey: test-licence}}
---
{}---
apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: lite}}
spec:
  gatewayName: lite
  inlet: {{type: LoadBalancer, loadBalancer: {{httpPort: {lite_port}}}}}
  originalIPDetection: {{realIPHeader: X-Real-IP, setRealIPFrom: [127.0.0.0/8]}}
  geoIP:
    maxmindMirror: {{url: '{}'}}
    maxmindEditionIDs: [GeoIP2-City]
    headers: {{city: x-geo-city}}
---
",
            geo_instance(geo_port, &mirror.url, true),
            lite_mirror.url
        );
        yaml.push_str(&route_to("echo", "geo", "d8-alb", echo));
        // The second Gateway's route to the same Service.
        yaml.push_str(
            "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: lite, namespace: default}
spec:
  parentRefs: [{name: lite, namespace: d8-alb}]
  rules: [{backendRefs: [{name: echo, port: 80}]}]
",
        );
        // What an earlier claim of the geoproxy's name left: a new claim is an empty volume.
        let claim_dir = up
            .dir()
            .join("pods/claims/d8-alb_data-d8-alb-geo-geoproxy-0");
        std::fs::create_dir_all(&claim_dir).unwrap();
        std::fs::write(claim_dir.join("left-over"), b"an earlier volume's").unwrap();
        up.apply(&yaml);
        Self {
            up,
            client: up.client().await,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .unwrap(),
            mirror,
            lite_mirror,
            geo_port,
            lite_port,
            claim_dir,
        }
    }

    fn pods(&self) -> kube::Api<Pod> {
        kube::Api::namespaced(self.client.clone(), "d8-alb")
    }

    /// The conditions of ClusterALBInstance `name`.
    async fn conditions(&self, name: &str) -> Vec<serde_json::Value> {
        let instance = cluster_instances(&self.client).get(name).await.unwrap();
        instance.data["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Nothing to download: lite's init container fails, is run again with a growing wait,
    /// and holds Envoy back (its GeoIP filter would not load); the instance is not ready.
    pub async fn lite_waits_for_its_databases(&self) {
        let pods = self.pods();
        let lite = kube::api::ListParams::default().labels(LITE_PROXIES);
        let waiting = until("lite's proxy waiting for its databases", async || {
            let pod = pods.list(&lite).await.ok()?.items.pop()?;
            let status = pod.status?;
            let init = status.init_container_statuses?.pop()?;
            let reason = init.state?.waiting?.reason?;
            (init.restart_count >= 1).then_some((reason, status.container_statuses))
        })
        .await;
        assert_eq!(
            waiting.0, "CrashLoopBackOff",
            "as the kubelet says it (kubectl shows Init:CrashLoopBackOff)"
        );
        assert!(
            waiting
                .1
                .iter()
                .flatten()
                .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_none())),
            "Envoy waits for its databases: {:?}",
            waiting.1
        );
        let ready = self
            .conditions("lite")
            .await
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        assert!(!ready, "no proxy of lite is ready");
    }

    /// Once lite's mirror has its database, both instances are ready with their GeoIP: geo's
    /// from its geoproxy, lite's from the mirror.
    pub async fn both_become_ready(&self) {
        self.lite_mirror
            .publish(
                "GeoIP2-City",
                city_database(1_770_000_000, "London", "GB", "ENG"),
            )
            .unwrap();
        let instances = cluster_instances(&self.client);
        for name in ["geo", "lite"] {
            until(&format!("ClusterALBInstance {name} Ready"), async || {
                let i = instances.get(name).await.ok()?;
                let conditions = i.data["status"]["conditions"].as_array()?.clone();
                let is = |kind: &str| {
                    conditions
                        .iter()
                        .any(|c| c["type"] == kind && c["status"] == "True")
                };
                (is("Ready") && is("GeoIP")).then_some(())
            })
            .await;
        }
        for (name, reason) in [("geo", "GeoproxyReady"), ("lite", "Mirror")] {
            let conditions = self.conditions(name).await;
            let geoip = conditions.iter().find(|c| c["type"] == "GeoIP").unwrap();
            assert_eq!(geoip["reason"], reason, "{name}: {geoip}");
        }
    }

    /// The geoproxy: its claim bound (to an emptied directory), the licence beside it, its
    /// Lease (in the namespace of geoproxies' Leases only) held by its own ServiceAccount.
    pub async fn the_geoproxy_holds_its_claim_licence_and_lease(&self) {
        let claims: kube::Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let claim = claims.get("data-d8-alb-geo-geoproxy-0").await.unwrap();
        assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
        assert!(
            !self.claim_dir.join("left-over").exists(),
            "the directory standing for the new claim was emptied"
        );
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let copy = secrets.get("d8-alb-geo-geoproxy-license").await.unwrap();
        assert_eq!(
            copy.data.unwrap()["licenseKey"].0,
            b"test-licence",
            "the licence, copied (stringData merged into data)"
        );
        let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
            kube::Api::namespaced(self.client.clone(), "d8-alb-geoip");
        let lease = leases.get("d8-alb.geo").await.unwrap();
        assert_eq!(
            lease.spec.unwrap().holder_identity.as_deref(),
            Some("d8-alb-geo-geoproxy-0"),
            "the geoproxy's own ServiceAccount holds its Lease"
        );
    }

    /// The URL of instance `name`'s LoadBalancer at `port`, once it answers (the instance is
    /// ready once a proxy is; its Service forwards to it a moment later).
    async fn url(&self, name: &str, port: u16) -> String {
        let services: kube::Api<k8s_openapi::api::core::v1::Service> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let service = format!("d8-alb-{name}-loadbalancer");
        let address = until(&format!("the address of {service}"), async || {
            let s = services.get_opt(&service).await.ok()??;
            s.status?.load_balancer?.ingress?.first()?.ip.clone()
        })
        .await;
        let url = format!("http://{address}:{port}/");
        until(
            &format!("an answer through {name}'s LoadBalancer"),
            async || {
                let r = self.http.get(&url).send().await.ok()?;
                r.status().is_success().then_some(())
            },
        )
        .await;
        url
    }

    /// The headers the backend saw for a request to `url` with `extra`.
    async fn headers(&self, url: &str, extra: &[(&str, &str)]) -> serde_json::Value {
        let mut request = self.http.get(url);
        for (k, v) in extra {
            request = request.header(*k, *v);
        }
        let r = request.send().await.unwrap();
        assert!(r.status().is_success(), "{url}: {}", r.status());
        r.json().await.unwrap()
    }

    /// Envoy's GeoIP filter sets the configured headers from the address X-Real-IP carries
    /// from a trusted peer: a client's own geolocation header is replaced, and removed for an
    /// address the database does not know.
    pub async fn headers_come_from_the_databases(&self) {
        let geo = self.url("geo", self.geo_port).await;
        let seen = self
            .headers(
                &geo,
                &[("x-real-ip", "81.2.69.142"), ("x-geo-country", "XX")],
            )
            .await;
        assert_eq!(seen["x-geo-country"], "GB", "{seen}");
        assert_eq!(seen["x-geo-city"], "London");
        assert_eq!(seen["x-geo-region"], "ENG");
        let seen = self.headers(&geo, &[("x-real-ip", "1.128.0.1")]).await;
        assert_eq!(
            seen["x-geo-asn"], "1221",
            "MaxMind's GeoLite2-ASN test database"
        );
        let spoofed = [
            ("x-real-ip", "10.1.1.1"),
            ("x-geo-country", "XX"),
            ("x-geo-city", "Spoof"),
        ];
        let seen = self.headers(&geo, &spoofed).await;
        assert!(
            seen.get("x-geo-country").is_none() && seen.get("x-geo-city").is_none(),
            "an address the database does not know: the client's headers are gone: {seen}"
        );
    }

    /// lite's sidecar replaces its database under traffic (a rename Envoy watches): the new
    /// values appear with no failed request and no restart.
    pub async fn a_newer_database_replaces_the_old_under_traffic(&self) {
        let lite = self.url("lite", self.lite_port).await;
        let city = async || {
            self.headers(&lite, &[("x-real-ip", "81.2.69.142")]).await["x-geo-city"].clone()
        };
        assert_eq!(city().await, "London");
        let (failures, sent) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let load = tokio::spawn({
            let (failures, sent, url, http) = (
                failures.clone(),
                sent.clone(),
                lite.clone(),
                self.http.clone(),
            );
            async move {
                loop {
                    let ok = http
                        .get(&url)
                        .header("x-real-ip", "81.2.69.142")
                        .send()
                        .await
                        .is_ok_and(|r| r.status().is_success());
                    sent.fetch_add(1, Ordering::SeqCst);
                    if !ok {
                        failures.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        });
        let sent_now = || sent.load(Ordering::SeqCst);
        until("traffic flowing", async || (sent_now() >= 20).then_some(())).await;
        for mirror in [&self.mirror, &self.lite_mirror] {
            mirror
                .publish(
                    "GeoIP2-City",
                    city_database(1_770_100_000, "Paris", "FR", "IDF"),
                )
                .unwrap();
        }
        until("the newer database's values", async || {
            (city().await == "Paris").then_some(())
        })
        .await;
        // Traffic goes on a while after the replacement, too.
        let replaced = sent_now();
        until("traffic after the replacement", async || {
            (sent_now() >= replaced + 20).then_some(())
        })
        .await;
        load.abort();
        assert_eq!(
            failures.load(Ordering::SeqCst),
            0,
            "no request failed while the database was replaced"
        );
        let proxies = self
            .pods()
            .list(&kube::api::ListParams::default().labels(LITE_PROXIES))
            .await
            .unwrap();
        let statuses = proxies.items[0]
            .status
            .clone()
            .unwrap()
            .container_statuses
            .unwrap();
        let proxy = statuses.iter().find(|c| c.name == "proxy").unwrap();
        assert_eq!(proxy.restart_count, 0, "Envoy reloaded, not restarted");
    }

    /// Without its licence geo's geoproxy goes (its StatefulSet, licence copy and Lease
    /// binding), and its proxies take the mirror.
    pub async fn without_its_licence_the_geoproxy_goes(&self) {
        self.up
            .apply(&geo_instance(self.geo_port, &self.mirror.url, false));
        let sets: kube::Api<k8s_openapi::api::apps::v1::StatefulSet> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(self.client.clone(), "d8-alb");
        let bindings: kube::Api<k8s_openapi::api::rbac::v1::RoleBinding> =
            kube::Api::namespaced(self.client.clone(), "d8-alb-geoip");
        until("the geoproxy removed", async || {
            let gone = sets.get_opt("d8-alb-geo-geoproxy").await.ok()?.is_none()
                && secrets
                    .get_opt("d8-alb-geo-geoproxy-license")
                    .await
                    .ok()?
                    .is_none()
                && bindings.get_opt("d8-alb.geo").await.ok()?.is_none();
            gone.then_some(())
        })
        .await;
        let geo = self.url("geo", self.geo_port).await;
        let instances = cluster_instances(&self.client);
        until("the instance's databases from the mirror", async || {
            let i = instances.get("geo").await.ok()?;
            let from_mirror = i.data["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "GeoIP" && c["reason"] == "Mirror");
            let seen = self
                .http
                .get(&geo)
                .header("x-real-ip", "81.2.69.142")
                .send()
                .await
                .ok()?
                .json::<serde_json::Value>()
                .await
                .ok()?;
            // The mirror's City database is Paris's by now.
            (from_mirror && seen["x-geo-city"] == "Paris").then_some(())
        })
        .await;
    }
}

/// ClusterALBInstance `geo` on `port`, downloading from `mirror`, through a geoproxy when
/// `licensed` (its licence in the Secret `d8-alb/maxmind`).
fn geo_instance(port: u16, mirror: &str, licensed: bool) -> String {
    let licence = if licensed {
        "\n    licenseKeySecretRef: {name: maxmind, namespace: d8-alb}"
    } else {
        ""
    };
    format!(
        "apiVersion: network.deckhouse.io/v1alpha1
kind: ClusterALBInstance
metadata: {{name: geo}}
spec:
  gatewayName: geo
  inlet: {{type: LoadBalancer, loadBalancer: {{httpPort: {port}}}}}
  originalIPDetection: {{realIPHeader: X-Real-IP, setRealIPFrom: [127.0.0.0/8]}}
  geoIP:{licence}
    maxmindMirror: {{url: '{mirror}'}}
    maxmindEditionIDs: [GeoIP2-City, GeoLite2-ASN]
    headers: {{country: X-Geo-Country, city: x-geo-city, region: x-geo-region, asn: x-geo-asn}}
"
    )
}
