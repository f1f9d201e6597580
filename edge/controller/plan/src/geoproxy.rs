//! What `spec.geoIP` of a controlling instance makes, decided without I/O.
//!
//! - Where its proxies get their databases ([`Downloads`]): from the instance's own geoproxy
//!   when it names a licence Secret, else from its `maxmindMirror`. The proxies fetch only
//!   the editions Envoy's GeoIP filter opens (those serving a header; see
//!   [`fairlead_edge_model::instance::GeoIp`]), with an init container before Envoy
//!   starts and a sidecar that replaces newer ones in place (the proxies' workload adds
//!   them).
//! - With a licence Secret, the geoproxy ([`objects`]), in the Gateway's namespace: a
//!   StatefulSet `d8-alb-<gateway>-geoproxy` (one replica by default; the Lease holder
//!   downloads every edition the instance names, the others fetch from the Service), its
//!   Service (port 8080, `/download/<Edition>.tar.gz`), ServiceAccount, its Lease in the
//!   namespace [`LEASE_NAMESPACE`] that holds geoproxies' Leases and nothing else (a
//!   RoleBinding there to the chart's ClusterRole [`LEASE_ROLE`]: RBAC cannot name a Lease
//!   per Gateway, so the namespace bounds what a geoproxy may touch), and a copy of the licence
//!   ([`licence_secret`]) that its pod reads through `secretKeyRef` — the instance's
//!   Secret may be in another namespace (a ClusterALBInstance's), and a changed licence
//!   restarts the geoproxy (its checksum is on the pod template). Its data directory is a
//!   PersistentVolumeClaim per replica when a storage class is set (Deckhouse's
//!   `storageClass`), else an emptyDir.
//!
//! One geoproxy per instance with a licence: to share one, point other instances'
//! `maxmindMirror.url` at its Service (`http://d8-alb-<gateway>-geoproxy.<namespace>.svc:8080/download`),
//! as Deckhouse's documentation shows.

use std::collections::BTreeMap;

use fairlead_edge_api::geoip::Edition;
use fairlead_key::ObjectKey;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec,
    PodTemplateSpec, Secret, SecretKeySelector, Service, ServiceAccount, ServicePort, ServiceSpec,
    VolumeResourceRequirements,
};
use k8s_openapi::api::rbac::v1::{RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

use crate::instance::Instance;
use crate::pods::{self, Labels, value};

/// The port the geoproxy serves databases on.
pub const HTTP_PORT: u16 = 8080;

/// The geoproxy's admin port (metrics; loopback, behind kube-rbac-proxy).
const ADMIN_PORT: u16 = 9090;

/// The geoproxy's health port (the kubelet's probes).
const HEALTH_PORT: u16 = 9092;

/// kube-rbac-proxy's port in front of the geoproxy's metrics.
pub const RBAC_PROXY_PORT: u16 = 9190;

/// Where the geoproxy keeps its databases.
const DATA_DIR: &str = "/data";

/// The chart's ClusterRole a geoproxy's RoleBinding names: Leases, in [`LEASE_NAMESPACE`].
pub const LEASE_ROLE: &str = "d8:alb:geoproxy";

/// The namespace of the geoproxies' Leases (and of the RoleBindings that let them hold
/// them), which holds nothing else: a geoproxy may hold any Lease there, and so only other
/// geoproxies' are in its reach — not the controllers' of `d8-alb`, nor a team's.
pub const LEASE_NAMESPACE: &str = "d8-alb-geoip";

/// The label naming the namespace of the Gateway a geoproxy's RoleBinding is for (the
/// binding lives in [`LEASE_NAMESPACE`]).
pub const GATEWAY_NAMESPACE_LABEL: &str = "alb.deckhouse.io/gateway-namespace";

/// The key of MaxMind's licence in the instance's Secret (and in the copy).
pub const LICENSE_KEY: &str = "licenseKey";

/// The key of MaxMind's account ID (optional: without it, MaxMind's legacy download URL).
pub const ACCOUNT_ID: &str = "accountID";

/// The name of a Gateway's geoproxy StatefulSet, Service, ServiceAccount, RoleBinding and
/// Lease.
pub fn name(gateway: &ObjectKey) -> String {
    format!("d8-alb-{}-geoproxy", gateway.name())
}

/// A Gateway's geoproxy's Lease (and the RoleBinding that lets it hold it), in
/// [`LEASE_NAMESPACE`]: `<namespace>.<gateway>`, unique as both are DNS labels.
pub fn lease(gateway: &ObjectKey) -> ObjectKey {
    ObjectKey::new(
        LEASE_NAMESPACE,
        format!("{}.{}", gateway.namespace(), gateway.name()),
    )
}

/// The Secret the controller copies the instance's licence into, in the Gateway's
/// namespace.
pub fn licence_secret(gateway: &ObjectKey) -> String {
    format!("d8-alb-{}-geoproxy-license", gateway.name())
}

/// Where a Gateway's geoproxy serves (`<url>/<Edition>.tar.gz`).
pub fn url(gateway: &ObjectKey) -> String {
    format!(
        "http://{}.{}.svc:{HTTP_PORT}/download",
        name(gateway),
        gateway.namespace()
    )
}

/// What the proxies of a Gateway download beside Envoy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Downloads {
    /// From where (`<source>/<Edition>.tar.gz`).
    pub source: String,
    /// The editions Envoy's filter opens.
    pub editions: Vec<Edition>,
}

