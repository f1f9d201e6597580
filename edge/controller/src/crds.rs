//! The Gateway API CRDs and the `d8-alb` GatewayClass, installed by `fairlead up` so a user
//! can apply a Gateway and routes right away. The CRDs are upstream's release bundle,
//! vendored unchanged in `edge/controller/gateway-api/` (version [`GATEWAY_API_VERSION`]):
//! every schema and CEL rule is upstream's. The standard channel by default, with one
//! difference, Deckhouse's: the earlier versions of TCPRoute, UDPRoute and TLSRoute that the
//! bundle carries unserved (`v1alpha2`, TLSRoute's `v1alpha3`) are served
//! ([`DECKHOUSE_SERVED`]), as a Deckhouse cluster serves them and its documentation's examples
//! use them (storage stays `v1`; the chart's `crds/` carries the same); the experimental
//! channel (which serves those too, and the `x-k8s.io` kinds) on request. The bundle's `safe-upgrades` ValidatingAdmissionPolicy is
//! installed with it, as upstream's install does. A cluster may carry its own bundle: CRDs
//! that exist are left as they are (said once when they are another bundle), and the index
//! watches whichever versions are served.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;

pub use fairlead_edge_model::names::GATEWAY_CLASS;

/// The Gateway API release whose CRDs are vendored.
pub const GATEWAY_API_VERSION: &str = "v1.6.1";

/// The commit of [`GATEWAY_API_VERSION`] in kubernetes-sigs/gateway-api.
pub const GATEWAY_API_COMMIT: &str = "8bb74df00e56ec8f944d48c25e6c1c9c2f6848e3";

/// A Gateway API kind of `gateway.networking.k8s.io/v1` as an API resource (`Gateway`,
/// `GatewayClass`, …; the plural is the kind, lower case, with `es` after `s`, else `s`).
pub fn resource(kind: &str) -> ApiResource {
    let lower = kind.to_ascii_lowercase();
    let plural = if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower
        .strip_suffix('y')
        .filter(|stem| !stem.ends_with(['a', 'e', 'i', 'o', 'u']))
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    };
    ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: kind.into(),
        plural,
    }
}

/// The annotations upstream's bundle carries on each of its objects.
const BUNDLE_VERSION: &str = "gateway.networking.k8s.io/bundle-version";
const CHANNEL: &str = "gateway.networking.k8s.io/channel";

/// A release channel of the Gateway API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Channel {
    /// The stable kinds and fields.
    #[default]
    Standard,
    /// The stable kinds plus the experimental kinds, versions and fields.
    Experimental,
}

impl Channel {
    /// The channel's name, as the bundle's annotation spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Experimental => "experimental",
        }
    }

    /// The vendored files of the channel, as `(file name, YAML)`.
    fn files(self) -> &'static [(&'static str, &'static str)] {
        macro_rules! files {
            ($dir:literal: $($name:literal),* $(,)?) => {
                &[$(($name, include_str!(concat!("../gateway-api/", $dir, "/", $name)))),*]
            };
        }
        match self {
            Self::Standard => files!("standard":
                "gateway.networking.k8s.io_backendtlspolicies.yaml",
                "gateway.networking.k8s.io_gatewayclasses.yaml",
                "gateway.networking.k8s.io_gateways.yaml",
                "gateway.networking.k8s.io_grpcroutes.yaml",
                "gateway.networking.k8s.io_httproutes.yaml",
                "gateway.networking.k8s.io_listenersets.yaml",
                "gateway.networking.k8s.io_referencegrants.yaml",
                "gateway.networking.k8s.io_tcproutes.yaml",
                "gateway.networking.k8s.io_tlsroutes.yaml",
                "gateway.networking.k8s.io_udproutes.yaml",
                "gateway.networking.k8s.io_vap_safeupgrades.yaml",
            ),
            Self::Experimental => files!("experimental":
                "gateway.networking.k8s.io_backendtlspolicies.yaml",
                "gateway.networking.k8s.io_gatewayclasses.yaml",
                "gateway.networking.k8s.io_gateways.yaml",
                "gateway.networking.k8s.io_grpcroutes.yaml",
                "gateway.networking.k8s.io_httproutes.yaml",
                "gateway.networking.k8s.io_listenersets.yaml",
                "gateway.networking.k8s.io_referencegrants.yaml",
                "gateway.networking.k8s.io_tcproutes.yaml",
                "gateway.networking.k8s.io_tlsroutes.yaml",
                "gateway.networking.k8s.io_udproutes.yaml",
                "gateway.networking.k8s.io_vap_safeupgrades.yaml",
                "gateway.networking.x-k8s.io_xbackendtrafficpolicies.yaml",
                "gateway.networking.x-k8s.io_xmeshes.yaml",
            ),
        }
    }
}

