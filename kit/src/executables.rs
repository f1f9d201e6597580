//! Finding an executable the way a shell would, with an environment variable to name it
//! outright (`FAIRLEAD_ENVOY=/opt/envoy/bin/envoy`).

use std::path::PathBuf;

/// The executable `variable` names (when it is a file), or the first file `name` on `PATH`.
pub fn find(name: &str, variable: &str) -> Option<PathBuf> {
    if let Some(named) = std::env::var_os(variable).map(PathBuf::from) {
        return named.is_file().then_some(named);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_on_the_path_unless_named() {
        assert!(find("sh", "FAIRLEAD_TEST_NO_SUCH_VARIABLE").is_some());
        assert!(find("fairlead-no-such-program", "FAIRLEAD_TEST_NO_SUCH_VARIABLE").is_none());
    }
}
