//! The run's `ConformanceReport` (the suite's v1.6 schema, `conformance/apis/v1`), made as
//! the suite's own `Report()` makes it: the suite as data (`e2e/tests/conformance/suite.yaml`:
//! each Gateway profile's core and extended features, each test's features), the features
//! fairlead claims (every feature of the five profiles but [`UNSUPPORTED`]), and the tests the
//! run passed ([`Run`]). A test whose features are all claimed must have passed — a claim
//! without its passing tests refuses to make a report — and counts in each profile whose
//! features hold all of its own, as an extended test when one of them is not the profile's
//! core. Tests needing a feature not claimed are left out, as the suite leaves them out.

use std::collections::BTreeSet;
use std::future::Future;

use serde::{Deserialize, Serialize};

/// The extended features fairlead does not claim, and why (the report's header and the
/// README say so): none.
pub const UNSUPPORTED: &[(&str, &str)] = &[];

/// The tests transcribed from the suite's main branch after the release (in the run, not in
/// the report).
pub const AFTER_RELEASE: &[&str] = &[
    "HTTPRouteRetryConnectionError",
    "HTTPRouteRetryWithTimeouts",
];

/// The Gateway API release the suite is transcribed from.
pub const SUITE_VERSION: &str = "v1.6.1";

/// The suite as data.
#[derive(Debug, Deserialize)]
pub struct Suite {
    /// The Gateway profiles.
    pub profiles: Vec<Profile>,
    /// Every test.
    pub tests: Vec<Test>,
}

/// A conformance profile: its core and extended features.
#[derive(Debug, Deserialize)]
pub struct Profile {
    /// `GATEWAY-HTTP`, …
    pub name: String,
    /// Its core features.
    pub core: BTreeSet<String>,
    /// Its extended features.
    pub extended: BTreeSet<String>,
}

/// A test: its short name, the features it needs, whether it is provisional.
#[derive(Debug, Deserialize)]
pub struct Test {
    /// Its short name.
    pub name: String,
    /// The features it needs.
    pub features: Vec<String>,
    /// Provisional.
    pub provisional: bool,
}

/// The tests a run passed, by short name.
#[derive(Debug, Default)]
pub struct Run {
    passed: BTreeSet<String>,
}

impl Run {
    /// Runs `test`, the transcription of the suite's tests `names`, and counts them passed
    /// once it returns (a failing test panics). The test runs boxed: a hundred tests' futures
    /// held in one test function's would not fit a test thread's stack.
    pub fn run<'a>(
        &'a mut self,
        names: &'a [&'a str],
        test: impl Future<Output = ()> + 'a,
    ) -> impl Future<Output = ()> + 'a {
        let test = Box::pin(test);
        async move {
            test.await;
            self.passed.extend(names.iter().map(|n| (*n).to_owned()));
        }
    }

    /// Counts `names` passed without running anything, as the suite's own bodies of these
    /// tests do nothing for an implementation that claims `feature` (they check only its
    /// absence); refused when `feature` is not claimed.
    pub fn claims(&mut self, suite: &Suite, names: &[&str], feature: &str) {
        assert!(
            suite.supported(UNSUPPORTED).contains(feature),
            "{names:?} run only when {feature} is not claimed"
        );
        self.passed.extend(names.iter().map(|n| (*n).to_owned()));
    }
}

