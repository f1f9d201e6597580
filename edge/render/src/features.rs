//! The HTTP filters routes ask for by their annotations ([`crate::access`],
//! [`crate::traffic`], [`crate::waf`]) and their rules' filters ([`crate::cors`]): a connection manager carries each filter some route of its route
//! configuration asks for, disabled, and each such route enables it with its own
//! configuration (Envoy's route-based filter chain: `FilterConfig` in the route's
//! `typed_per_filter_config`). A route asking nothing pays nothing, and a connection manager
//! whose routes ask nothing is the one it always was.

use std::collections::{BTreeMap, HashMap};

use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::pb::google::protobuf::Any;

use crate::pb::any;
use crate::{access, cors, traffic, waf};
use fairlead_edge_translate::http::Entry;
use fairlead_edge_translate::ir::RouteConfig;

/// The filters a route configuration's routes ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filters {
    /// A rule's `CORS` filter.
    pub cors: bool,
    /// `whitelist-source-range`: RBAC.
    pub allowlist: bool,
    /// `basic-auth-secret`, `auth-url`: external authorization by the proxy's service.
    pub authentication: bool,
    /// `limit-rps`: the local rate limit.
    pub rate_limit: bool,
    /// `buffer-max-request-bytes`: the buffer.
    pub buffer: bool,
    /// `mod-security`: the WAF's external processing.
    pub waf: bool,
}

/// The filters of each route configuration that needs any, by its name.
pub type ByConfig<'a> = HashMap<&'a str, Filters>;

impl Filters {
    /// What `entry` asks.
    pub fn of(entry: &Entry) -> Self {
        let annotations = &entry.annotations;
        Self {
            cors: entry.cors.is_some(),
            allowlist: annotations.access.allow_from.is_some(),
            authentication: entry
                .guard
                .as_ref()
                .is_some_and(|g| g.users.is_some() || g.external.is_some()),
            rate_limit: annotations.traffic.limit_rps.is_some(),
            buffer: annotations.traffic.buffer_max_request_bytes.is_some(),
            waf: entry.waf.as_ref().is_some_and(|w| !w.shut),
        }
    }

    /// Whether none is asked.
    pub fn is_empty(self) -> bool {
        self == Self::default()
    }

    fn union(self, other: Self) -> Self {
        Self {
            cors: self.cors || other.cors,
            allowlist: self.allowlist || other.allowlist,
            authentication: self.authentication || other.authentication,
            rate_limit: self.rate_limit || other.rate_limit,
            buffer: self.buffer || other.buffer,
            waf: self.waf || other.waf,
        }
    }

    /// What the routes of `config` ask.
    pub fn of_config(config: &RouteConfig) -> Self {
        config
            .virtual_hosts
            .iter()
            .flat_map(|h| &h.routes)
            .filter(|r| !r.entry.annotations.is_empty() || r.entry.cors.is_some())
            .fold(Self::default(), |all, r| all.union(Self::of(&r.entry)))
    }

    /// The filters of every route configuration in `configs` whose routes ask for some.
    pub fn by_config(configs: &[RouteConfig]) -> ByConfig<'_> {
        configs
            .iter()
            .map(|c| (c.name.as_str(), Self::of_config(c)))
            .filter(|(_, f)| !f.is_empty())
            .collect()
    }

    /// The connection manager's filters, disabled, in the order they run (before the
    /// router): CORS (a preflight is answered before anything asks for credentials), who
    /// may pass, then how many, then the body, then the WAF (which sees only what the others
    /// let through).
    pub fn http_filters(self) -> Vec<hcm::HttpFilter> {
        let disabled = |name: &str, config: Any| hcm::HttpFilter {
            name: name.to_owned(),
            config_type: Some(hcm::http_filter::ConfigType::TypedConfig(config)),
            disabled: true,
            ..Default::default()
        };
        let mut filters = Vec::new();
        if self.cors {
            filters.push(disabled(cors::FILTER, cors::filter()));
        }
        if self.allowlist {
            filters.push(disabled(access::RBAC, access::filter()));
        }
        if self.authentication {
            filters.push(disabled(
                access::AUTHENTICATION,
                access::authentication_filter(),
            ));
        }
        if self.rate_limit {
            filters.push(disabled(traffic::RATE_LIMIT, traffic::rate_limit_filter()));
        }
        if self.buffer {
            filters.push(disabled(traffic::BUFFER, traffic::buffer_filter()));
        }
        if self.waf {
            filters.push(disabled(waf::FILTER, waf::filter()));
        }
        filters
    }
}

/// The filters a route enables, with its configuration of each, by filter name.
pub fn per_route(entry: &Entry) -> BTreeMap<String, Any> {
    let annotations = &entry.annotations;
    // Under `satisfy: any` the allowlist only judges; the authentication service decides.
    let satisfy_any = entry
        .guard
        .as_ref()
        .is_some_and(|g| g.users.is_some() && g.any_from.is_some());
    let enabled = |config: Any| {
        any(&route::FilterConfig {
            config: Some(config),
            ..Default::default()
        })
    };
    let mut out = BTreeMap::new();
    if let Some(policy) = &entry.cors {
        out.insert(cors::FILTER.to_owned(), enabled(cors::per_route(policy)));
    }
    if let Some(ranges) = &annotations.access.allow_from {
        out.insert(
            access::RBAC.to_owned(),
            enabled(access::allowlist(ranges, satisfy_any)),
        );
    }
    if let Some(question) = entry.guard.as_deref().and_then(access::authentication) {
        out.insert(access::AUTHENTICATION.to_owned(), enabled(question));
    }
    if let Some(rps) = annotations.traffic.limit_rps {
        out.insert(
            traffic::RATE_LIMIT.to_owned(),
            enabled(traffic::rate_limit(rps)),
        );
    }
    if let Some(bytes) = annotations.traffic.buffer_max_request_bytes {
        out.insert(traffic::BUFFER.to_owned(), enabled(traffic::buffer(bytes)));
    }
    if let Some(firewall) = &entry.waf {
        let route = fairlead_edge_translate::waf::route_of(&entry.name);
        if let Some(config) = waf::per_route(route, firewall) {
            out.insert(waf::FILTER.to_owned(), enabled(config));
        }
    }
    out
}
