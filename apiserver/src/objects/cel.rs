//! `x-kubernetes-validations`: CEL rules on CRD schema nodes, evaluated with the `cel` crate.
//!
//! `self` is the value at the node, `oldSelf` the stored value on updates (rules that use
//! `oldSelf` are transition rules, skipped on create and where the old value is absent). The
//! standard library and macros (`all`, `exists`, `exists_one`, `filter`, `map`, `has`), the
//! string and list extensions (`split`, `lowerAscii`, `join`, …), and these Kubernetes
//! extensions are available: `isIP`, `isCIDR`, `isURL`, `url` (with `getScheme`, `getHost`,
//! `getHostname`, `getPort`, `getEscapedPath`, `getQuery`).
//!
//! A rule that does not compile or calls a function fairlead lacks is reported when the CRD is
//! created ([`unsupported_rules`]) and skipped at validation, never a crash and never a
//! rejected CRD.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use cel::extractors::This;
use cel::{Context, Env, Program};
use serde_json::Value;

use crate::objects::compiled::Compiled;
use crate::objects::errors::FieldCause;

fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("the strings extension registers");
        env.add_extension(cel::extensions::lists)
            .expect("the lists extension registers");
        Arc::new(env)
    })
}

/// Functions this module adds to every context (the Kubernetes extensions).
const KUBERNETES_FUNCTIONS: &[&str] = &[
    "isIP",
    "isCIDR",
    "isURL",
    "url",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
];

fn parse_url(s: &str) -> Option<url::Url> {
    url::Url::parse(s)
        .ok()
        .filter(|u| u.has_host() || u.scheme() == "file")
}

fn add_kubernetes_functions(ctx: &mut Context<'_, '_>) {
    let _ = ctx.add_function("isIP", |s: Arc<String>| s.parse::<IpAddr>().is_ok());
    let _ = ctx.add_function("isCIDR", |s: Arc<String>| {
        s.split_once('/').is_some_and(|(ip, bits)| {
            ip.parse::<IpAddr>().is_ok_and(|ip| {
                let max = if ip.is_ipv4() { 32 } else { 128 };
                bits.parse::<u8>().is_ok_and(|b| b <= max)
            })
        })
    });
    let _ = ctx.add_function("isURL", |s: Arc<String>| parse_url(&s).is_some());
    // `url(s)` yields the string itself; the accessors below parse it again.
    let _ = ctx.add_function("url", |s: Arc<String>| s);
    let _ = ctx.add_function("getScheme", |This(s): This<Arc<String>>| {
        parse_url(&s)
            .map(|u| u.scheme().to_owned())
            .unwrap_or_default()
    });
    let _ = ctx.add_function("getHost", |This(s): This<Arc<String>>| {
        parse_url(&s)
            .map(|u| {
                let host = u.host_str().unwrap_or_default().to_owned();
                u.port().map_or(host.clone(), |p| format!("{host}:{p}"))
            })
            .unwrap_or_default()
    });
    let _ = ctx.add_function("getHostname", |This(s): This<Arc<String>>| {
        parse_url(&s)
            .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_owned()))
            .unwrap_or_default()
    });
    let _ = ctx.add_function("getPort", |This(s): This<Arc<String>>| {
        parse_url(&s)
            .and_then(|u| u.port().map(|p| p.to_string()))
            .unwrap_or_default()
    });
    let _ = ctx.add_function("getEscapedPath", |This(s): This<Arc<String>>| {
        parse_url(&s)
            .map(|u| u.path().to_owned())
            .unwrap_or_default()
    });
    let _ = ctx.add_function("getQuery", |This(s): This<Arc<String>>| {
        parse_url(&s)
            .and_then(|u| u.query().map(str::to_owned))
            .unwrap_or_default()
    });
}

/// A JSON value as CEL sees a Kubernetes object: integers are `int` (int64), as in the real
/// server, so `self.port * 2` and `self.port > 0` work on any JSON number.
fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => n.as_i64().map_or_else(
            || cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            cel::Value::Int,
        ),
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.clone(), to_cel(v)))
            .collect::<std::collections::HashMap<String, cel::Value>>()
            .into(),
    }
}

/// A compiled rule, or why it cannot be used.
fn compile(rule: &str) -> Result<Program, String> {
    env()
        .compile(rule)
        .map_err(|e| format!("does not compile: {e}"))
}

