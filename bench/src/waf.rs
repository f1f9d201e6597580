//! `fairlead bench edge --only waf`: what the WAF (`mod-security` with the OWASP CRS at
//! paranoia 1) costs a route, through a real Envoy, beside the same route without it in the
//! same run. Two worlds, each its own API server, `fairlead edge xds` and backend: one whose
//! proxied route asks for the WAF, one whose route asks nothing; both have a second route
//! (a redirect the proxy answers) without the annotation. The Envoy under test (one worker)
//! and `fairlead edge waf` share core 1, as a proxy pod's containers share its CPU; wrk runs on
//! core 0. Rounds interleave the worlds (A B A B …, after a warm-up each) and measure a small
//! GET and a 16 KiB POST on the proxied route, and a GET on the unannotated route.
//!
//! The peer, in the same rounds: nginx (one worker, core 1) with ModSecurity's nginx
//! connector (Debian's `libnginx-mod-http-modsecurity`) — what ingress-nginx runs for its
//! ModSecurity — compiling the very same SecLang ([`fairlead_edge_model::seclang`]) on the same
//! libmodsecurity and CRS, beside the same nginx without it: the same engine in-process
//! against fairlead's engine behind Envoy's `ext_proc`.

use std::path::Path;

use crate::envoy::{EnvoyBenchError, failed, free_port};
use crate::geoip::{Harness, Shape, Side, wrk_with};

/// What the measured requests are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// A small GET on the proxied route.
    Get,
    /// A POST of a 16 KiB form body on the proxied route.
    Post,
    /// A GET on the other route of the listener (never annotated).
    Neighbour,
}

/// Both worlds of one load.
#[derive(Clone, Debug)]
pub struct Figures {
    /// The requests.
    pub load: Load,
    /// The world whose proxied route asks for the WAF.
    pub with: Side,
    /// The world whose route asks nothing.
    pub without: Side,
    /// nginx with ModSecurity on the location (GET and POST only).
    pub nginx_with: Side,
    /// nginx without it.
    pub nginx_without: Side,
}

/// The WAF the measured route asks for.
const ANNOTATION: &str = r#"{alb.network.deckhouse.io/mod-security: '{"mode": "on", "preset": "owasp-crs", "paranoiaLevel": 1}'}"#;

/// wrk's Lua for the POST: a 16 KiB urlencoded form the CRS reads as arguments.
const POST: &str = r#"wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.body = "comment=" .. string.rep("a quiet afternoon by the sea ", 565)
"#;

