//! The Gateway API conformance suite (v1.6.1 and what followed on its main branch), its tests
//! transcribed — their manifests as data under `manifests/` (each file names its source),
//! their assertions in this directory's modules, one per area, test by test under the
//! suite's short names — and run through `fairlead up` with one real Envoy per Gateway
//! (`fairlead_e2e::conformance`).

mod backend_tls;
mod common;
mod cors;
mod filters;
mod frontend;
mod gateway;
mod grpc;
mod http;
mod https;
mod listener_sets;
mod matching;
mod retries;
mod tcp;
mod tls;
mod udp;

use common::World;

/// The tests transcribed so far, one world, one after the other (as the suite
/// runs them), each removing its manifests at its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_api_conformance_suite_passes_through_real_envoy() {
    let world = World::start().await;
    http::http_route_simple_same_namespace(&world).await;
    http::http_route_cross_namespace(&world).await;
    retries::http_route_retry(&world).await;
    retries::http_route_retry_connection_error(&world).await;
    retries::http_route_retry_with_timeouts(&world).await;
    gateway::gateway_invalid_parameters_ref(&world).await;
    cors::http_route_cors(&world).await;
    udp::udp_route_weighted_routing(&world).await;
    listener_sets::listener_set_conflicts(&world, "hostname").await;
    listener_sets::listener_set_conflicts(&world, "protocol").await;
    matching::http_route_exact_path_matching(&world).await;
    matching::http_route_header_matching(&world).await;
    matching::http_route_query_param_matching(&world).await;
    matching::http_route_method_matching(&world).await;
    filters::http_route_request_header_modifiers(&world).await;
    matching::http_route_matching(&world).await;
    matching::http_route_matching_across_routes(&world).await;
    matching::http_route_path_match_order(&world).await;
    matching::http_route_listener_hostname_matching(&world).await;
    matching::http_route_hostname_intersection(&world).await;
    filters::http_route_weight(&world).await;
    filters::http_route_request_header_modifier_backend_weights(&world).await;
    filters::http_route_response_header_modifier(&world).await;
    filters::http_route_redirects(&world).await;
    filters::http_route_rewrites(&world).await;
    http::http_route_timeouts(&world).await;
    http::http_route_named_rule(&world).await;
    http::http_route_unresolved_backends(&world).await;
    http::http_route_not_attached(&world).await;
    http::http_route_reference_grant(&world).await;
    http::http_route_omitted_backend_refs(&world).await;
    matching::http_route_multiple_gateways(&world).await;
    matching::http_route_listener_port_matching(&world).await;
    https::http_route_https_listener(&world).await;
    https::http_route_redirect_port_and_scheme(&world).await;
    gateway::gateway_certificate_references(&world).await;
    frontend::gateway_with_client_certificate_validation(&world).await;
    frontend::gateway_client_certificate_insecure_fallback(&world).await;
    frontend::gateway_invalid_client_certificate_validation(&world).await;
    https::http_route_https_listener_detect_misdirected_requests(&world).await;
    backend_tls::backend_tls_policy(&world).await;
    backend_tls::backend_tls_policy_san_validation(&world).await;
    backend_tls::backend_tls_policy_conflict_resolution(&world).await;
    backend_tls::backend_tls_policy_invalid_references(&world).await;
    backend_tls::backend_tls_policy_observed_generation_bump(&world).await;
    backend_tls::gateway_tls_backend_client_certificate(&world).await;
    backend_tls::gateway_invalid_tls_backend_configuration(&world).await;
    tls::tls_route_simple_same_namespace(&world).await;
    tls::tls_route_hostname_intersection(&world).await;
    tls::tls_route_invalid_backends(&world).await;
    tls::tls_route_not_attached(&world).await;
    tls::tls_route_invalid_reference_grant(&world).await;
    tls::tls_route_listener_kinds(&world).await;
    tls::tls_route_terminate_simple_same_namespace(&world).await;
    tls::tls_route_mixed_termination_same_namespace(&world).await;
    tcp::tcp_route_invalid(&world).await;
    tcp::tcp_route_multiple_routes_attachment(&world).await;
    tcp::tcp_route_parent_refs(&world).await;
    tcp::tcp_route_reference_grant(&world).await;
    tcp::tcp_route_weighted_routing(&world).await;
    udp::udp_route_invalid(&world).await;
    udp::udp_route_multiple_routes_attachment(&world).await;
    udp::udp_route_parent_refs(&world).await;
    udp::udp_route_reference_grant(&world).await;
    udp::udp_route_simple(&world).await;
    listener_sets::listener_set_allowed_namespaces(&world).await;
    listener_sets::listener_set_gateway_parent_section_name_not_found(&world).await;
    listener_sets::listener_set_reference_grant(&world).await;
    listener_sets::listener_set_allowed_namespace_selector(&world).await;
    listener_sets::listener_set_allowed_routes_supported_kinds(&world).await;
    filters::http_route_request_mirrors(&world).await;
    gateway::gateway_invalid_listeners(&world).await;
    gateway::gateway_optional_address_value(&world).await;
    gateway::observed_generation_bumps(&world).await;
    matching::gateway_http_listener_isolation(&world).await;
    gateway::gateway_with_attached_routes(&world).await;
    grpc::grpc_exact_method_matching(&world).await;
    grpc::grpc_route_header_matching(&world).await;
    grpc::grpc_route_listener_hostname_matching(&world).await;
    grpc::grpc_route_named_rule(&world).await;
    grpc::grpc_route_weight(&world).await;
    http::http_route_service_types(&world).await;
    http::http_route_backend_protocol_h2c(&world).await;
    http::http_route_backend_protocol_websocket(&world).await;
    filters::http_route_request_percentage_mirror(&world).await;
    gateway::gateway_modify_listeners(&world).await;
    gateway::gateway_class_observed_generation_bump(&world).await;
    listener_sets::listener_set_allowed_routes_namespaces(&world).await;
    listener_sets::listener_set_dual_parent_ref_independence(&world).await;
    listener_sets::listener_set_http_routing(&world).await;
    listener_sets::listener_set_route_status_scoped_to_parent_ref(&world).await;
}