/// The compiled rule (or why it cannot be used), compiled once per rule text for the process
/// ([`crate::objects::compiled`]).
fn compiled(rule: &str) -> Result<Arc<Program>, String> {
    static PROGRAMS: Compiled<Result<Arc<Program>, String>> = Compiled::new();
    PROGRAMS.get(rule, |rule| compile(rule).map(Arc::new))
}

fn uses_old_self(rule: &str) -> bool {
    rule.contains("oldSelf")
}

/// The rules of a schema (anywhere in it) that fairlead cannot evaluate, with the reason, as
/// `path: rule: reason`.
pub fn unsupported_rules(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk_rules(schema, "", &mut |path, rule| {
        if let Err(reason) = compiled(rule).and_then(|program| {
            let missing: Vec<String> = program
                .references()
                .functions()
                .into_iter()
                // Operators (`_&&_`, `!_`, `-_`, `@in`…) are not functions to look up.
                .filter(|f| !f.starts_with(['_', '@', '!', '-']))
                .filter(|f| !KUBERNETES_FUNCTIONS.contains(f))
                .filter(|f| !known_function(f))
                .map(str::to_owned)
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "uses functions fairlead lacks: {}",
                    missing.join(", ")
                ))
            }
        }) {
            found.push(format!("{path}: {rule}: {reason}"));
        }
    });
    found
}

/// Whether the environment knows a function: calling it with no arguments, as a global
/// (`size()`) or on a receiver (`''.startsWith()`, for functions only members have), reports
/// "no such overload" (known name) rather than an undeclared reference (unknown name).
fn known_function(name: &str) -> bool {
    [format!("{name}()"), format!("''.{name}()")]
        .iter()
        .any(|call| {
            let Ok(program) = env().compile(call) else {
                return false;
            };
            let ctx = Context::with_env(env().clone());
            !matches!(
                program.execute(&ctx),
                Err(cel::ExecutionError::UndeclaredReference(_))
            )
        })
}

fn walk_rules(schema: &Value, path: &str, visit: &mut dyn FnMut(&str, &str)) {
    for rule in schema["x-kubernetes-validations"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(text) = rule["rule"].as_str() {
            visit(path, text);
        }
    }
    for (field, sub) in schema["properties"].as_object().into_iter().flatten() {
        let child = if path.is_empty() {
            field.clone()
        } else {
            format!("{path}.{field}")
        };
        walk_rules(sub, &child, visit);
    }
    if let Some(items) = schema.get("items") {
        walk_rules(items, &format!("{path}[*]"), visit);
    }
    if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
        walk_rules(additional, &format!("{path}[*]"), visit);
    }
}

/// Evaluates one boolean expression with named variables (admission policies use `object`,
/// `oldObject`, `request`, `params`); a non-boolean result is an error.
pub fn evaluate(expression: &str, variables: &[(&str, Value)]) -> Result<bool, String> {
    let program = compiled(expression)?;
    let mut ctx = Context::with_env(env().clone());
    add_kubernetes_functions(&mut ctx);
    for (name, value) in variables {
        ctx.add_variable_from_value(*name, to_cel(value));
    }
    match program.execute(&ctx).map_err(|e| e.to_string())? {
        cel::Value::Bool(b) => Ok(b),
        other => Err(format!("expected a boolean, got {other:?}")),
    }
}

