//! A route's WAF [`RuleSet`] as SecLang (what libmodsecurity compiles: the WAF beside Envoy,
//! the control plane's check, and the nginx of the WAF benchmark read the same text), in the documented order: the base configuration (the
//! engine's mode, request bodies read — JSON and XML by their parsers, a body that does not
//! parse refused — responses never), the OWASP CRS at the route's paranoia level (its setup
//! file, then its request rules), the ConfigMap's rules, the annotation's directives (so the
//! route can override what comes before, e.g. `SecRuleRemoveById`).

use std::path::PathBuf;

use crate::annotations::waf::RuleSet;

/// Where the OWASP Core Rule Set is (Debian's `modsecurity-crs` by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crs {
    /// The setup file (`crs-setup.conf`).
    pub setup: PathBuf,
    /// The directory of its rule files (`REQUEST-9xx-….conf`).
    pub rules: PathBuf,
}

impl Default for Crs {
    fn default() -> Self {
        Self {
            setup: "/etc/modsecurity/crs/crs-setup.conf".into(),
            rules: "/usr/share/modsecurity-crs/rules".into(),
        }
    }
}

/// The base configuration every rule set starts with, after `SecRuleEngine`.
const BASE: &str = r#"SecRequestBodyAccess On
SecResponseBodyAccess Off
SecRequestBodyLimit 13107200
SecRequestBodyNoFilesLimit 1048576
SecRequestBodyLimitAction Reject
SecRule REQUEST_HEADERS:Content-Type "^(?:application(?:/soap\+|/)|text/)xml" "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_ERROR "!@eq 0" "id:200002,phase:2,t:none,log,deny,status:400,msg:'Failed to parse request body'"
SecPcreMatchLimit 100000
SecPcreMatchLimitRecursion 100000
SecAuditEngine Off
SecDebugLogLevel 0
"#;

/// The SecLang of `set`, the CRS taken from `crs`.
pub fn directives(set: &RuleSet, crs: &Crs) -> String {
    let mut out = format!("SecRuleEngine {}\n{BASE}", set.mode.directive());
    if let Some(level) = set.crs_paranoia {
        out.push_str(&format!(
            "SecAction \"id:900000,phase:1,nolog,pass,t:none,setvar:tx.paranoia_level={level}\"\n\
             Include {}\n\
             Include {}/REQUEST-*.conf\n",
            crs.setup.display(),
            crs.rules.display(),
        ));
    }
    if !set.rules.is_empty() {
        out.push_str(&set.rules);
        out.push('\n');
    }
    for directive in &set.directives {
        out.push_str(directive);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::waf::Mode;

    #[test]
    fn the_order_is_base_preset_configmap_directives() {
        let set = RuleSet {
            mode: Mode::DetectionOnly,
            crs_paranoia: Some(3),
            rules: "SecRule ARGS \"@rx a\" \"id:1,deny\"".into(),
            directives: vec!["SecRuleRemoveById 942100".into()],
        };
        let text = directives(&set, &Crs::default());
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {text}"))
        };
        assert!(text.starts_with("SecRuleEngine DetectionOnly\n"));
        assert!(at("SecResponseBodyAccess Off") < at("tx.paranoia_level=3"));
        assert!(at("tx.paranoia_level=3") < at("crs-setup.conf"));
        assert!(at("crs-setup.conf") < at("REQUEST-*.conf"));
        assert!(at("REQUEST-*.conf") < at("id:1,deny"));
        assert!(at("id:1,deny") < at("SecRuleRemoveById 942100"));
        let plain = RuleSet {
            crs_paranoia: None,
            ..set
        };
        assert!(!directives(&plain, &Crs::default()).contains("Include"));
    }
}
