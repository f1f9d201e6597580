//! The embedded API server's request decoding on arbitrary bytes: a Kubernetes protobuf body,
//! label and field selectors, and the three patch types applied to a Pod (JSON merge,
//! strategic merge, JSON patch). None may panic; each accepts or refuses.

#![no_main]

use fairlead_apiserver::objects::{patch, selectors};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let _ = fairlead_apiserver::serve::protobuf::decode_body(data);
    let text = String::from_utf8_lossy(data);
    let _ = selectors::LabelSelector::parse(&text);
    let _ = selectors::FieldSelector::parse(&text, "Pod");
    if let Ok(patch) = serde_json::from_slice::<serde_json::Value>(data) {
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}});
        let _ = patch::merge(&pod, &patch);
        let _ = patch::strategic(&pod, &patch);
        let _ = patch::json(&pod, &patch);
    }
});
