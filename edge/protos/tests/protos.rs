//! The `.proto` files under `proto/` are exact copies of those inside the `envoy-types` crate
//! of the lock file, and exactly the files the descriptor set is compiled from (no more).
//! `UPDATE_PROTOS=1` rewrites the copies from the crate (after a version bump of envoy-types).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fairlead_kit::testing::crates::{crate_source, locked_version};

/// The crate's include roots, in the order `protoc` was given them before.
const ROOTS: &[&str] = &[
    "data-plane-api",
    "xds",
    "protoc-gen-validate",
    "googleapis",
    "cel-spec/proto",
    "opentelemetry-proto",
    "client_model",
];

fn committed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("proto")
}

fn files_under(dir: &Path, prefix: &Path, out: &mut BTreeSet<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files_under(&path, prefix, out);
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.insert(
                path.strip_prefix(prefix)
                    .expect("under the prefix")
                    .to_path_buf(),
            );
        }
    }
}

#[test]
fn committed_protos_are_the_envoy_types_copies_the_descriptor_set_is_built_from() {
    let source = crate_source("envoy-types").join("proto");
    let mut files = BTreeSet::new();
    files_under(&committed(), &committed(), &mut files);
    assert!(files.len() > 50, "only {} files under proto/", files.len());

    let update = std::env::var_os("UPDATE_PROTOS").is_some();
    let mut differ = Vec::new();
    for file in &files {
        let original = ROOTS
            .iter()
            .map(|root| source.join(root).join(file))
            .find(|p| p.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "{} is in no include root of {}",
                    file.display(),
                    source.display()
                )
            });
        let theirs = std::fs::read(&original).expect("readable");
        if std::fs::read(committed().join(file)).expect("readable") != theirs {
            if update {
                std::fs::write(committed().join(file), &theirs).expect("writable");
            } else {
                differ.push(format!("{} (from {})", file.display(), original.display()));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "committed protos differ from envoy-types {} (UPDATE_PROTOS=1 copies them):\n{}",
        locked_version("envoy-types"),
        differ.join("\n")
    );

    // Every committed file is compiled in, and the compiler found nothing outside proto/
    // but the well-known types it carries.
    let compiled: BTreeSet<PathBuf> = fairlead_envoy_protos::pool()
        .files()
        .map(|f| PathBuf::from(f.name()))
        .filter(|name| !name.starts_with("google/protobuf"))
        .collect();
    assert_eq!(
        files, compiled,
        "proto/ holds files that are not compiled, or misses some"
    );
}