/// The geoproxy an instance asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geoproxy {
    /// The instance's licence Secret.
    pub licence: ObjectKey,
    /// A mirror it downloads from instead of MaxMind.
    pub mirror: Option<String>,
    /// Every edition the instance names.
    pub editions: Vec<Edition>,
}

/// The objects of `gateway`'s geoproxy, by kind and key: what [`objects`] makes, and what
/// goes when its instance no longer asks for one — the StatefulSet last, since finding it
/// is how a geoproxy left behind is found again after a failed removal.
pub fn made(gateway: &ObjectKey) -> [(&'static str, ObjectKey); 5] {
    let own = |name: String| ObjectKey::new(gateway.namespace(), &name);
    [
        ("Service", own(name(gateway))),
        ("RoleBinding", lease(gateway)),
        ("ServiceAccount", own(name(gateway))),
        ("Secret", own(licence_secret(gateway))),
        ("StatefulSet", own(name(gateway))),
    ]
}

/// The label selector of every geoproxy object the controller made.
pub const SELECTOR: &str =
    "app.kubernetes.io/name=alb-geoproxy,app.kubernetes.io/managed-by=alb-gateway-controller";

/// What `instance`'s `spec.geoIP` asks for its Gateway `gateway`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The proxies' downloads (none when Envoy's filter has nothing to set, or nothing
    /// to download from).
    pub downloads: Option<Downloads>,
    /// The geoproxy (with a licence Secret).
    pub geoproxy: Option<Geoproxy>,
    /// Why what it asks cannot be done as asked: the condition's reason and the message
    /// (`spec.geoIP…: …`), most pressing first.
    pub problems: Vec<(&'static str, String)>,
}

/// What `instance` asks of GeoIP for `gateway`.
pub fn plan(instance: &Instance, gateway: &ObjectKey) -> Plan {
    let Some(spec) = instance.spec.geo_ip.as_ref() else {
        return Plan::default();
    };
    let named: Vec<Edition> = spec
        .maxmind_edition_ids
        .iter()
        .flatten()
        .filter_map(|id| id.parse().ok())
        .collect();
    let mirror = spec
        .maxmind_mirror
        .as_ref()
        .map(|m| m.url.trim_end_matches('/').to_owned())
        .filter(|u| !u.is_empty());
    let mut problems = Vec::new();
    let licence = spec.license_key_secret_ref.as_ref().and_then(|r| {
        let own = gateway.namespace();
        let namespace = r.namespace.as_deref().unwrap_or(own);
        if instance.kind == "ALBInstance" && namespace != own {
            problems.push((
                "LicenseSecretNotPermitted",
                format!(
                    "spec.geoIP.licenseKeySecretRef.namespace: an ALBInstance's licence Secret must be in its own namespace {own}, not {namespace}"
                ),
            ));
            return None;
        }
        Some(ObjectKey::new(namespace, &r.name))
    });
    let geoproxy = licence
        .filter(|_| !named.is_empty())
        .map(|licence| Geoproxy {
            licence,
            mirror: mirror.clone(),
            editions: named.clone(),
        });
    let real_ip = instance
        .spec
        .original_ip_detection
        .as_ref()
        .and_then(|d| d.real_ip_header.as_deref());
    if let Some(headers) = &spec.headers {
        problems.extend(
            fairlead_edge_api::geoip::header_problems(headers, real_ip)
                .into_iter()
                .map(|p| {
                    (
                        "HeaderNotPermitted",
                        format!("{p}; the proxies do not set it"),
                    )
                }),
        );
    }
    let editions = fairlead_edge_model::instance::GeoIp::of(spec, real_ip)
        .map(|g| g.editions())
        .unwrap_or_default();
    let source = match (&geoproxy, &mirror) {
        (Some(_), _) => Some(url(gateway)),
        (None, Some(mirror)) => Some(mirror.clone()),
        (None, None) => None,
    };
    let downloads = source
        .filter(|_| !editions.is_empty())
        .map(|source| Downloads { source, editions });
    Plan {
        downloads,
        geoproxy,
        problems,
    }
}

/// Why an instance's licence cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LicenceError {
    /// The Secret is not there.
    #[error("Secret {0} not found")]
    NotFound(ObjectKey),
    /// It has no (or an empty) `licenseKey`.
    #[error("Secret {0} has no {LICENSE_KEY}")]
    NoKey(ObjectKey),
}

