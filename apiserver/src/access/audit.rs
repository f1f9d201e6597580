//! The audit log: one `audit.k8s.io/v1` Event per request at level `Metadata` (who asked, the
//! verb, the object, the answer's code), as JSON lines in a file — what the real server's
//! `--audit-log-path` writes. It tells which requests a component makes, and which of them
//! RBAC refused (code 403), without reading its code.

use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::access::rbac::Attributes;
use crate::access::user::UserInfo;

/// What is known of one request by the time it is answered.
#[derive(Debug, Default)]
pub struct Record {
    /// The requester, once authenticated.
    pub user: Option<UserInfo>,
    /// What it asked, once routed.
    pub attrs: Option<Attributes>,
}

/// An open audit log.
#[derive(Debug)]
pub struct AuditLog {
    file: Mutex<std::fs::File>,
}

impl AuditLog {
    /// Appends to `path` (made when missing).
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }

    /// Writes the event of a request to `uri` answered with `code`.
    pub fn write(&self, record: &Record, method: &str, uri: &str, code: u16) {
        // One write per event: a reader of the file never sees a line in pieces (a JSON
        // value formatted into the file would be written a token at a time).
        let mut line = event(record, method, uri, code).to_string();
        line.push('\n');
        let mut file = self.file.lock().expect("audit log lock");
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "writing the audit log");
        }
    }
}

/// The audit event of one request.
pub fn event(record: &Record, method: &str, uri: &str, code: u16) -> Value {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let mut event = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": uuid::Uuid::new_v4().to_string(),
        "stage": "ResponseComplete",
        "requestURI": uri,
        "verb": record.attrs.as_ref().map_or_else(|| method.to_ascii_lowercase(), |a| a.verb.clone()),
        "responseStatus": {"code": code},
        "requestReceivedTimestamp": now,
        "stageTimestamp": now,
    });
    if let Some(user) = &record.user {
        event["user"] = user.to_json();
    }
    if let Some(attrs) = record.attrs.as_ref().filter(|a| a.path.is_none()) {
        let mut object = json!({"resource": attrs.resource, "apiGroup": attrs.api_group});
        for (field, value) in [
            ("namespace", &attrs.namespace),
            ("name", &attrs.name),
            ("subresource", &attrs.subresource),
        ] {
            if !value.is_empty() {
                object[field] = json!(value);
            }
        }
        event["objectRef"] = object;
    }
    event
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_name_the_user_the_verb_and_the_object() {
        let mut attrs = Attributes::resource(
            "patch",
            "network.deckhouse.io",
            "servicewithhealthchecks",
            "team",
            "web",
        );
        attrs.subresource = "status".into();
        let record = Record {
            user: Some(UserInfo::service_account(
                "d8-service-with-healthchecks",
                "agent",
                "u",
            )),
            attrs: Some(attrs),
        };
        let event = event(&record, "PATCH", "/apis/…/status", 403);
        assert_eq!(event["verb"], "patch");
        assert_eq!(
            event["user"]["username"],
            "system:serviceaccount:d8-service-with-healthchecks:agent"
        );
        assert_eq!(
            event["objectRef"],
            json!({"resource": "servicewithhealthchecks", "apiGroup": "network.deckhouse.io",
                "namespace": "team", "name": "web", "subresource": "status"})
        );
        assert_eq!(event["responseStatus"]["code"], 403);
        let anonymous = super::event(&Record::default(), "GET", "/version", 401);
        assert_eq!(anonymous["verb"], "get");
        assert!(anonymous.get("user").is_none());
    }
}
