//! `mod-security`: the WAF a route asks for, as Deckhouse's ALB documents it — a JSON object
//! with `mode` (`on`, `off`, anything else detection only), `preset` (only `owasp-crs`) with
//! `paranoiaLevel` 1–4, custom rules from a ConfigMap (`configRef`) and inline `directives`.
//! [`Waf::read`] checks the syntax; the translate stage resolves the ConfigMap into the
//! [`RuleSet`] the WAF compiles, in the documented order: the base configuration (the engine's
//! mode, request bodies inspected, responses never), the preset, the ConfigMap's rules, the
//! annotation's directives.

use serde::{Deserialize, Serialize};

use super::AnnotationError;

/// The annotation's name after the prefix.
pub const ANNOTATION: &str = "mod-security";

/// The only preset: the OWASP Core Rule Set.
pub const OWASP_CRS: &str = "owasp-crs";

/// What the engine does with matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// Matches interrupt requests (`SecRuleEngine On`).
    On,
    /// Nothing is inspected: the route is served without the WAF.
    Off,
    /// Matches are logged, requests pass (`SecRuleEngine DetectionOnly`).
    DetectionOnly,
}

impl Mode {
    /// `SecRuleEngine`'s value.
    pub fn directive(self) -> &'static str {
        match self {
            Self::On => "On",
            Self::Off => "Off",
            Self::DetectionOnly => "DetectionOnly",
        }
    }
}

/// `configRef`: the ConfigMap holding custom rules.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigRef {
    /// Its namespace (the route's when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The key holding the rules (all keys, in sorted order, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// The annotation, as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Written {
    mode: String,
    #[serde(default)]
    preset: Option<String>,
    #[serde(default)]
    paranoia_level: Option<u8>,
    #[serde(default)]
    config_ref: Option<ConfigRef>,
    #[serde(default)]
    directives: Vec<String>,
}

/// The WAF a route asks for, checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Waf {
    /// The engine's mode.
    pub mode: Mode,
    /// With `preset: owasp-crs`: its paranoia level (1 when not given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crs_paranoia: Option<u8>,
    /// Custom rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ConfigRef>,
    /// Inline directives, appended last.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub directives: Vec<String>,
}

impl Waf {
    /// Reads the annotation's value.
    pub fn read(value: &str) -> Result<Self, AnnotationError> {
        let error = |message: String| AnnotationError::new(ANNOTATION, message);
        let written: Written = serde_json::from_str(value)
            .map_err(|e| error(format!("not the documented JSON object: {e}")))?;
        let mode = match written.mode.trim().to_ascii_lowercase().as_str() {
            "on" => Mode::On,
            "off" => Mode::Off,
            _ => Mode::DetectionOnly,
        };
        let crs_paranoia = match written.preset.as_deref() {
            None => None,
            Some(OWASP_CRS) => match written.paranoia_level.unwrap_or(1) {
                level @ 1..=4 => Some(level),
                other => return Err(error(format!("paranoiaLevel {other}: must be 1 to 4"))),
            },
            Some(other) => {
                return Err(error(format!(
                    "preset {other:?} is unknown: the only preset is {OWASP_CRS:?}"
                )));
            }
        };
        if let Some(reference) = &written.config_ref
            && reference.name.trim().is_empty()
        {
            return Err(error("configRef.name must not be empty".to_owned()));
        }
        if let Some(i) = written.directives.iter().position(|d| d.contains('\0')) {
            return Err(error(format!("directives[{i}] contains a NUL character")));
        }
        Ok(Self {
            mode,
            crs_paranoia,
            config_ref: written.config_ref,
            directives: written.directives,
        })
    }
}

/// What the WAF compiles for a route: everything resolved, in the documented order. Routes
/// with equal rule sets share one compiled set ([`RuleSet::digest`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleSet {
    /// The engine's mode.
    pub mode: Mode,
    /// The OWASP CRS at this paranoia level, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crs_paranoia: Option<u8>,
    /// The ConfigMap's rules (continuation lines joined).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rules: String,
    /// The annotation's directives.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directives: Vec<String>,
}

impl RuleSet {
    /// A content digest (hex SHA-256 of its JSON): the name of the compiled set.
    pub fn digest(&self) -> String {
        use sha2::Digest as _;
        let json = serde_json::to_vec(self).unwrap_or_default();
        let hash = sha2::Sha256::digest(&json);
        hash.iter().take(16).map(|b| format!("{b:02x}")).collect()
    }
}