/// MaxMind's licence as read from the instance's Secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Licence {
    /// `licenseKey`.
    pub key: Vec<u8>,
    /// `accountID`.
    pub account_id: Option<Vec<u8>>,
}

impl std::fmt::Debug for Licence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Licence(<redacted>)")
    }
}

impl Licence {
    /// The licence in a Secret's `data`; why there is none.
    pub fn read(
        secret: &ObjectKey,
        data: Option<&std::collections::BTreeMap<String, Vec<u8>>>,
    ) -> Result<Self, LicenceError> {
        let key = data
            .and_then(|d| d.get(LICENSE_KEY))
            .filter(|k| !String::from_utf8_lossy(k).trim().is_empty())
            .ok_or_else(|| LicenceError::NoKey(secret.clone()))?;
        Ok(Self {
            key: key.clone(),
            account_id: data
                .and_then(|d| d.get(ACCOUNT_ID))
                .filter(|a| !a.is_empty())
                .cloned(),
        })
    }

    /// A short digest of the licence, for the pod template: a new licence restarts the
    /// geoproxy (it reads the licence from its environment at start).
    fn checksum(&self) -> String {
        use sha2::Digest as _;
        let mut digest = sha2::Sha256::new();
        digest.update(&self.key);
        digest.update([0]);
        digest.update(self.account_id.as_deref().unwrap_or_default());
        digest.finalize()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// How geoproxies and the proxies' downloaders run (the controller's flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Replicas of each geoproxy.
    pub replicas: u32,
    /// The storage class of their data (an emptyDir when `None`).
    pub storage_class: Option<String>,
    /// How often each edition is asked about, in seconds.
    pub interval: u64,
    /// How often the proxies' downloaders ask again, in seconds.
    pub downloader_interval: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            replicas: 1,
            storage_class: None,
            interval: 86_400,
            downloader_interval: 3_600,
        }
    }
}

/// The labels of everything made for `gateway`'s geoproxy.
fn labels(instance: &Instance, gateway: &ObjectKey) -> Labels {
    pods::labels(instance, gateway, pods::GEOPROXY_APP)
}

/// The images a geoproxy's pod runs.
#[derive(Clone, Copy, Debug)]
pub struct Images<'a> {
    /// The geoproxy's (the proxies' image: `fairlead` is in it).
    pub geoproxy: &'a str,
    /// kube-rbac-proxy's, in front of its metrics.
    pub rbac_proxy: &'a str,
}

