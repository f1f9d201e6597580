//! Request paths: discovery endpoints and the REST paths of resources.

use crate::objects::errors::ApiError;
use crate::objects::resources::{Registry, ResourceType};

/// What a path addresses.
#[derive(Clone, Debug, PartialEq)]
pub enum Route {
    /// `/version`
    Version,
    /// `/healthz`, `/livez`, `/readyz`
    Health,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    ResourceList(String, String),
    /// `/openapi/v2`
    OpenApiV2,
    /// `/openapi/v3` (index) or `/openapi/v3/{api|apis/...}` (one group version)
    OpenApiV3(Option<String>),
    /// A resource collection or object.
    Resource(Box<Target>),
}

/// A resource path.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The served type.
    pub rt: ResourceType,
    /// Namespace from the path (`None`: all namespaces, or cluster-scoped).
    pub namespace: Option<String>,
    /// Object name (`None`: the collection).
    pub name: Option<String>,
    /// Subresource (`status`).
    pub subresource: Option<String>,
    /// The legacy `/watch/` prefix was used.
    pub watch_prefix: bool,
}

/// Parses a path against the served types.
pub fn parse(path: &str, registry: &Registry) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let route = match segments.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).into()),
        ["api", "v1"] => Route::ResourceList(String::new(), "v1".into()),
        ["apis", group, version] => Route::ResourceList((*group).into(), (*version).into()),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3(None),
        ["openapi", "v3", rest @ ..] => Route::OpenApiV3(Some(rest.join("/"))),
        ["api", "v1", rest @ ..] => {
            Route::Resource(Box::new(target("", "v1", rest, registry, path)?))
        }
        ["apis", group, version, rest @ ..] => {
            Route::Resource(Box::new(target(group, version, rest, registry, path)?))
        }
        _ => return Err(ApiError::no_route(path)),
    };
    Ok(route)
}

fn target(
    group: &str,
    version: &str,
    rest: &[&str],
    registry: &Registry,
    path: &str,
) -> Result<Target, ApiError> {
    let (watch_prefix, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    let lookup = |plural: &str| {
        registry
            .lookup(group, version, plural)
            .ok_or_else(|| ApiError::no_route(path))
    };
    let t = |rt, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| Target {
        rt,
        namespace: namespace.map(str::to_owned),
        name: name.map(str::to_owned),
        subresource: sub.map(str::to_owned),
        watch_prefix,
    };
    let namespaced_plural = |plural: &str| {
        registry
            .lookup(group, version, plural)
            .filter(|rt| rt.namespaced)
    };
    let target = match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced_plural(plural).is_some() => {
            let rt = lookup(plural)?;
            match tail {
                [] => t(rt, Some(ns), None, None),
                [name] => t(rt, Some(ns), Some(name), None),
                [name, sub] => t(rt, Some(ns), Some(name), Some(sub)),
                _ => return Err(ApiError::no_route(path)),
            }
        }
        [plural] => t(lookup(plural)?, None, None, None),
        [plural, name] => t(lookup(plural)?, None, Some(name), None),
        [plural, name, sub] => t(lookup(plural)?, None, Some(name), Some(sub)),
        _ => return Err(ApiError::no_route(path)),
    };
    if target.name.is_some() && target.namespace.is_none() && target.rt.namespaced {
        return Err(ApiError::no_route(path));
    }
    if let Some(sub) = &target.subresource
        && !(sub == "status" && target.rt.status_subresource)
        && !(sub == "scale" && crate::objects::scale::serves(&target.rt.kind))
        && !(sub == "token" && target.rt.kind == "ServiceAccount")
    {
        return Err(ApiError::no_route(path));
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(path: &str) -> Target {
        match parse(path, &Registry::new()).unwrap() {
            Route::Resource(t) => *t,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let t = resource("/api/v1/namespaces/default/pods/web/status");
        assert_eq!(
            (
                t.rt.kind.as_str(),
                t.namespace.as_deref(),
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            ("Pod", Some("default"), Some("web"), Some("status"))
        );
        let t = resource("/api/v1/namespaces/kube-system");
        assert_eq!(
            (t.rt.kind.as_str(), t.name.as_deref()),
            ("Namespace", Some("kube-system"))
        );
        let t = resource("/api/v1/namespaces/x/status");
        assert_eq!(
            (t.rt.kind.as_str(), t.subresource.as_deref()),
            ("Namespace", Some("status"))
        );
        let t = resource("/apis/discovery.k8s.io/v1/endpointslices");
        assert_eq!((t.rt.kind.as_str(), t.namespace), ("EndpointSlice", None));
        let t = resource("/api/v1/watch/namespaces/default/configmaps");
        assert!(t.watch_prefix);
        let t = resource("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/a.b");
        assert_eq!(t.name.as_deref(), Some("a.b"));
    }

    #[test]
    fn unknown_paths_are_404() {
        let registry = Registry::new();
        for path in [
            "/api/v1/nothings",
            "/apis/x/v1/ys",
            "/api/v1/pods/name-without-namespace",
            "/api/v1/namespaces/default/configmaps/x/status",
            "/nowhere",
        ] {
            assert_eq!(parse(path, &registry).unwrap_err().code, 404, "{path}");
        }
    }
}
