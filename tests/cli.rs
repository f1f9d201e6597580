//! The `fairlead` binary as a user runs it without a world: usage errors, `version`, the
//! commands that refuse what they cannot do safely, and `fairlead edge bootstrap`. The worlds
//! of `fairlead up` are the end-to-end tier's (`e2e/tests/`).

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_fairlead");

fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

#[test]
fn version_prints_the_crate_version() {
    let out = run(&["version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("fairlead {}\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    for (args, needle) in [
        (&["--bogus", "version"][..], "unexpected argument '--bogus'"),
        (
            &["up", "--admin-addr", "localhost:notaport"],
            "--admin-addr",
        ),
        (
            &["up", "--drain-deadline=-1"],
            "non-negative number of seconds",
        ),
        (&["--log-format", "xml", "version"], "--log-format"),
        (&["--log-level", "info,[[", "version"], "not a log filter"),
        (&["no-such-command"], "unrecognized subcommand"),
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn edge_xds_refuses_to_serve_plaintext_unless_asked() {
    let out = run(&["edge", "xds", "--admin-addr", "127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--tls-cert-file") && stderr.contains("--insecure"),
        "{stderr}"
    );
}

#[test]
fn edge_bootstrap_prints_a_bootstrap_for_one_gateway() {
    // The bootstrap of `infra/web` against `xds.d8-alb.svc:18000`, with `extra` arguments.
    let print = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec![
            "edge",
            "bootstrap",
            "--gateway",
            "infra/web",
            "--xds",
            "xds.d8-alb.svc:18000",
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_yaml_ng::from_slice(&out.stdout).unwrap()
    };
    let bootstrap = print(&[]);
    assert_eq!(bootstrap["node"]["cluster"], "infra/web");
    assert_eq!(bootstrap["node"]["id"], "web");
    let xds = &bootstrap["staticResources"]["clusters"][0];
    assert_eq!(xds["type"], "STRICT_DNS", "a host name is resolved");
    let address = &xds["loadAssignment"]["endpoints"][0]["lbEndpoints"][0]["endpoint"]["address"]["socketAddress"];
    assert_eq!(address["address"], "xds.d8-alb.svc");
    assert_eq!(address["portValue"], 18000);
    // Delta xDS: a change sends only the resources it touched.
    assert_eq!(
        bootstrap["dynamicResources"]["adsConfig"]["apiType"],
        "DELTA_GRPC"
    );

    // Mutual TLS to the xDS server: the CA as a file, the proxy's certificate and key through
    // the SDS document written beside them (or where --xds-sds-file says).
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let bootstrap = print(&[
        "--xds-ca",
        &path("ca.crt"),
        "--xds-cert",
        &path("proxy.crt"),
        "--xds-key",
        &path("proxy.key"),
    ]);
    let socket = &bootstrap["staticResources"]["clusters"][0]["transportSocket"];
    assert_eq!(socket["name"], "envoy.transport_sockets.tls");
    let context = &socket["typedConfig"];
    assert_eq!(context["sni"], "xds.d8-alb.svc");
    let san = &context["commonTlsContext"]["validationContext"]["matchTypedSubjectAltNames"][0];
    assert_eq!(
        san["sanType"], "DNS",
        "the server must name the address dialled"
    );
    assert_eq!(san["matcher"]["exact"], "xds.d8-alb.svc");
    assert_eq!(
        context["commonTlsContext"]["validationContext"]["trustedCa"]["filename"],
        path("ca.crt")
    );
    let sds = &context["commonTlsContext"]["tlsCertificateSdsSecretConfigs"][0]["sdsConfig"]["pathConfigSource"];
    assert_eq!(sds["path"], path("xds-client-sds.json"));
    let document: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path("xds-client-sds.json")).unwrap())
            .unwrap();
    assert_eq!(
        document["resources"][0]["tlsCertificate"]["privateKey"]["filename"],
        path("proxy.key")
    );
    print(&[
        "--xds-ca",
        &path("ca.crt"),
        "--xds-cert",
        &path("proxy.crt"),
        "--xds-key",
        &path("proxy.key"),
        "--xds-sds-file",
        &path("elsewhere.json"),
    ]);
    assert!(dir.path().join("elsewhere.json").exists());
    let half = run(&[
        "edge",
        "bootstrap",
        "--gateway",
        "a/b",
        "--xds",
        "x:1",
        "--xds-cert",
        "c",
    ]);
    assert_eq!(
        half.status.code(),
        Some(2),
        "a client certificate needs its key and a CA"
    );

    let bad = run(&["edge", "bootstrap", "--gateway", "web", "--xds", "x:1"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("<namespace>/<name>"));
    let bad = run(&["edge", "bootstrap", "--gateway", "a/b", "--xds", "nowhere"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not host:port"));
}

#[test]
fn client_commands_take_kubectls_kubeconfig_and_context() {
    for command in [
        &["graph"][..],
        &[
            "edge",
            "certificate",
            "--gateway",
            "d8-alb/main",
            "--dir",
            "/tmp/x",
        ],
        &["edge", "cleanup-wait"],
    ] {
        let mut args = command.to_vec();
        args.extend([
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "--context",
            "other",
        ]);
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr.contains("/nonexistent/kubeconfig"),
            "{args:?} reads the kubeconfig given: {stderr}"
        );
    }
    for command in [
        &["health", "agent", "--help"][..],
        &["health", "controller", "--help"],
        &["edge", "controller", "--help"],
        &["edge", "xds", "--help"],
        &["edge", "geoproxy", "--help"],
        &["loadtest", "--help"],
    ] {
        let help = String::from_utf8_lossy(&run(command).stdout).into_owned();
        assert!(
            help.contains("--kubeconfig") && help.contains("--context"),
            "{command:?}: {help}"
        );
    }
}
