//! Every HTTPRoute annotation parser the edge reads: bytes read as `key=value` lines under
//! Deckhouse's prefix (seeded with the documented annotations, `fuzz/corpus/annotations`);
//! reading them must never panic, only accept or name what is wrong.

#![no_main]

use std::collections::BTreeMap;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let annotations: BTreeMap<String, String> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| {
            (
                format!("{}{k}", fairlead_edge_model::annotations::PREFIX),
                v.replace("\\n", "\n"),
            )
        })
        .collect();
    let _ = fairlead_edge_model::annotations::Annotations::read(&annotations);
});