/// Evaluates the rules of one schema node against `value` (at `path`), adding a cause for
/// each rule that is false.
pub fn check_rules(
    schema: &Value,
    value: &Value,
    old: Option<&Value>,
    path: &str,
    causes: &mut Vec<FieldCause>,
) {
    let Some(rules) = schema["x-kubernetes-validations"].as_array() else {
        return;
    };
    for rule in rules {
        let Some(text) = rule["rule"].as_str() else {
            continue;
        };
        if uses_old_self(text) && old.is_none() {
            continue;
        }
        let Ok(program) = compiled(text) else {
            continue;
        };
        let mut ctx = Context::with_env(env().clone());
        add_kubernetes_functions(&mut ctx);
        ctx.add_variable_from_value("self", to_cel(value));
        if let Some(old) = old {
            ctx.add_variable_from_value("oldSelf", to_cel(old));
        }
        let passed = match program.execute(&ctx) {
            Ok(cel::Value::Bool(b)) => b,
            Ok(other) => {
                tracing::debug!(rule = text, result = ?other, "CEL rule returned a non-boolean; treated as failed");
                false
            }
            Err(cel::ExecutionError::UndeclaredReference(name)) => {
                tracing::debug!(rule = text, %name, "CEL rule skipped: unsupported function or variable");
                continue;
            }
            Err(err) => {
                tracing::debug!(rule = text, error = %err, "CEL rule errored; treated as failed");
                false
            }
        };
        if passed {
            continue;
        }
        let field = match rule["fieldPath"]
            .as_str()
            .map(|fp| fp.trim_start_matches('.'))
        {
            Some(fp) if path.is_empty() => fp.to_owned(),
            Some(fp) => format!("{path}.{fp}"),
            None => path.to_owned(),
        };
        let message = rule["message"]
            .as_str()
            .map_or_else(|| format!("failed rule: {text}"), str::to_owned);
        let reason = match rule["reason"].as_str() {
            Some("FieldValueRequired") => "FieldValueRequired",
            Some("FieldValueForbidden") => "FieldValueForbidden",
            Some("FieldValueDuplicate") => "FieldValueDuplicate",
            _ => "FieldValueInvalid",
        };
        let shown = match value {
            Value::Object(_) => "object".to_owned(),
            Value::Array(_) => "array".to_owned(),
            Value::String(s) => format!("\"{s}\""),
            other => other.to_string(),
        };
        causes.push(FieldCause::new(
            reason,
            if field.is_empty() {
                "<root>".into()
            } else {
                field
            },
            format!("Invalid value: \"{shown}\": {message}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(rule: &str, value: Value, old: Option<Value>) -> Vec<FieldCause> {
        let schema = json!({"x-kubernetes-validations": [{"rule": rule, "message": "nope"}]});
        let mut causes = Vec::new();
        check_rules(&schema, &value, old.as_ref(), "spec", &mut causes);
        causes
    }

    #[test]
    fn a_rule_is_compiled_once_and_kept() {
        let rule = "self.size() > 0 && self.startsWith('kept-once')";
        let first = compiled(rule).unwrap();
        assert!(Arc::ptr_eq(&first, &compiled(rule).unwrap()));
        assert!(run(rule, json!("kept-once-value"), None).is_empty());
        assert_eq!(run(rule, json!("other"), None).len(), 1);
        let broken = "self.size( >";
        assert!(compiled(broken).is_err());
        assert_eq!(compiled(broken).err(), compile(broken).err());
    }

    #[test]
    fn macros_strings_and_kubernetes_functions() {
        let probe = json!({"mode": "HTTP", "http": {"path": "/"}, "ports": [80, 443],
            "ip": "10.0.0.1", "hosts": "a,b", "endpoint": "https://example.com:8443/x?y=1"});
        for rule in [
            "self.mode == 'HTTP' ? has(self.http) : true",
            "self.ports.all(p, p > 0 && p < 65536)",
            "self.ports.exists(p, p == 443)",
            "self.ports.exists_one(p, p == 80)",
            "self.ports.filter(p, p > 100).size() == 1",
            "self.ports.map(p, p * 2)[0] == 160",
            "self.hosts.split(',').size() == 2",
            "isIP(self.ip) && !isIP('nope') && isCIDR('10.0.0.0/8')",
            "isURL(self.endpoint) && url(self.endpoint).getHost() == 'example.com:8443'",
            "url(self.endpoint).getHostname() == 'example.com' && url(self.endpoint).getQuery() == 'y=1'",
            "self.mode.lowerAscii() == 'http'",
        ] {
            assert!(run(rule, probe.clone(), None).is_empty(), "{rule}");
        }
        let failed = run("self.mode == 'TCP'", probe, None);
        assert_eq!(failed[0].field, "spec");
        assert!(failed[0].message.ends_with("nope"));
    }

    #[test]
    fn transition_rules_need_an_old_value() {
        assert!(
            run("self == oldSelf", json!(1), None).is_empty(),
            "skipped on create"
        );
        assert_eq!(run("self == oldSelf", json!(1), Some(json!(2))).len(), 1);
    }

    #[test]
    fn unknown_functions_are_reported_and_skipped() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.x.isFancy()"}, {"rule": "size(self) > 0"},
                                          {"rule": "self.("}, {"rule": "!has(self.y) && -self.x < 0"}]}}});
        let report = unsupported_rules(&schema);
        assert_eq!(report.len(), 2, "{report:?}");
        assert!(report[0].contains("isFancy"));
        assert!(report[1].contains("does not compile"));
        assert!(run("self.x.isFancy()", json!({"x": 1}), None).is_empty());
    }
}