impl Suite {
    /// `e2e/tests/conformance/suite.yaml`.
    pub fn load() -> Suite {
        let path = crate::workspace().join("e2e/tests/conformance/suite.yaml");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The features claimed: every feature of the profiles but `unsupported`'s.
    pub fn supported(&self, unsupported: &[(&str, &str)]) -> BTreeSet<String> {
        self.profiles
            .iter()
            .flat_map(|p| p.core.iter().chain(&p.extended))
            .filter(|f| unsupported.iter().all(|(u, _)| u != f))
            .cloned()
            .collect()
    }

    /// The report of a run that passed `run`'s tests, dated `date`, claiming every feature
    /// but [`UNSUPPORTED`] ([`Suite::report_claiming`]).
    pub fn report(&self, run: &Run, date: &str) -> Result<Report, Vec<String>> {
        self.report_claiming(run, date, UNSUPPORTED)
    }

    /// The report of a run that passed `run`'s tests, dated `date`, claiming every feature
    /// but `unsupported`'s (each with why); what is wrong, when something is: tests the
    /// claims need that the run did not pass, tests the run names that the suite does not
    /// have.
    pub fn report_claiming(
        &self,
        run: &Run,
        date: &str,
        unsupported: &[(&str, &str)],
    ) -> Result<Report, Vec<String>> {
        let supported = self.supported(unsupported);
        let unknown: Vec<String> = run
            .passed
            .iter()
            .filter(|n| {
                !AFTER_RELEASE.contains(&n.as_str()) && self.tests.iter().all(|t| &t.name != *n)
            })
            .map(|n| format!("{n}: not a test of the suite"))
            .collect();
        if !unknown.is_empty() {
            return Err(unknown);
        }
        let mut profiles: Vec<ProfileReport> = self
            .profiles
            .iter()
            .map(|p| ProfileReport::new(&p.name))
            .collect();
        let mut missing = Vec::new();
        let mut provisional = Vec::new();
        for test in &self.tests {
            if !test.features.iter().all(|f| supported.contains(f)) {
                continue;
            }
            if !run.passed.contains(&test.name) {
                missing.push(format!("{}: claimed, not passed", test.name));
                continue;
            }
            if test.provisional {
                provisional.push(test.name.clone());
            }
            for (profile, report) in self.profiles.iter().zip(&mut profiles) {
                let within = test
                    .features
                    .iter()
                    .all(|f| profile.core.contains(f) || profile.extended.contains(f));
                if !within {
                    continue;
                }
                if test.features.iter().all(|f| profile.core.contains(f)) {
                    report.core.statistics.passed += 1;
                } else {
                    report
                        .extended
                        .get_or_insert_with(|| Extended::of(profile, &supported))
                        .status
                        .statistics
                        .passed += 1;
                }
            }
        }
        if !missing.is_empty() {
            return Err(missing);
        }
        profiles.retain(|p| p.core.statistics.passed > 0 || p.extended.is_some());
        profiles.sort_by(|a, b| a.name.cmp(&b.name));
        for p in &mut profiles {
            p.summary = match p.extended {
                Some(_) => "Core tests succeeded. Extended tests succeeded.",
                None => "Core tests succeeded.",
            }
            .to_owned();
        }
        Ok(Report {
            api_version: "gateway.networking.k8s.io/v1",
            kind: "ConformanceReport",
            date: date.to_owned(),
            gateway_api_channel: "experimental",
            gateway_api_version: SUITE_VERSION,
            implementation: Implementation {
                contact: vec!["https://example.invalid/fairlead/issues".into()],
                organization: "fairlead".into(),
                project: "fairlead".into(),
                url: "https://example.invalid/fairlead".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            mode: "default",
            profiles,
            succeeded_provisional_tests: provisional,
            unsupported: unsupported
                .iter()
                .map(|(f, why)| ((*f).to_owned(), (*why).to_owned()))
                .collect(),
        })
    }
}

/// A `ConformanceReport`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    api_version: &'static str,
    date: String,
    #[serde(rename = "gatewayAPIChannel")]
    gateway_api_channel: &'static str,
    #[serde(rename = "gatewayAPIVersion")]
    gateway_api_version: &'static str,
    implementation: Implementation,
    kind: &'static str,
    mode: &'static str,
    /// One per profile with a test counted.
    pub profiles: Vec<ProfileReport>,
    succeeded_provisional_tests: Vec<String>,
    /// The features not claimed, and why (the header).
    #[serde(skip)]
    unsupported: Vec<(String, String)>,
}

impl Report {
    /// The report as YAML, after a header naming what is not claimed and why.
    pub fn yaml(&self) -> String {
        let mut out = format!(
            "# fairlead's Gateway API conformance report: the tests of gateway-api {SUITE_VERSION} \
             transcribed under\n# e2e/tests/conformance/, passed through real Envoy; \
             scripts/conformance-report writes it. "
        );
        if self.unsupported.is_empty() {
            out.push_str("Every feature of the five profiles is claimed.\n");
        } else {
            out.push_str("Not claimed:\n");
        }
        for (feature, why) in &self.unsupported {
            out.push_str(&format!("# - {feature}: {why}.\n"));
        }
        out + &serde_yaml_ng::to_string(self).expect("the report as YAML")
    }
}

#[derive(Debug, Serialize)]
struct Implementation {
    contact: Vec<String>,
    organization: String,
    project: String,
    url: String,
    version: String,
}

/// One profile's results.
#[derive(Debug, Serialize)]
pub struct ProfileReport {
    /// Its core tests.
    pub core: Status,
    /// Its extended tests, when any counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extended: Option<Extended>,
    /// Its name.
    pub name: String,
    summary: String,
}

impl ProfileReport {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            core: Status::default(),
            extended: None,
            summary: String::new(),
        }
    }
}

/// Results: every counted test passed (a run with a failure makes no report).
#[derive(Debug, Serialize)]
pub struct Status {
    result: &'static str,
    /// The counts.
    pub statistics: Statistics,
}

impl Default for Status {
    fn default() -> Self {
        Self {
            result: "success",
            statistics: Statistics::default(),
        }
    }
}

/// Tests passed, failed and skipped.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Statistics {
    failed: u32,
    /// Passed.
    pub passed: u32,
    skipped: u32,
}

