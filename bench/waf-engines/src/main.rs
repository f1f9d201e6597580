//! Two SecLang engines on one rule set: libmodsecurity 3 (fairlead's WAF engine, through
//! `fairlead-modsecurity`) and zentinel-modsec (pure Rust). Both compile the SecLang fairlead
//! writes for `{"mode": "on", "preset": "owasp-crs", "paranoiaLevel": N}`
//! (`fairlead_edge_model::seclang`), with the CRS of `$CRS` (a checkout holding
//! `crs-setup.conf` and `rules/`) or Debian's; then each sample request goes through both:
//! their verdicts side by side, then the CPU time of one inspection (median of interleaved
//! rounds, one thread).
//!
//! `cargo run --release -- [paranoia level]`

use std::time::{Duration, Instant};

use fairlead_edge_model::annotations::waf::{Mode, RuleSet};
use fairlead_edge_model::seclang::{Crs, directives};
use fairlead_modsecurity::{Engine, Request, Rules};
use zentinel_modsec::ModSecurity;

const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

/// A sample request.
struct Sample {
    name: &'static str,
    uri: &'static str,
    user_agent: &'static str,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Sample {
    fn get(name: &'static str, uri: &'static str) -> Self {
        Self::new(name, uri, BROWSER, "", Vec::new())
    }

    fn new(
        name: &'static str,
        uri: &'static str,
        user_agent: &'static str,
        content_type: &'static str,
        body: Vec<u8>,
    ) -> Self {
        Self {
            name,
            uri,
            user_agent,
            content_type,
            body,
        }
    }

    fn method(&self) -> &'static str {
        if self.body.is_empty() { "GET" } else { "POST" }
    }

    fn headers(&self) -> Vec<(&str, String)> {
        let mut headers = vec![
            ("Host", "shop.example.com".to_owned()),
            ("User-Agent", self.user_agent.to_owned()),
            ("Accept", "text/html".to_owned()),
        ];
        if !self.body.is_empty() {
            headers.push(("Content-Type", self.content_type.to_owned()));
            headers.push(("Content-Length", self.body.len().to_string()));
        }
        headers
    }
}

/// What an engine made of a sample: the status it interrupts with, the rules that matched.
type Verdict = (Option<u16>, Vec<String>);

fn libmodsecurity(rules: &Rules, sample: &Sample) -> Verdict {
    let headers = sample.headers();
    let headers: Vec<(&[u8], &[u8])> = headers
        .iter()
        .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
        .collect();
    let verdict = rules.inspect(&Request {
        client: "192.0.2.10".parse().expect("an address"),
        client_port: 50000,
        server: "10.0.0.1".parse().expect("an address"),
        server_port: 443,
        method: sample.method(),
        uri: sample.uri,
        http_version: "1.1",
        headers: &headers,
        body: &sample.body,
    });
    (
        verdict.status,
        verdict.matches.into_iter().map(|m| m.id).collect(),
    )
}

