//! Every CEL rule of the vendored Gateway API bundle is one the embedded API server runs: it
//! compiles and calls no function the server lacks, so nothing a real cluster refuses is
//! accepted locally.

use fairlead_edge_controller::crds::{Channel, bundle};

#[test]
fn every_rule_of_the_bundle_runs() {
    let mut skipped = Vec::new();
    let mut rules = 0;
    for channel in [Channel::Standard, Channel::Experimental] {
        for object in bundle(channel) {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            for version in object["spec"]["versions"].as_array().into_iter().flatten() {
                let schema = &version["schema"]["openAPIV3Schema"];
                rules += serde_json::to_string(schema)
                    .unwrap()
                    .matches("\"rule\":")
                    .count();
                for report in fairlead_apiserver::objects::cel::unsupported_rules(schema) {
                    skipped.push(format!("{channel:?} {name} {}: {report}", version["name"]));
                }
            }
        }
    }
    assert!(rules > 100, "the bundle's rules were found ({rules})");
    assert!(
        skipped.is_empty(),
        "{} of {rules} rules skipped:\n{}",
        skipped.len(),
        skipped.join("\n")
    );
}