/// `rounds` interleaved rounds of `seconds` each world and load; `fairlead` (built with the
/// WAF) runs `edge xds` and `edge waf`.
pub async fn cost(
    fairlead: &Path,
    rounds: usize,
    seconds: u64,
) -> Result<Vec<Figures>, EnvoyBenchError> {
    let envoy = fairlead_kit::executables::find("envoy", "FAIRLEAD_ENVOY")
        .ok_or(EnvoyBenchError::NoEnvoy)?;
    let dir = std::env::temp_dir().join(format!("fairlead-bench-waf-{}", std::process::id()));
    let result = run(fairlead, &envoy, &dir, rounds, seconds).await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn run(
    fairlead: &Path,
    envoy: &Path,
    dir: &Path,
    rounds: usize,
    seconds: u64,
) -> Result<Vec<Figures>, EnvoyBenchError> {
    let (with_dir, without_dir) = (dir.join("with"), dir.join("without"));
    for d in [&with_dir, &without_dir] {
        std::fs::create_dir_all(d).map_err(|e| failed("a work directory")(e.to_string()))?;
    }
    let script = dir.join("post.lua");
    std::fs::write(&script, POST).map_err(|e| failed("the POST script")(e.to_string()))?;
    let nginx = crate::nginx::binary()?;
    let module = Path::new("/usr/lib/nginx/modules/ngx_http_modsecurity_module.so");
    if !module.exists() {
        return Err(EnvoyBenchError::Failed(
            "no ModSecurity module for nginx, the peer (Debian: apt-get install libnginx-mod-http-modsecurity)".into(),
        ));
    }
    let rules = dir.join("waf.conf");
    let set = fairlead_edge_model::annotations::waf::RuleSet {
        mode: fairlead_edge_model::annotations::waf::Mode::On,
        crs_paranoia: Some(1),
        rules: String::new(),
        directives: Vec::new(),
    };
    std::fs::write(
        &rules,
        fairlead_edge_model::seclang::directives(
            &set,
            &fairlead_edge_model::seclang::Crs::default(),
        ),
    )
    .map_err(|e| failed("the rules")(e.to_string()))?;
    let mut waf = start_waf(fairlead, &with_dir)?;
    let world = |annotations: &'static str| {
        move |port, backend| {
            crate::geoip::world_of("waf", "\n  gatewayName: gw", annotations, (port, backend))
        }
    };
    let with = Harness::start(fairlead, envoy, &with_dir, world(ANNOTATION)).await?;
    let without = Harness::start(fairlead, envoy, &without_dir, world("{}")).await?;
    // The neighbour first: the WAF may still be busy with the POSTs in flight when wrk stops.
    let loads = [Load::Neighbour, Load::Get, Load::Post];
    let empty = || Side {
        rates: Vec::new(),
        latency: Vec::new(),
    };
    let mut figures: Vec<Figures> = loads
        .iter()
        .map(|&load| Figures {
            load,
            with: empty(),
            without: empty(),
            nginx_with: empty(),
            nginx_without: empty(),
        })
        .collect();
    let nginx_port = free_port()?;
    let nginx_url = format!("http://127.0.0.1:{nginx_port}/");
    let main = format!("load_module {};", module.display());
    let location = format!(
        "      modsecurity on;\n      modsecurity_rules_file {};",
        rules.display()
    );
    let nginx_config = |modsecurity: bool| {
        let path = dir.join(format!("nginx-{modsecurity}.conf"));
        let extra = if modsecurity {
            crate::nginx::Extra {
                main: &main,
                location: &location,
                ..crate::nginx::Extra::default()
            }
        } else {
            crate::nginx::Extra::default()
        };
        std::fs::write(
            &path,
            crate::nginx::config(dir, nginx_port, with.backend_port, extra),
        )
        .map(|()| (path, modsecurity))
        .map_err(|e| failed("nginx's configuration")(e.to_string()))
    };
    let nginx_configs = [nginx_config(true)?, nginx_config(false)?];
    let outcome = async {
        for round in 0..=rounds {
            for (harness, cwd, waf_side) in
                [(&with, &with_dir, true), (&without, &without_dir, false)]
            {
                let services = serde_json::json!({
                    "static_resources": fairlead_edge_proxy::services(cwd),
                });
                let mut child = harness.envoy_with(envoy, cwd, &services).await?;
                let measured = measure(&harness.url, &loads, round, seconds, |load| match load {
                    Load::Get => Some((Shape::Proxied.host(), None)),
                    Load::Post => Some((Shape::Proxied.host(), Some(script.as_path()))),
                    Load::Neighbour => Some((Shape::Redirect.host(), None)),
                })
                .await;
                let _ = child.kill().await;
                let _ = child.wait().await;
                for (i, figure) in measured? {
                    record(
                        if waf_side {
                            &mut figures[i].with
                        } else {
                            &mut figures[i].without
                        },
                        figure,
                    );
                }
                // The requests the WAF still works on once wrk stops are not the next load's.
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            for (config, modsecurity) in &nginx_configs {
                let child = crate::nginx::start(&nginx, config, &nginx_url).await?;
                let measured = measure(&nginx_url, &loads, round, seconds, |load| match load {
                    Load::Get => Some((Shape::Proxied.host(), None)),
                    Load::Post => Some((Shape::Proxied.host(), Some(script.as_path()))),
                    Load::Neighbour => None,
                })
                .await;
                crate::nginx::stop(child).await;
                for (i, figure) in measured? {
                    record(
                        if *modsecurity {
                            &mut figures[i].nginx_with
                        } else {
                            &mut figures[i].nginx_without
                        },
                        figure,
                    );
                }
            }
        }
        Ok::<_, EnvoyBenchError>(())
    }
    .await;
    with.stop().await;
    without.stop().await;
    let _ = waf.kill().await;
    outcome.map(|()| figures)
}

/// wrk's figures: requests/s, p50, p99.
type Figure = (f64, std::time::Duration, std::time::Duration);

/// One round of `loads` on `url`, each as `request` shapes it (its Host and wrk script;
/// `None` skips it): the index of each load measured and its figure. The warm-up round
/// (`round` 0) is short and gives none.
async fn measure<'a>(
    url: &str,
    loads: &[Load],
    round: usize,
    seconds: u64,
    request: impl Fn(Load) -> Option<(&'static str, Option<&'a Path>)>,
) -> Result<Vec<(usize, Figure)>, EnvoyBenchError> {
    let mut out = Vec::new();
    for (i, load) in loads.iter().enumerate() {
        let Some((host, script)) = request(*load) else {
            continue;
        };
        let figure = wrk_with(url, host, if round == 0 { 2 } else { seconds }, script).await?;
        if round > 0 {
            out.push((i, figure));
        }
    }
    Ok(out)
}

/// Adds `figure` to `side`.
fn record(side: &mut Side, (rate, p50, p99): Figure) {
    side.rates.push(rate);
    side.latency.push((p50, p99));
}

/// `fairlead edge waf` on core 1 (beside the Envoy under test), its socket in `dir`.
fn start_waf(fairlead: &Path, dir: &Path) -> Result<tokio::process::Child, EnvoyBenchError> {
    let socket = dir.join(fairlead_edge_model::names::WAF_SOCKET);
    tokio::process::Command::new("taskset")
        .args(["-c", "1"])
        .arg(fairlead)
        .args(["edge", "waf", "--log-level", "warn", "--socket"])
        .arg(&socket)
        .args(["--admin-addr", &format!("127.0.0.1:{}", free_port()?)])
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            failed("starting fairlead edge waf (a build with --features waf)")(e.to_string())
        })
}