fn zentinel(engine: &ModSecurity, sample: &Sample) -> Verdict {
    let mut tx = engine.new_transaction();
    tx.set_client_addr("192.0.2.10", 50000);
    tx.set_server_addr("10.0.0.1", 443);
    let run = |tx: &mut zentinel_modsec::Transaction| -> zentinel_modsec::Result<()> {
        tx.process_uri(sample.uri, sample.method(), "HTTP/1.1")?;
        for (name, value) in sample.headers() {
            tx.add_request_header(name, &value)?;
        }
        tx.process_request_headers()?;
        if tx.intervention().is_none() {
            tx.append_request_body(&sample.body)?;
            tx.process_request_body()?;
        }
        Ok(())
    };
    if let Err(e) = run(&mut tx) {
        return (Some(0), vec![format!("error: {e}")]);
    }
    // The rules that matched, less the CRS's setup and paranoia-level bookkeeping (90xxxx,
    // 9xx013/9xx014: `nolog` rules, which libmodsecurity's messages leave out too).
    let logged = tx
        .matched_rules()
        .iter()
        .filter(|id| !id.ends_with("013") && !id.ends_with("014") && !id.starts_with("90"))
        .cloned()
        .collect();
    (tx.intervention().map(|i| i.status), logged)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let level: u8 = std::env::args()
        .nth(1)
        .map(|l| l.parse().expect("a paranoia level, 1–4"))
        .unwrap_or(1);
    let crs = match std::env::var("CRS") {
        Ok(dir) => Crs {
            setup: format!("{dir}/crs-setup.conf").into(),
            rules: format!("{dir}/rules").into(),
        },
        Err(_) => Crs::default(),
    };
    let text = directives(
        &RuleSet {
            mode: Mode::On,
            crs_paranoia: Some(level),
            rules: String::new(),
            directives: Vec::new(),
        },
        &crs,
    );
    let started = Instant::now();
    let lib = Engine::new("fairlead-waf-engines")
        .and_then(|e| e.compile(&text))
        .unwrap_or_else(|e| panic!("libmodsecurity: {e}"));
    println!(
        "libmodsecurity compiles the rule set in {:?}",
        started.elapsed()
    );
    let started = Instant::now();
    let zen = ModSecurity::from_string(&text).unwrap_or_else(|e| panic!("zentinel-modsec: {e}"));
    println!(
        "zentinel-modsec compiles it in {:?} ({} rules)",
        started.elapsed(),
        zen.rule_count()
    );

    let mut form = String::from("a=1");
    while form.len() < 16 * 1024 {
        form.push_str("&field=some+ordinary+text+value");
    }
    let samples = [
        Sample::get("GET /", "/"),
        Sample::get("GET with a query", "/search?q=blue+shoes&page=2"),
        Sample::get("SQL injection", "/products?id=1%27%20OR%20%271%27=%271"),
        Sample::get("XSS", "/search?q=%3Cscript%3Ealert(1)%3C/script%3E"),
        Sample::get("path traversal", "/download?file=../../../../etc/passwd"),
        Sample::get("command injection", "/?cmd=;cat%20/etc/passwd"),
        Sample::new(
            "scanner",
            "/",
            "sqlmap/1.7.2#stable (https://sqlmap.org)",
            "",
            Vec::new(),
        ),
        Sample::new(
            "16 KiB form",
            "/submit",
            BROWSER,
            "application/x-www-form-urlencoded",
            form.into_bytes(),
        ),
        Sample::new(
            "SQLi in JSON",
            "/api",
            BROWSER,
            "application/json",
            br#"{"name":"shoe","q":"1' or '1'='1"}"#.to_vec(),
        ),
        Sample::new(
            "broken JSON",
            "/api",
            BROWSER,
            "application/json",
            b"{not json".to_vec(),
        ),
    ];

    println!("\n| sample | libmodsecurity | zentinel-modsec | same status |\n|---|---|---|---|");
    for sample in &samples {
        let (a, b) = (libmodsecurity(&lib, sample), zentinel(&zen, sample));
        println!(
            "| {} | {:?} {:?} | {:?} {:?} | {} |",
            sample.name,
            a.0,
            a.1,
            b.0,
            b.1,
            if a.0 == b.0 { "yes" } else { "**no**" }
        );
    }

    println!(
        "\n| sample | libmodsecurity | zentinel-modsec | libmodsecurity / zentinel |\n|---|---|---|---|"
    );
    for sample in &samples {
        let n = if sample.body.len() > 1024 { 20 } else { 300 };
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..n {
                std::hint::black_box(libmodsecurity(&lib, sample));
            }
            a.push(t.elapsed() / n);
            let t = Instant::now();
            for _ in 0..n {
                std::hint::black_box(zentinel(&zen, sample));
            }
            b.push(t.elapsed() / n);
        }
        let (a, b) = (median(a), median(b));
        println!(
            "| {} | {} µs | {} µs | {:.2} |",
            sample.name,
            a.as_micros(),
            b.as_micros(),
            a.as_secs_f64() / b.as_secs_f64()
        );
    }
}
