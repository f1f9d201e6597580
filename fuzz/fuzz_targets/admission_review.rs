//! The ALB gateway controller's admission webhooks on an arbitrary AdmissionReview: its
//! `request` decoded ([`Review::decode`]) and put to every rule, with the objects the
//! webhook server would look up for it (the Gateway an instance or a ListenerSet names, the
//! ListenerSet's siblings, a route's parent Gateways) taken from the input too. No rule may
//! panic; each admits or refuses.

#![no_main]

use fairlead_edge_controller_plan::admission::{self, Review};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(input) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(review) = Review::decode(&input["request"]) else {
        return;
    };
    let request = review.request();
    let gateway = &input["gateway"];
    let gateway = (!gateway.is_null()).then_some(gateway);
    let _ = admission::instance_gateway(&request);
    let _ = admission::instance(&request, gateway);
    let _ = admission::gateway(
        &request,
        &["system:serviceaccount:d8-alb:editor".to_owned()],
    );
    let _ = admission::listener_set_parent(&request);
    let siblings = input["siblings"].as_array().cloned().unwrap_or_default();
    let _ = admission::listener_set(&request, gateway, &siblings);
    let parents: Vec<(usize, serde_json::Value)> = admission::route_parents(&request)
        .into_iter()
        .map(|(n, _)| (n, input["gateway"].clone()))
        .collect();
    let _ = admission::route(&request, &parents);
    let _ =
        admission::first_difference(&input["request"]["object"], &input["request"]["oldObject"]);
});