impl std::str::FromStr for Channel {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "standard" => Ok(Self::Standard),
            "experimental" => Ok(Self::Experimental),
            _ => Err(format!(
                "{text:?} is not a Gateway API channel (standard, experimental)"
            )),
        }
    }
}

/// The CRDs whose every version the default (standard) install serves, as Deckhouse does:
/// the stream routes, whose earlier versions Deckhouse's documentation writes.
pub const DECKHOUSE_SERVED: &[&str] = &[
    "tcproutes.gateway.networking.k8s.io",
    "udproutes.gateway.networking.k8s.io",
    "tlsroutes.gateway.networking.k8s.io",
];

/// Every version of `crd` served, when it is one of [`DECKHOUSE_SERVED`].
pub fn serve_every_version(crd: &mut serde_json::Value) {
    let named = crd["metadata"]["name"]
        .as_str()
        .is_some_and(|n| DECKHOUSE_SERVED.contains(&n));
    if crd["kind"] != "CustomResourceDefinition" || !named {
        return;
    }
    for version in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
        version["served"] = serde_json::Value::Bool(true);
    }
}

/// Every object of a channel's bundle (CRDs, the admission policy and its binding), in the
/// order of its files; the standard channel's with [`serve_every_version`].
/// Read once per process (the YAML is large).
pub fn bundle(channel: Channel) -> &'static [serde_json::Value] {
    use serde::Deserialize as _;
    use std::sync::OnceLock;
    static READ: [OnceLock<Vec<serde_json::Value>>; 2] = [OnceLock::new(), OnceLock::new()];
    READ[channel as usize].get_or_init(|| {
        channel
            .files()
            .iter()
            .flat_map(|(name, text)| {
                serde_yaml_ng::Deserializer::from_str(text)
                    .map(|document| {
                        serde_json::Value::deserialize(document)
                            .unwrap_or_else(|e| panic!("the vendored {name} is YAML: {e}"))
                    })
                    .filter(|object| !object.is_null())
                    .collect::<Vec<_>>()
            })
            .map(|mut object| {
                if channel == Channel::Standard {
                    serve_every_version(&mut object);
                }
                object
            })
            .collect()
    })
}

/// The CRDs of a channel.
pub fn gateway_api(channel: Channel) -> Vec<CustomResourceDefinition> {
    bundle(channel)
        .iter()
        .filter(|object| object["kind"] == "CustomResourceDefinition")
        .map(|object| {
            serde_json::from_value(object.clone())
                .unwrap_or_else(|e| panic!("a vendored CRD reads as one: {e}"))
        })
        .collect()
}

/// The API resource of a bundle object that is not a CRD (the admission policy and its
/// binding).
fn resource_of(object: &serde_json::Value) -> Option<ApiResource> {
    let kind = object["kind"].as_str()?;
    let (group, version) = object["apiVersion"].as_str()?.split_once('/')?;
    Some(ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: match kind.to_ascii_lowercase() {
            lower if lower.ends_with("cy") => format!("{}ies", &lower[..lower.len() - 1]),
            lower => format!("{lower}s"),
        },
    })
}