/// A Gateway's geoproxy: its licence copy, ServiceAccount, RoleBinding, Service and
/// StatefulSet.
#[derive(Clone, Debug, PartialEq)]
pub struct Objects {
    /// The copy of the instance's licence its pod reads.
    pub licence: Secret,
    /// Its ServiceAccount.
    pub service_account: ServiceAccount,
    /// Its RoleBinding to [`LEASE_ROLE`] in [`LEASE_NAMESPACE`]: no owner (an ALBInstance
    /// cannot own what is in another namespace); it goes with the geoproxy, by name.
    pub binding: RoleBinding,
    /// Its Service.
    pub service: Service,
    /// Its StatefulSet.
    pub stateful_set: StatefulSet,
}

impl Objects {
    /// The objects as JSON, in the order they are applied.
    pub fn values(&self) -> Vec<Value> {
        vec![
            value(&self.licence),
            value(&self.service_account),
            value(&self.binding),
            value(&self.service),
            value(&self.stateful_set),
        ]
    }
}

/// The geoproxy container.
fn container(
    gateway: &ObjectKey,
    geoproxy: &Geoproxy,
    settings: &Settings,
    image: &str,
) -> Container {
    let editions: Vec<&str> = geoproxy.editions.iter().map(|e| e.id()).collect();
    let lease = lease(gateway);
    let mut args = vec![
        "edge".to_owned(),
        "geoproxy".into(),
        "--editions".into(),
        editions.join(","),
        "--data-dir".into(),
        DATA_DIR.into(),
        "--interval".into(),
        settings.interval.to_string(),
        "--addr".into(),
        format!("0.0.0.0:{HTTP_PORT}"),
        "--admin-addr".into(),
        format!("127.0.0.1:{ADMIN_PORT}"),
        "--health-addr".into(),
        format!("0.0.0.0:{HEALTH_PORT}"),
        "--lease".into(),
        lease.name().to_owned(),
        "--lease-namespace".into(),
        LEASE_NAMESPACE.into(),
        "--peers".into(),
        url(gateway),
    ];
    if let Some(mirror) = &geoproxy.mirror {
        args.extend(["--mirror".into(), mirror.clone()]);
    }
    let secret_env = |env: &str, key: &str, optional: bool| EnvVar {
        name: env.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: licence_secret(gateway),
                key: key.to_owned(),
                optional: Some(optional),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    };
    Container {
        name: "geoproxy".to_owned(),
        image: Some(image.to_owned()),
        args: Some(args),
        env: Some(vec![
            pods::field("POD_NAME", "metadata.name"),
            pods::field("POD_NAMESPACE", "metadata.namespace"),
            secret_env("MAXMIND_LICENSE_KEY", LICENSE_KEY, false),
            secret_env("MAXMIND_ACCOUNT_ID", ACCOUNT_ID, true),
        ]),
        ports: Some(vec![
            pods::port("http", HTTP_PORT, "TCP", None),
            pods::port("health", HEALTH_PORT, "TCP", None),
        ]),
        readiness_probe: Some(pods::probe("/readyz", HEALTH_PORT, 5, 2)),
        liveness_probe: Some(pods::probe("/healthz", HEALTH_PORT, 10, 3)),
        // Editions are refreshed one at a time; the largest (GeoIP2-City) is a download of
        // about 70 MB and a database of about 130 MB in hand at once, besides what serves.
        resources: Some(pods::resources("10m", "64Mi", "1Gi")),
        security_context: Some(pods::hardened()),
        volume_mounts: Some(vec![
            pods::mount("data", DATA_DIR, false),
            pods::mount("tmp", "/tmp", false),
        ]),
        ..Container::default()
    }
}

