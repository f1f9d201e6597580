//! The embedded API server's request decoding on arbitrary bytes: a Kubernetes protobuf body,
//! label and field selectors, a watch's parameters, the three patch types and a server-side
//! apply onto a Pod (JSON merge, strategic merge, JSON patch; apply with and without force
//! against another manager's fields), and a webhook's AdmissionReview response. None may
//! panic; each accepts or refuses.

#![no_main]

use fairlead_apiserver::objects::apply::{ApplyRequest, apply};
use fairlead_apiserver::objects::{patch, selectors};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = fairlead_apiserver::serve::protobuf::decode_body(data);
    let text = String::from_utf8_lossy(data);
    let _ = selectors::LabelSelector::parse(&text);
    let _ = selectors::FieldSelector::parse(&text, "Pod");
    let query = text
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let _ = fairlead_apiserver::serve::watch::Params::read(&query);
    let Ok(input) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {"a": "b"}, "finalizers": ["x"],
            "managedFields": [{"manager": "other", "operation": "Apply", "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:a": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}}}]},
        "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}});
    let _ = patch::merge(&pod, &input);
    let _ = patch::strategic(&pod, &input);
    let _ = patch::json(&pod, &input);
    // What the server hands an apply: an object whose metadata is an object (else refused).
    let mut config = input.clone();
    if config.is_object()
        && config
            .get("metadata")
            .is_none_or(serde_json::Value::is_null)
    {
        config["metadata"] = serde_json::json!({});
    }
    let appliable = config.is_object() && config["metadata"].is_object();
    for force in [false, true].into_iter().filter(|_| appliable) {
        let request = ApplyRequest {
            manager: "fuzz",
            force,
            subresource: "",
            api_version: "v1",
            schema: None,
        };
        let _ = apply(&pod, &config, &request);
        let _ = apply(&serde_json::json!({}), &config, &request);
    }
    let _ = fairlead_apiserver::serve::admission::answer(&input, "u-1", "fuzz.example.com", true);
});