/// A profile's extended results and features.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Extended {
    /// Its results.
    #[serde(flatten)]
    pub status: Status,
    /// Its extended features fairlead claims (left out when none, as the suite leaves it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub supported_features: Vec<String>,
    /// Those it does not (left out when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsupported_features: Vec<String>,
}

impl Extended {
    fn of(profile: &Profile, supported: &BTreeSet<String>) -> Self {
        let (supported_features, unsupported_features) = profile
            .extended
            .iter()
            .cloned()
            .partition(|f| supported.contains(f));
        Self {
            status: Status::default(),
            supported_features,
            unsupported_features,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite() -> Suite {
        let yaml = [
            "profiles:",
            "- {name: GATEWAY-HTTP, core: [Gateway, HTTPRoute],",
            "   extended: [HTTPRouteCORS, GatewayInfrastructurePropagation]}",
            "- {name: GATEWAY-TCP, core: [Gateway, TCPRoute],",
            "   extended: [GatewayInfrastructurePropagation]}",
            "tests:",
            "- {name: Basic, features: [Gateway, HTTPRoute], provisional: false}",
            "- {name: Cors, features: [Gateway, HTTPRoute, HTTPRouteCORS], provisional: true}",
            "- {name: Infra, features: [Gateway, GatewayInfrastructurePropagation], provisional: false}",
            "- {name: Tcp, features: [Gateway, TCPRoute], provisional: false}",
        ]
        .join("\n");
        serde_yaml_ng::from_str(&yaml).unwrap()
    }

    /// What the tests leave unclaimed.
    const NOT_INFRA: &[(&str, &str)] = &[("GatewayInfrastructurePropagation", "not here")];

    fn run(names: &[&str]) -> Run {
        Run {
            passed: names.iter().map(|n| (*n).to_owned()).collect(),
        }
    }

    /// Tests count in each profile holding their features, core or extended as the suite
    /// counts them; a test of a feature not claimed is left out, and the feature listed as
    /// unsupported.
    #[test]
    fn tests_count_in_their_profiles_as_the_suite_counts_them() {
        let report = suite()
            .report_claiming(
                &run(&["Basic", "Cors", "Tcp"]),
                "2026-12-06T00:00:00Z",
                NOT_INFRA,
            )
            .unwrap();
        let http = &report.profiles[0];
        assert_eq!(http.name, "GATEWAY-HTTP");
        assert_eq!(http.core.statistics.passed, 1);
        let extended = http.extended.as_ref().unwrap();
        assert_eq!(extended.status.statistics.passed, 1);
        assert_eq!(extended.supported_features, ["HTTPRouteCORS"]);
        assert_eq!(
            extended.unsupported_features,
            ["GatewayInfrastructurePropagation"]
        );
        let tcp = &report.profiles[1];
        assert_eq!(
            (tcp.name.as_str(), tcp.core.statistics.passed),
            ("GATEWAY-TCP", 1)
        );
        assert!(tcp.extended.is_none());
        assert_eq!(report.succeeded_provisional_tests, ["Cors"]);
        let yaml = report.yaml();
        assert!(yaml.starts_with("# fairlead's Gateway API conformance report"));
        assert!(yaml.contains("Not claimed:\n# - GatewayInfrastructurePropagation: not here."));
        assert!(yaml.contains("Passed: 1"));
    }

    /// A claimed feature's test that did not pass, or a name the suite does not have, makes
    /// no report.
    #[test]
    fn claims_without_their_tests_make_no_report() {
        let missing = suite()
            .report_claiming(&run(&["Basic", "Tcp"]), "now", NOT_INFRA)
            .unwrap_err();
        assert_eq!(missing, ["Cors: claimed, not passed"]);
        let unknown = suite()
            .report_claiming(&run(&["Basic", "Cors", "Tcp", "Typo"]), "now", NOT_INFRA)
            .unwrap_err();
        assert_eq!(unknown, ["Typo: not a test of the suite"]);
    }

    /// With every feature claimed, the infrastructure test must pass too, and the header
    /// says nothing is left out.
    #[test]
    fn claiming_everything_needs_every_test() {
        let missing = suite()
            .report_claiming(&run(&["Basic", "Cors", "Tcp"]), "now", &[])
            .unwrap_err();
        assert_eq!(missing, ["Infra: claimed, not passed"]);
        let report = suite()
            .report_claiming(&run(&["Basic", "Cors", "Tcp", "Infra"]), "now", &[])
            .unwrap();
        let http = &report.profiles[0];
        assert!(
            http.extended
                .as_ref()
                .unwrap()
                .unsupported_features
                .is_empty()
        );
        assert!(
            report
                .yaml()
                .contains("Every feature of the five profiles is claimed.")
        );
    }
}
