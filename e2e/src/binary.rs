//! Where the `fairlead` binary under test is: `FAIRLEAD_BIN`, or the one built in this target
//! directory beside the test executables (`<target>/<profile>/deps/..`). A binary older than
//! any source of the workspace would test old code: refused, saying how to build it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

/// The binary, found (and checked) once per test process.
pub fn path() -> &'static Path {
    static FOUND: OnceLock<PathBuf> = OnceLock::new();
    FOUND.get_or_init(find)
}

fn find() -> PathBuf {
    if let Some(bin) = std::env::var_os("FAIRLEAD_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("tests run from <target>/<profile>/deps");
    let bin = profile_dir.join("fairlead");
    let built = std::fs::metadata(&bin)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "no fairlead binary at {}: build it first (cargo build --bin fairlead; \
                 scripts/test and cargo test --workspace do)",
                bin.display()
            )
        });
    // What changed after this test executable was built is an edit made while the tests
    // run: the run tests the build it started from. What changed before it and after the
    // binary is code the binary does not hold.
    let tests_built = std::fs::metadata(&exe)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| SystemTime::now());
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    if let Some((source, changed)) = newest_source(workspace, tests_built)
        && changed > built
    {
        panic!(
            "{} is older than {}: build it again (cargo build --bin fairlead)",
            bin.display(),
            source.display()
        );
    }
    bin
}

/// The most recently changed `.rs` file under the crates' `src/` directories of `root` (the
/// harness's own excepted: it is not part of the binary). Manifests are left out: a change
/// to one that matters to the binary comes with a change of code or of `Cargo.lock`, and
/// `Cargo.lock` is not compared either — cargo rebuilds the binary when it must, and a
/// dev-dependency added to a manifest does not make the binary old.
/// Changes after `before` are not counted.
fn newest_source(root: &Path, before: SystemTime) -> Option<(PathBuf, SystemTime)> {
    let mut newest: Option<(PathBuf, SystemTime)> = None;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path.is_dir() {
                if !matches!(name.as_ref(), "target" | "tests" | "node_modules" | "e2e")
                    && !name.starts_with('.')
                {
                    stack.push(path);
                }
                continue;
            }
            let source = name.ends_with(".rs") && path.components().any(|c| c.as_os_str() == "src");
            if !source {
                continue;
            }
            if let Ok(changed) = entry.metadata().and_then(|m| m.modified())
                && changed < before
                && newest.as_ref().is_none_or(|(_, t)| changed > *t)
            {
                newest = Some((path, changed));
            }
        }
    }
    newest
}