/// Applies the ALB instance CRDs (made or brought to this version), and creates the Gateway
/// API CRDs (and the bundle's admission policy) of `channel` and the GatewayClass that do not
/// exist yet. Existing Gateway API CRDs are left as they are: a cluster's own bundle wins,
/// and one of another version or channel is named in a warning.
pub async fn install(
    client: &kube::Client,
    controller_name: &str,
    channel: Channel,
) -> Result<(), kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // The instances' CRDs are ours: brought to this version (Helm never upgrades a chart's
    // `crds/`), unless a newer one wrote them.
    for crd in fairlead_edge_api::crd::crds() {
        fairlead_kit::crds::keep_current(&crds, crate::instance::MANAGER, &crd).await?;
    }
    for object in bundle(channel) {
        if object["kind"] == "CustomResourceDefinition" {
            let crd: CustomResourceDefinition =
                serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
            let name = crd.metadata.name.clone().unwrap_or_default();
            match crds.create(&PostParams::default(), &crd).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    let existing = crds.get(&name).await?;
                    let said = |key: &str| {
                        existing
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(key).cloned())
                            .unwrap_or_else(|| "none".into())
                    };
                    let (version, found) = (said(BUNDLE_VERSION), said(CHANNEL));
                    if version != GATEWAY_API_VERSION || found != channel.name() {
                        tracing::warn!(
                            crd = %name,
                            bundle_version = %version,
                            channel = %found,
                            wanted = %format!("{GATEWAY_API_VERSION} {}", channel.name()),
                            "the cluster's Gateway API CRD is another bundle; leaving it as it is"
                        );
                    }
                }
                Err(e) => return Err(e),
            }
        } else if let Some(resource) = resource_of(object) {
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let object: DynamicObject =
                serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
            match api.create(&PostParams::default(), &object).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
    }
    let classes: Api<DynamicObject> = Api::all_with(client.clone(), &resource("GatewayClass"));
    let class: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "GatewayClass",
        "metadata": {"name": GATEWAY_CLASS},
        "spec": {"controllerName": controller_name},
    }))
    .map_err(kube::Error::SerdeError)?;
    // The CRD may take a moment to be served.
    for attempt in 0..50 {
        match classes.create(&PostParams::default(), &class).await {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 && attempt < 49 => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The storage version each Gateway API kind must have (Deckhouse's list): what the index
/// and translator read, and what the objects in etcd are kept as.
pub const REQUIRED_STORAGE: &[(&str, &[&str])] = &[
    ("gatewayclasses", &["v1"]),
    ("gateways", &["v1"]),
    ("listenersets", &["v1"]),
    ("grpcroutes", &["v1"]),
    ("httproutes", &["v1"]),
    ("tlsroutes", &["v1"]),
    ("backendtlspolicies", &["v1"]),
    ("referencegrants", &["v1beta1"]),
    ("tcproutes", &["v1alpha2", "v1"]),
    ("udproutes", &["v1alpha2", "v1"]),
];

/// Why `crd` (one of [`REQUIRED_STORAGE`]'s, by plural) cannot be run against; `None` when
/// it can.
pub fn storage_problem(crd: &CustomResourceDefinition) -> Option<String> {
    let plural = crd.spec.names.plural.as_str();
    let (_, wanted) = REQUIRED_STORAGE.iter().find(|(p, _)| *p == plural)?;
    let stored: Vec<&str> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.storage)
        .map(|v| v.name.as_str())
        .collect();
    match stored.as_slice() {
        [version] if wanted.contains(version) => None,
        _ => Some(format!(
            "CRD {} stores {}; fairlead needs {} (the Gateway API {GATEWAY_API_VERSION} bundle stores that): upgrade the cluster's Gateway API CRDs, or remove them and let fairlead install its own",
            crd.metadata.name.as_deref().unwrap_or(plural),
            if stored.is_empty() {
                "no version".to_owned()
            } else {
                stored.join(", ")
            },
            wanted.join(" or ")
        )),
    }
}

/// Why the cluster's Gateway API CRDs cannot be run against (each CRD of
/// [`REQUIRED_STORAGE`] read from the API server), as one message; missing CRDs are
/// [`install`]'s to create.
pub async fn check_storage_versions(client: &kube::Client) -> Result<(), StorageError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut problems = Vec::new();
    for (plural, _) in REQUIRED_STORAGE {
        if let Some(crd) = crds
            .get_opt(&format!("{plural}.gateway.networking.k8s.io"))
            .await
            .map_err(StorageError::Read)?
            && let Some(problem) = storage_problem(&crd)
        {
            problems.push(problem);
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(StorageError::Mismatch(problems.join("\n")))
    }
}

/// Why the CRDs' storage versions could not be checked, or are not the ones needed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The CRDs could not be read.
    #[error("reading the Gateway API CRDs: {0}")]
    Read(kube::Error),
    /// Some store another version.
    #[error("{0}")]
    Mismatch(String),
}

#[cfg(test)]
mod tests {
    /// Kinds are named by the plurals their CRDs declare.
    #[test]
    fn plurals_are_the_crds_own() {
        for (kind, plural) in [
            ("Gateway", "gateways"),
            ("GatewayClass", "gatewayclasses"),
            ("BackendTLSPolicy", "backendtlspolicies"),
            ("HTTPRoute", "httproutes"),
        ] {
            assert_eq!(super::resource(kind).plural, plural);
        }
    }

    use super::*;

    /// Both vendored channels store what fairlead needs; another storage version is named.
    #[test]
    fn storage_versions_are_checked() {
        for channel in [Channel::Standard, Channel::Experimental] {
            for crd in gateway_api(channel) {
                assert_eq!(storage_problem(&crd), None, "{}", crd.spec.names.plural);
            }
        }
        let mut reference_grants = gateway_api(Channel::Standard)
            .into_iter()
            .find(|c| c.spec.names.plural == "referencegrants")
            .unwrap();
        for v in &mut reference_grants.spec.versions {
            v.storage = v.name == "v1";
        }
        let problem = storage_problem(&reference_grants).unwrap();
        assert!(
            problem.contains(
                "referencegrants.gateway.networking.k8s.io stores v1; fairlead needs v1beta1"
            ),
            "{problem}"
        );
    }

    /// Every vendored object is of the version named in code, each CRD of its channel,
    /// and the channels hold the kinds the translator reads.
    #[test]
    fn the_bundle_is_the_pinned_release() {
        for channel in [Channel::Standard, Channel::Experimental] {
            let objects = bundle(channel);
            for object in objects {
                let annotations = &object["metadata"]["annotations"];
                assert_eq!(
                    annotations[BUNDLE_VERSION], GATEWAY_API_VERSION,
                    "{object:.80}"
                );
                // (Upstream's experimental bundle carries the standard one's admission
                // policy, annotated `standard`.)
                if object["kind"] == "CustomResourceDefinition" {
                    assert_eq!(annotations[CHANNEL], channel.name(), "{object:.80}");
                }
            }
            let kinds: Vec<String> = gateway_api(channel)
                .into_iter()
                .map(|crd| crd.spec.names.kind)
                .collect();
            for kind in [
                "GatewayClass",
                "Gateway",
                "ListenerSet",
                "HTTPRoute",
                "GRPCRoute",
                "TLSRoute",
                "TCPRoute",
                "UDPRoute",
                "ReferenceGrant",
                "BackendTLSPolicy",
            ] {
                assert!(
                    kinds.iter().any(|k| k == kind),
                    "{channel:?} lacks {kind}: {kinds:?}"
                );
            }
            assert!(
                objects
                    .iter()
                    .any(|o| o["kind"] == "ValidatingAdmissionPolicy"),
                "{channel:?} carries the safe-upgrades policy"
            );
        }
        let served = |channel, kind: &str| -> Vec<String> {
            gateway_api(channel)
                .into_iter()
                .find(|crd| crd.spec.names.kind == kind)
                .map(|crd| {
                    crd.spec
                        .versions
                        .iter()
                        .filter(|v| v.served)
                        .map(|v| v.name.clone())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(served(Channel::Standard, "TCPRoute"), ["v1", "v1alpha2"]);
        assert_eq!(served(Channel::Standard, "UDPRoute"), ["v1", "v1alpha2"]);
        assert_eq!(
            served(Channel::Standard, "TLSRoute").len(),
            3,
            "TLSRoute's v1alpha2 and v1alpha3 too"
        );
        assert!(
            !served(Channel::Standard, "HTTPRoute").contains(&"v1alpha2".to_owned()),
            "only the stream routes differ from upstream"
        );
        assert!(served(Channel::Standard, "ReferenceGrant").contains(&"v1beta1".to_owned()));
        assert!(served(Channel::Experimental, "TCPRoute").contains(&"v1alpha2".to_owned()));
        assert_eq!("experimental".parse(), Ok(Channel::Experimental));
        assert!("beta".parse::<Channel>().is_err());
    }
}
