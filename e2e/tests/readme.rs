//! The README's walks, run as written: the shell block of "A minute with the edge" and of "A
//! minute with health", each by `bash` in a directory where `fairlead up` (on its default
//! loopback block, as a user's first one is) wrote `.fairlead/kubeconfig`. What each block
//! promises in its comments is checked from its output and from the API server.

use std::path::Path;
use std::process::{Command, Stdio};

use fairlead_e2e::{Up, until};

/// The first shell block after the heading `## <section>` of the README.
fn block(section: &str) -> String {
    let readme = std::fs::read_to_string(fairlead_e2e::workspace().join("README.md")).unwrap();
    let heading = format!("\n## {section}\n");
    let after = &readme[readme.find(&heading).expect("the section") + heading.len()..];
    let start = after.find("```sh\n").expect("its shell block") + "```sh\n".len();
    let end = after[start..].find("\n```").expect("the block's end");
    after[start..start + end].to_owned()
}

/// Runs `script` with bash in `dir` (its own process group, so that the backends it starts
/// in the background go with [`Walk`]); its standard output.
struct Walk {
    group: u32,
}

impl Walk {
    fn run(up: &Up, dir: &Path, kubeconfig: &Path, script: &str) -> (Self, String) {
        use std::os::unix::process::CommandExt as _;
        // Files, not pipes: the backends the block starts in the background keep what they
        // inherit open after bash exits.
        let (out, err) = (dir.join("walk.out"), dir.join("walk.err"));
        let mut child = Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(dir)
            .env("KUBECONFIG", kubeconfig)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let walk = Self { group: child.id() };
        let status = child.wait().unwrap();
        let stdout = std::fs::read_to_string(&out).unwrap();
        assert!(
            status.success(),
            "the README's block failed:\n{script}\n--- stdout\n{stdout}\n--- stderr\n{}\n--- fairlead up\n{}",
            std::fs::read_to_string(&err).unwrap(),
            up.last_lines(40)
        );
        (walk, stdout)
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["--", &format!("-{}", self.group)])
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walks_run_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join(".fairlead/kubeconfig");
    let up = Up::builder()
        .path("--kubeconfig", &kubeconfig)
        .option("--loopback-block", "0")
        .start();
    up.wait_ready().await;

    let (_edge, out) = Walk::run(
        &up,
        dir.path(),
        &kubeconfig,
        &block("A minute with the edge"),
    );
    // The curl through the instance's Envoy reached the backend (python's directory listing).
    assert!(out.contains("Directory listing for /"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("main ") && l.contains("public") && l.contains("true")),
        "the instance's row: {out}"
    );

    let (_health, out) = Walk::run(&up, dir.path(), &kubeconfig, &block("A minute with health"));
    assert!(
        out.lines()
            .any(|l| l.starts_with("web-local-http-ipv4-0") && l.contains("127.0.0.2")),
        "the pod's slice: {out}"
    );
    assert!(
        out.contains("endpointStatuses"),
        "the resource's status: {out}"
    );
    let slices: kube::Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        kube::Api::namespaced(up.client().await, "default");
    until("the probed pod ready in its slice", async || {
        let slice = slices.get_opt("web-local-http-ipv4-0").await.ok()??;
        let endpoint = slice.endpoints.into_iter().flatten().next()?;
        (endpoint.conditions?.ready == Some(true)).then_some(())
    })
    .await;
}