/// The rules of a ConfigMap value: lines ending in `\` joined with the next (SecLang's own
/// continuation, as Deckhouse documents for ConfigMap values).
pub fn join_continuations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        match line.strip_suffix('\\') {
            Some(head) => out.push_str(head),
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Whether `text` holds SecLang directives (a line starting with `Sec`, as directives do, in
/// any case): the ConfigMap values the index keeps for the WAF.
pub fn holds_directives(text: &str) -> bool {
    text.lines().any(|line| {
        line.trim_start()
            .get(..3)
            .is_some_and(|head| head.eq_ignore_ascii_case("sec"))
    })
}

/// Directives that reach beyond the rules themselves (files, the network, the engine's own
/// logs): a route's rules may not use them, since the WAF runs them with its own rights.
const REACHING_DIRECTIVES: &[&str] = &[
    "include",
    "secremoterules",
    "secauditlog",
    "secdebuglog",
    "secuploaddir",
    "sectmpdir",
    "secdatadir",
    "secgeolookupdb",
    "secunicodemap",
];

/// Operators and actions that read files or run programs, refused in a route's rules too.
const REACHING_WORDS: &[&str] = &["fromfile", "exec:", "@inspectfile"];

/// The first directive or word of [`REACHING_DIRECTIVES`] and [`REACHING_WORDS`] in a route's
/// own rules (matched in any case), which are then refused.
pub fn reaching(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    let directive = lower.lines().find_map(|line| {
        let word = line.split_whitespace().next()?;
        REACHING_DIRECTIVES
            .iter()
            .copied()
            .find(|d| word.starts_with(d))
    });
    directive.or_else(|| REACHING_WORDS.iter().copied().find(|w| lower.contains(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_reads() {
        let waf = Waf::read(
            r#"{"mode": "on", "preset": "owasp-crs", "paranoiaLevel": 1,
                "configRef": {"name": "waf-rules", "key": "rules.conf"},
                "directives": ["SecResponseBodyAccess Off"]}"#,
        )
        .unwrap();
        assert_eq!(waf.mode, Mode::On);
        assert_eq!(waf.crs_paranoia, Some(1));
        assert_eq!(waf.config_ref.unwrap().key.as_deref(), Some("rules.conf"));
        assert_eq!(Waf::read(r#"{"mode": "Off"}"#).unwrap().mode, Mode::Off);
        assert_eq!(
            Waf::read(r#"{"mode": "monitor"}"#).unwrap().mode,
            Mode::DetectionOnly,
            "anything else is detection only"
        );
        assert_eq!(
            Waf::read(r#"{"mode": "on", "paranoiaLevel": 3}"#)
                .unwrap()
                .crs_paranoia,
            None,
            "the level only with the preset"
        );
    }

    #[test]
    fn bad_values_are_named() {
        for (value, says) in [
            ("{mode: on}", "not the documented JSON object"),
            (
                r#"{"mode": "on", "preset": "comodo"}"#,
                "preset \"comodo\" is unknown",
            ),
            (
                r#"{"mode": "on", "preset": "owasp-crs", "paranoiaLevel": 5}"#,
                "paranoiaLevel 5",
            ),
            (
                r#"{"mode": "on", "configRef": {"name": ""}}"#,
                "configRef.name",
            ),
            (r#"{"mode": "on", "rules": []}"#, "unknown field `rules`"),
        ] {
            let e = Waf::read(value).unwrap_err().to_string();
            assert!(
                e.contains("alb.network.deckhouse.io/mod-security") && e.contains(says),
                "{value}: {e}"
            );
        }
    }

    #[test]
    fn continuation_lines_are_joined_and_digests_follow_content() {
        assert_eq!(
            join_continuations("SecRule ARGS \"@rx a\" \\\n    \"id:1,deny\"\nSecRuleEngine On"),
            "SecRule ARGS \"@rx a\"     \"id:1,deny\"\nSecRuleEngine On\n"
        );
        let set = RuleSet {
            mode: Mode::On,
            crs_paranoia: Some(1),
            rules: String::new(),
            directives: vec![],
        };
        let other = RuleSet {
            crs_paranoia: Some(2),
            ..set.clone()
        };
        assert_eq!(set.digest(), set.clone().digest());
        assert_ne!(set.digest(), other.digest());
        assert_eq!(set.digest().len(), 32);
    }

    #[test]
    fn rules_that_reach_files_or_programs_are_found() {
        assert!(holds_directives(
            "# mine\n  SecRule ARGS \"@rx x\" \"id:1\""
        ));
        assert!(holds_directives("secruleremovebyid 942100"));
        assert!(!holds_directives("ca.crt: no rules"));
        assert_eq!(reaching("Include /etc/passwd"), Some("include"));
        assert_eq!(
            reaching("SecRule ARGS \"@pmFromFile /etc/shadow\" \"id:2\""),
            Some("fromfile")
        );
        assert_eq!(reaching("SecRuleRemoveById 942100"), None);
        assert_eq!(
            reaching("SecRule ARGS \"@rx a\" \"id:3,msg:'include me'\""),
            None
        );
        assert_eq!(reaching("  secAuditLog /tmp/x"), Some("secauditlog"));
    }
}
