//! The names every room of the edge shares: the GatewayClass's controller name, the
//! annotations fairlead reads on a Gateway, the ports its proxies bind, and the paths and
//! cluster names a proxy's bootstrap and its xDS configuration must agree on.

/// The controller name of GatewayClass `d8-alb`.
pub const CONTROLLER_NAME: &str = "alb.network.deckhouse.io/gateway-controller";

/// The GatewayClass fairlead serves.
pub const GATEWAY_CLASS: &str = "d8-alb";

/// The module's namespace: ClusterALBInstances' Gateways and proxies, and the module's own
/// objects (the CA, the xDS server's and the webhooks' certificates).
pub const CLUSTER_NAMESPACE: &str = "d8-alb";

/// The label naming the Gateway a pod serves (proxies, geoproxy) on the pod, its workload
/// and everything made for them.
pub const GATEWAY_LABEL: &str = "alb.deckhouse.io/gateway";

/// The annotation naming the address a Gateway's proxies bind its listeners to (an IP
/// address; every address, `0.0.0.0`, without it). `fairlead up` sets it to the loopback
/// address of a Gateway's local proxy; a host-network proxy may bind one address of its node.
pub const LISTEN_ADDRESS: &str = "fairlead.io/listen-address";

/// The annotation that turns on statistics per route rule on a Gateway (`"true"`): Envoy
/// counts requests, responses and latency per rule
/// (`envoy_route="httproute/<ns>/<name>/rule/<i>"`) besides per listener and per backend.
/// Off by default, as Envoy Gateway's virtual-host statistics are: Envoy builds every route's
/// statistics anew on each route update, which costs about 25 µs per route (a change at
/// 1,000 routes of two rules served in 59 ms instead of 36 on the benchmark machine).
pub const ROUTE_STATISTICS: &str = "fairlead.io/route-statistics";

/// Ports below this need a privilege the proxy container does not have (it runs as a
/// non-root user with every capability dropped).
const PRIVILEGED_PORTS: u16 = 1024;

/// How far a privileged listener port is moved.
const PORT_SHIFT: u16 = 10_000;

/// The port Envoy binds for a Gateway listener's `port`: ports below 1024 move up by 10000
/// (80 → 10080, 443 → 10443, as Envoy Gateway maps them), the others stay. The proxies'
/// Service (`targetPort`) and host ports (`containerPort`) map the Gateway's ports back.
pub fn container_port(port: u16) -> u16 {
    if port < PRIVILEGED_PORTS {
        port + PORT_SHIFT
    } else {
        port
    }
}

/// Where the proxy finds the system trust store (the Envoy image's Debian bundle).
pub const SYSTEM_TRUST_STORE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The bootstrap's cluster of the OTLP collector spans go to.
pub const OTLP_CLUSTER: &str = "fairlead-otlp";

/// The service name of the proxies' spans.
pub const SERVICE_NAME: &str = "fairlead-alb-proxy";

/// The cluster of the proxy's authentication service (basic auth, `auth-url`), which the proxy
/// supervisor gives Envoy beside the bootstrap; the routes' `ext_authz` filter names it.
pub const AUTH_CLUSTER: &str = "fairlead-auth";

/// The `ext_authz` context entry carrying a route's guard to the authentication service: a
/// JSON object with the htpasswd users (`htpasswd`), whether, under `satisfy: any`, the
/// route's allowlist lets a client through without credentials (`any`), and the external
/// service of `auth-url` (`external`: an [`crate::annotations::ExternalAuth`]).
pub const AUTH_CONTEXT: &str = "fairlead-guard";

/// How long the authentication service waits for an `auth-url` service's answer before the
/// request gets 500 (ingress-nginx's default connect timeout is 5 s; an answer may take
/// longer).
pub const AUTH_URL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Where Envoy's RBAC filter leaves a shadow policy's verdict (`allowed` or `denied`): its
/// metadata namespace and key. Under `satisfy: any` a route's allowlist is such a policy, and
/// the authentication service reads its verdict.
pub const RBAC_VERDICT: (&str, &str) = ("envoy.filters.http.rbac", "shadow_engine_result");

/// The cluster Envoy reaches the WAF by (`fairlead edge waf` beside it, over a Unix socket in
/// the pod's shared run directory; the proxy supervisor gives Envoy the cluster).
pub const WAF_CLUSTER: &str = "fairlead-waf";

/// The WAF's socket in the pod's shared run directory (`/var/run/fairlead`).
pub const WAF_SOCKET: &str = "waf.sock";

/// The gRPC metadata a route's `ext_proc` stream opens with: the route (`namespace/name`),
/// the rule set's digest, and the rule set itself (JSON, in base64 without padding), compiled
/// by the WAF the first time it sees the digest.
pub const WAF_ROUTE_HEADER: &str = "fairlead-waf-route";
/// See [`WAF_ROUTE_HEADER`].
pub const WAF_DIGEST_HEADER: &str = "fairlead-waf-digest";
/// See [`WAF_ROUTE_HEADER`].
pub const WAF_RULES_HEADER: &str = "fairlead-waf-rules";

/// The Gateway condition saying whether some route of the Gateway asks for the WAF (written
/// by the control plane's translation; the gateway controller adds the WAF container to the
/// Gateway's proxy pods when it is `True`).
pub const WAF_CONDITION: &str = "WAF";

/// The dynamic metadata namespace the WAF writes its verdict into (`rules`: the ids of the
/// rules that matched, `action`: `blocked` or `detected`), which the access log prints.
pub const WAF_METADATA: &str = "fairlead.waf";