/// The geoproxy's StatefulSet spec.
fn stateful_set(
    instance: &Instance,
    gateway: &ObjectKey,
    geoproxy: &Geoproxy,
    licence: &Licence,
    settings: &Settings,
    images: Images<'_>,
) -> StatefulSetSpec {
    let rbac_proxy = pods::rbac_proxy(images.rbac_proxy, RBAC_PROXY_PORT, ADMIN_PORT, "/metrics");
    let mut volumes = vec![pods::empty_dir("tmp", Some("16Mi"), true)];
    let claims = match &settings.storage_class {
        Some(class) => Some(vec![PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("data".to_owned()),
                ..ObjectMeta::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                storage_class_name: Some(class.clone()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(BTreeMap::from([(
                        "storage".to_owned(),
                        Quantity("1Gi".to_owned()),
                    )])),
                    ..VolumeResourceRequirements::default()
                }),
                ..PersistentVolumeClaimSpec::default()
            }),
            ..PersistentVolumeClaim::default()
        }]),
        None => {
            volumes.push(pods::empty_dir("data", Some("1Gi"), false));
            None
        }
    };
    StatefulSetSpec {
        replicas: Some(i32::try_from(settings.replicas).unwrap_or(i32::MAX)),
        service_name: Some(name(gateway)),
        selector: pods::match_labels(pods::selector(gateway, pods::GEOPROXY_APP)),
        persistent_volume_claim_retention_policy: Some(
            StatefulSetPersistentVolumeClaimRetentionPolicy {
                when_deleted: Some("Delete".to_owned()),
                when_scaled: Some("Retain".to_owned()),
            },
        ),
        template: PodTemplateSpec {
            metadata: Some(pods::annotated(
                ObjectMeta {
                    labels: Some(labels(instance, gateway)),
                    annotations: Some(BTreeMap::from([(
                        "alb.deckhouse.io/license-checksum".to_owned(),
                        licence.checksum(),
                    )])),
                    ..ObjectMeta::default()
                },
                instance,
            )),
            spec: Some(PodSpec {
                service_account_name: Some(name(gateway)),
                security_context: Some(pods::security()),
                containers: vec![
                    container(gateway, geoproxy, settings, images.geoproxy),
                    rbac_proxy,
                ],
                volumes: Some(volumes),
                ..PodSpec::default()
            }),
        },
        volume_claim_templates: claims,
        ..StatefulSetSpec::default()
    }
}

