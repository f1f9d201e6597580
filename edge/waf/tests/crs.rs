//! The OWASP Core Rule Set (Debian's `modsecurity-crs`) on libmodsecurity, as the WAF
//! compiles it for a route: the CRS's own attack classes are blocked at paranoia 1, ordinary
//! requests pass, detection only passes both, paranoia 4 blocks what 1 lets through, and a
//! route's directive removing a rule lets its request through.

use fairlead_edge_model::annotations::waf::{Mode, RuleSet};
use fairlead_edge_model::seclang::{Crs, directives};
use fairlead_modsecurity::{Engine, Request, Rules, Verdict};

fn compile(set: &RuleSet) -> Rules {
    let engine = Engine::new("fairlead-waf-test").unwrap();
    engine
        .compile(&directives(set, &Crs::default()))
        .unwrap_or_else(|e| panic!("the CRS compiles: {e}"))
}

fn crs(mode: Mode, level: u8, directives: &[&str]) -> Rules {
    compile(&RuleSet {
        mode,
        crs_paranoia: Some(level),
        rules: String::new(),
        directives: directives.iter().map(|d| (*d).to_owned()).collect(),
    })
}

fn get(rules: &Rules, uri: &str, user_agent: &str) -> Verdict {
    let headers: [(&[u8], &[u8]); 3] = [
        (b"Host", b"shop.example.com"),
        (b"User-Agent", user_agent.as_bytes()),
        (b"Accept", b"text/html"),
    ];
    rules.inspect(&Request {
        client: "192.0.2.10".parse().unwrap(),
        client_port: 50000,
        server: "10.0.0.1".parse().unwrap(),
        server_port: 443,
        method: "GET",
        uri,
        http_version: "1.1",
        headers: &headers,
        body: b"",
    })
}

const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0";

fn ids(verdict: &Verdict) -> Vec<&str> {
    verdict.matches.iter().map(|m| m.id.as_str()).collect()
}

#[test]
fn the_crs_blocks_its_attack_classes_and_passes_ordinary_requests() {
    let rules = crs(Mode::On, 1, &[]);
    for (uri, agent, rule) in [
        ("/products?id=1%27%20OR%20%271%27=%271", BROWSER, "942"),
        (
            "/search?q=%3Cscript%3Ealert(1)%3C/script%3E",
            BROWSER,
            "941",
        ),
        ("/download?file=../../../../etc/passwd", BROWSER, "930"),
        ("/", "sqlmap/1.7.2#stable (https://sqlmap.org)", "913"),
    ] {
        let verdict = get(&rules, uri, agent);
        assert_eq!(verdict.status, Some(403), "{uri} {agent}: {verdict:?}");
        assert!(
            ids(&verdict).iter().any(|id| id.starts_with(rule)),
            "{uri}: a {rule} rule in {:?}",
            ids(&verdict)
        );
        assert!(
            ids(&verdict).contains(&"949110"),
            "blocked by the anomaly score: {:?}",
            ids(&verdict)
        );
    }
    for uri in ["/", "/products?id=42", "/search?q=blue+shoes&page=2"] {
        assert_eq!(get(&rules, uri, BROWSER), Verdict::default(), "{uri}");
    }
}

#[test]
fn detection_only_passes_and_names_the_rules() {
    let rules = crs(Mode::DetectionOnly, 1, &[]);
    let verdict = get(&rules, "/products?id=1%27%20OR%20%271%27=%271", BROWSER);
    assert_eq!(verdict.status, None);
    assert!(
        ids(&verdict).iter().any(|id| id.starts_with("942")),
        "{verdict:?}"
    );
}

#[test]
fn paranoia_four_blocks_what_one_lets_through() {
    // A lone SQL keyword in a parameter: 942 rules of paranoia 2 and above find it.
    let uri = "/notes?text=select%20everything%20from%20the%20menu";
    let one = crs(Mode::On, 1, &[]);
    let four = crs(Mode::On, 4, &[]);
    assert_eq!(
        get(&one, uri, BROWSER).status,
        None,
        "{:?}",
        get(&one, uri, BROWSER)
    );
    assert_eq!(get(&four, uri, BROWSER).status, Some(403));
}

#[test]
fn a_directive_removing_a_rule_lets_its_request_through() {
    let uri = "/";
    let agent = "sqlmap/1.7.2#stable (https://sqlmap.org)";
    let blocked = get(&crs(Mode::On, 1, &[]), uri, agent);
    let rule = blocked.matches[0].id.clone();
    let removed = format!("SecRuleRemoveById {rule}");
    assert_eq!(
        get(&crs(Mode::On, 1, &[&removed]), uri, agent).status,
        None,
        "{removed}"
    );
}

#[test]
fn configmap_rules_come_before_the_annotations_directives() {
    let rules = compile(&RuleSet {
        mode: Mode::On,
        crs_paranoia: None,
        rules: "SecRule ARGS:token \"@streq letmein\" \"id:10001,phase:1,deny,status:418,log,msg:'known token'\"\n".into(),
        directives: vec![],
    });
    assert_eq!(get(&rules, "/?token=letmein", BROWSER).status, Some(418));
    let removed = compile(&RuleSet {
        mode: Mode::On,
        crs_paranoia: None,
        rules: "SecRule ARGS:token \"@streq letmein\" \"id:10001,phase:1,deny,status:418,log,msg:'known token'\"\n".into(),
        directives: vec!["SecRuleRemoveById 10001".into()],
    });
    assert_eq!(get(&removed, "/?token=letmein", BROWSER).status, None);
}