/// The geoproxy's objects for `gateway` with `licence`, owned by `owners`, made as
/// `settings` say with `images`.
pub fn objects(
    instance: &Instance,
    gateway: &ObjectKey,
    owners: &[OwnerReference],
    geoproxy: &Geoproxy,
    licence: &Licence,
    settings: &Settings,
    images: Images<'_>,
) -> Objects {
    let name = name(gateway);
    let metadata = |name: &str| {
        pods::annotated(
            pods::metadata(name, gateway, labels(instance, gateway), owners),
            instance,
        )
    };
    let mut data = BTreeMap::from([(LICENSE_KEY.to_owned(), ByteString(licence.key.clone()))]);
    if let Some(account) = &licence.account_id {
        data.insert(ACCOUNT_ID.to_owned(), ByteString(account.clone()));
    }
    let mut binding_labels = labels(instance, gateway);
    binding_labels.insert(
        GATEWAY_NAMESPACE_LABEL.to_owned(),
        gateway.namespace().to_owned(),
    );
    let lease = lease(gateway);
    Objects {
        licence: Secret {
            metadata: metadata(&licence_secret(gateway)),
            type_: Some("Opaque".to_owned()),
            data: Some(data),
            ..Secret::default()
        },
        service_account: ServiceAccount {
            metadata: metadata(&name),
            ..ServiceAccount::default()
        },
        binding: RoleBinding {
            metadata: ObjectMeta {
                name: Some(lease.name().to_owned()),
                namespace: Some(LEASE_NAMESPACE.to_owned()),
                labels: Some(binding_labels),
                ..ObjectMeta::default()
            },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".to_owned()),
                kind: "ClusterRole".to_owned(),
                name: LEASE_ROLE.to_owned(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: name.clone(),
                namespace: Some(gateway.namespace().to_owned()),
                ..Subject::default()
            }]),
        },
        service: Service {
            metadata: metadata(&name),
            spec: Some(ServiceSpec {
                selector: Some(pods::selector(gateway, pods::GEOPROXY_APP)),
                ports: Some(vec![ServicePort {
                    name: Some("http".to_owned()),
                    port: i32::from(HTTP_PORT),
                    target_port: Some(IntOrString::Int(i32::from(HTTP_PORT))),
                    protocol: Some("TCP".to_owned()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        },
        stateful_set: StatefulSet {
            metadata: metadata(&name),
            spec: Some(stateful_set(
                instance, gateway, geoproxy, licence, settings, images,
            )),
            ..StatefulSet::default()
        },
    }
}

/// The instance's `GeoIP` condition: `(status, reason, message)`, or `None` when it asks
/// for no GeoIP. `licence` is what reading its Secret gave (with a geoproxy), `replicas`
/// the geoproxy's ready and wanted replicas.
pub fn condition(
    plan: &Plan,
    licence: Option<&Result<Licence, LicenceError>>,
    replicas: (i64, i64),
) -> Option<(bool, &'static str, String)> {
    if let Some((reason, _)) = plan.problems.first() {
        let messages: Vec<&str> = plan.problems.iter().map(|(_, m)| m.as_str()).collect();
        return Some((false, reason, messages.join("; ")));
    }
    match (&plan.geoproxy, licence) {
        (Some(_), Some(Err(why))) => Some((
            false,
            "LicenseSecretInvalid",
            format!("{why}; the geoproxy cannot download, and proxies wait for their databases"),
        )),
        (Some(geoproxy), _) if replicas.0 == 0 => Some((
            false,
            "GeoproxyNotReady",
            format!(
                "{} of {} geoproxy replicas hold every edition ({})",
                replicas.0,
                replicas.1,
                geoproxy
                    .editions
                    .iter()
                    .map(|e| e.id())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
        (Some(_), _) => Some((
            true,
            "GeoproxyReady",
            format!(
                "{} of {} geoproxy replicas hold every edition",
                replicas.0, replicas.1
            ),
        )),
        (None, _) => plan.downloads.as_ref().map(|d| {
            (
                true,
                "Mirror",
                format!("the proxies download their databases from {}", d.source),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlead_edge_api::InstanceSpec;
    use serde_json::json;

    const IMAGES: Images<'static> = Images {
        geoproxy: "proxy:test",
        rbac_proxy: "kube-rbac-proxy:test",
    };

    fn instance(kind: &'static str, geo: Value) -> Instance {
        Instance {
            kind,
            key: if kind == "ALBInstance" {
                ObjectKey::new("team", "shop")
            } else {
                ObjectKey::cluster("main")
            },
            uid: "uid".into(),
            created: "t".into(),
            generation: 1,
            default: false,
            route_statistics: false,
            own_inlet: false,
            infrastructure: Default::default(),
            waf: false,
            spec: serde_json::from_value::<InstanceSpec>(
                json!({"gatewayName": "public", "geoIP": geo}),
            )
            .unwrap(),
        }
    }

    #[test]
    fn a_licence_makes_a_geoproxy_the_proxies_download_from() {
        let i = instance(
            "ClusterALBInstance",
            json!({"licenseKeySecretRef": {"name": "maxmind", "namespace": "licences"},
                "maxmindEditionIDs": ["GeoLite2-City", "GeoIP2-City", "GeoLite2-ASN"],
                "headers": {"country": "x-country"}}),
        );
        let gateway = ObjectKey::new("d8-alb", "public");
        let plan = plan(&i, &gateway);
        assert_eq!(plan.problems, []);
        assert_eq!(
            plan.geoproxy,
            Some(Geoproxy {
                licence: ObjectKey::new("licences", "maxmind"),
                mirror: None,
                editions: vec![Edition::LiteCity, Edition::City, Edition::LiteAsn],
            }),
            "the geoproxy holds every edition named"
        );
        assert_eq!(
            plan.downloads,
            Some(Downloads {
                source: "http://d8-alb-public-geoproxy.d8-alb.svc:8080/download".into(),
                editions: vec![Edition::City],
            }),
            "the proxies only what the filter opens: the commercial City"
        );
        let licence = Licence {
            key: b"k".to_vec(),
            account_id: None,
        };
        let owners = [i.reference(true)];
        let objects = objects(
            &i,
            &gateway,
            &owners,
            plan.geoproxy.as_ref().unwrap(),
            &licence,
            &Settings::default(),
            IMAGES,
        )
        .values();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "Secret",
                "ServiceAccount",
                "RoleBinding",
                "Service",
                "StatefulSet"
            ]
        );
        // What goes when the instance no longer asks for it is exactly what was made.
        let mut made: Vec<(String, ObjectKey)> = made(&gateway)
            .into_iter()
            .map(|(k, key)| (k.to_owned(), key))
            .collect();
        let mut applied: Vec<(String, ObjectKey)> = objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().to_owned(),
                    ObjectKey::new(
                        o["metadata"]["namespace"].as_str().unwrap(),
                        o["metadata"]["name"].as_str().unwrap(),
                    ),
                )
            })
            .collect();
        made.sort();
        applied.sort();
        assert_eq!(made, applied);
        let selected = SELECTOR.split(',').all(|pair| {
            let (k, v) = pair.split_once('=').unwrap();
            objects[4]["metadata"]["labels"][k] == v
        });
        assert!(selected, "the selector finds the StatefulSet");
        for o in objects.iter().filter(|o| o["kind"] != "RoleBinding") {
            assert_eq!(o["metadata"]["namespace"], "d8-alb");
            assert_eq!(o["metadata"]["ownerReferences"], json!(owners));
        }
        // Its Lease's binding is in the Leases' namespace, for its own ServiceAccount.
        let binding = &objects[2];
        assert_eq!(binding["metadata"]["namespace"], LEASE_NAMESPACE);
        assert_eq!(binding["metadata"]["name"], "d8-alb.public");
        assert_eq!(
            binding["metadata"]["labels"][GATEWAY_NAMESPACE_LABEL],
            "d8-alb"
        );
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": "d8-alb-public-geoproxy", "namespace": "d8-alb"}])
        );
        assert_eq!(
            objects[0]["metadata"]["name"],
            "d8-alb-public-geoproxy-license"
        );
        assert_eq!(objects[0]["data"], json!({"licenseKey": "aw=="}));
        let set = &objects[4]["spec"];
        assert_eq!(set["replicas"], 1);
        let container = &set["template"]["spec"]["containers"][0];
        let args: Vec<&str> = container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(
            args.windows(2)
                .any(|w| w == ["--editions", "GeoLite2-City,GeoIP2-City,GeoLite2-ASN"])
        );
        assert!(args.windows(2).any(|w| w == ["--lease", "d8-alb.public"]));
        assert!(
            args.windows(2)
                .any(|w| w == ["--lease-namespace", LEASE_NAMESPACE])
        );
        assert!(!args.contains(&"--mirror"));
        assert_eq!(
            container["env"][2]["valueFrom"]["secretKeyRef"],
            json!({"name": "d8-alb-public-geoproxy-license", "key": "licenseKey", "optional": false})
        );
        assert!(
            set.get("volumeClaimTemplates").is_none(),
            "no storage class: an emptyDir"
        );
        assert_eq!(set["template"]["spec"]["volumes"][1]["name"], "data");
        // A storage class: a claim per replica; another licence: another checksum.
        let settings = Settings {
            storage_class: Some("local".into()),
            ..Settings::default()
        };
        let other = Licence {
            key: b"k2".to_vec(),
            account_id: Some(b"42".to_vec()),
        };
        let with_claims = super::objects(
            &i,
            &gateway,
            &owners,
            plan.geoproxy.as_ref().unwrap(),
            &other,
            &settings,
            IMAGES,
        )
        .values();
        let set2 = &with_claims[4]["spec"];
        assert_eq!(
            set2["volumeClaimTemplates"][0]["spec"]["storageClassName"],
            "local"
        );
        assert_ne!(
            set2["template"]["metadata"]["annotations"],
            set["template"]["metadata"]["annotations"]
        );
        assert_eq!(with_claims[0]["data"]["accountID"], "NDI=");
    }

    #[test]
    fn a_mirror_alone_is_downloaded_from_directly() {
        let i = instance(
            "ALBInstance",
            json!({"maxmindMirror": {"url": "https://mirror.example.com/geo/"},
                "maxmindEditionIDs": ["GeoLite2-ASN"], "headers": {"asn": "x-asn"}}),
        );
        let plan = plan(&i, &ObjectKey::new("team", "public"));
        assert_eq!(plan.geoproxy, None);
        assert_eq!(
            plan.downloads.unwrap().source,
            "https://mirror.example.com/geo"
        );
        // Editions but no header: a geoproxy may serve others, the proxies download nothing.
        let serving = instance(
            "ClusterALBInstance",
            json!({"licenseKeySecretRef": {"name": "maxmind"}, "maxmindEditionIDs": ["GeoLite2-ASN"]}),
        );
        let plan = super::plan(&serving, &ObjectKey::new("d8-alb", "public"));
        assert_eq!(
            plan.geoproxy.unwrap().licence,
            ObjectKey::new("d8-alb", "maxmind")
        );
        assert_eq!(plan.downloads, None);
    }

    #[test]
    fn an_alb_instance_reads_its_licence_from_its_own_namespace_only() {
        let i = instance(
            "ALBInstance",
            json!({"licenseKeySecretRef": {"name": "maxmind", "namespace": "d8-alb"},
                "maxmindEditionIDs": ["GeoLite2-City"], "headers": {"city": "x-city"}}),
        );
        let plan = plan(&i, &ObjectKey::new("team", "public"));
        assert_eq!(plan.geoproxy, None);
        let (ready, reason, message) = condition(&plan, None, (0, 0)).unwrap();
        assert!(!ready);
        assert_eq!(reason, "LicenseSecretNotPermitted");
        assert!(message.starts_with("spec.geoIP.licenseKeySecretRef.namespace"));
    }

    #[test]
    fn a_header_the_proxies_cannot_set_is_in_the_condition() {
        let i = instance(
            "ClusterALBInstance",
            json!({"maxmindMirror": {"url": "http://mirror"},
                "maxmindEditionIDs": ["GeoLite2-City"],
                "headers": {"city": "x-city", "country": "X-Forwarded-For"}}),
        );
        let plan = plan(&i, &ObjectKey::new("d8-alb", "public"));
        let downloads = plan.downloads.as_ref().expect("the city is still set");
        assert_eq!(downloads.editions, [Edition::LiteCity]);
        let (ready, reason, message) = condition(&plan, None, (0, 0)).unwrap();
        assert!(!ready);
        assert_eq!(reason, "HeaderNotPermitted");
        assert!(
            message.starts_with("spec.geoIP.headers.country: \"X-Forwarded-For\"")
                && message.ends_with("the proxies do not set it"),
            "{message}"
        );
    }

    #[test]
    fn the_condition_says_what_holds_the_databases_up() {
        let i = instance(
            "ClusterALBInstance",
            json!({"licenseKeySecretRef": {"name": "maxmind"},
                "maxmindEditionIDs": ["GeoLite2-City"], "headers": {"city": "x-city"}}),
        );
        let plan = plan(&i, &ObjectKey::new("d8-alb", "public"));
        let missing = Err(LicenceError::NotFound(ObjectKey::new("d8-alb", "maxmind")));
        assert_eq!(
            condition(&plan, Some(&missing), (0, 1)).unwrap().1,
            "LicenseSecretInvalid"
        );
        let read = Licence {
            key: b"k".to_vec(),
            account_id: None,
        };
        let licence = Ok(read.clone());
        assert_eq!(
            condition(&plan, Some(&licence), (0, 1)).unwrap().1,
            "GeoproxyNotReady"
        );
        assert!(condition(&plan, Some(&licence), (1, 1)).unwrap().0);
        assert_eq!(condition(&Plan::default(), None, (0, 0)), None);
        assert_eq!(format!("{read:?}"), "Licence(<redacted>)", "never shown");
        let read = Licence::read(&ObjectKey::new("d8-alb", "maxmind"), None).unwrap_err();
        assert_eq!(read.to_string(), "Secret d8-alb/maxmind has no licenseKey");
        let (_, _, message) = condition(&plan, Some(&missing), (0, 1)).unwrap();
        assert!(
            message.starts_with("Secret d8-alb/maxmind not found; "),
            "{message}"
        );
    }
}
