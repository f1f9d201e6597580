//! API errors as the real server reports them: an HTTP status and a `metav1.Status` body with
//! a reason, details and, for invalid objects, one cause per offending field path.

use serde_json::{Value, json};

/// One invalid field.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldCause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, …
    pub reason: &'static str,
    /// The field path (`spec.ports[0].port`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl FieldCause {
    /// A cause with the given reason.
    pub fn new(reason: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason,
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An error answered to a client.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `metav1.StatusReason` (`NotFound`, `Conflict`, `Invalid`, …).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// The object's kind and name, where there is one.
    pub details: Option<Box<(String, String, String)>>,
    /// Field causes (422 Invalid).
    pub causes: Vec<FieldCause>,
}

impl ApiError {
    fn plain(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            causes: Vec::new(),
        }
    }

    /// 400: the request cannot be understood.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::plain(400, "BadRequest", message)
    }

    /// 401: no or a wrong bearer token.
    pub fn unauthorized() -> Self {
        Self::plain(401, "Unauthorized", "Unauthorized")
    }

    /// 404 for an object.
    pub fn not_found(group_resource: &str, name: &str) -> Self {
        let mut e = Self::plain(
            404,
            "NotFound",
            format!("{group_resource} \"{name}\" not found"),
        );
        e.details = Some(Box::new((
            group_resource.into(),
            name.into(),
            String::new(),
        )));
        e
    }

    /// 404 for a path that serves nothing.
    pub fn no_route(path: &str) -> Self {
        Self::plain(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 405: the verb is not supported on this path.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::plain(405, "MethodNotAllowed", message)
    }

    /// 409 on create of an existing object.
    pub fn already_exists(group_resource: &str, name: &str) -> Self {
        let mut e = Self::plain(
            409,
            "AlreadyExists",
            format!("{group_resource} \"{name}\" already exists"),
        );
        e.details = Some(Box::new((
            group_resource.into(),
            name.into(),
            String::new(),
        )));
        e
    }

    /// 409 on a stale resourceVersion or a field-manager conflict.
    pub fn conflict(group_resource: &str, name: &str, why: impl Into<String>) -> Self {
        let mut e = Self::plain(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {group_resource} \"{name}\": {}",
                why.into()
            ),
        );
        e.details = Some(Box::new((
            group_resource.into(),
            name.into(),
            String::new(),
        )));
        e
    }

    /// 410: a list `continue` token or version is too old.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::plain(410, "Expired", message)
    }

    /// 413: the body is larger than the server accepts.
    pub fn too_large(limit: usize) -> Self {
        Self::plain(
            413,
            "RequestEntityTooLarge",
            format!("request entity too large: limit is {limit} bytes"),
        )
    }

    /// 415: a body in a format the server does not read here.
    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::plain(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {} (got {content_type:?})",
                accepted.join(", ")
            ),
        )
    }

    /// 422 with field causes; the message lists them the way kubectl shows it.
    pub fn invalid(kind: &str, name: &str, causes: Vec<FieldCause>) -> Self {
        let list: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let message = if list.len() == 1 {
            format!("{kind} \"{name}\" is invalid: {}", list[0])
        } else {
            format!("{kind} \"{name}\" is invalid: [{}]", list.join(", "))
        };
        Self {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(Box::new((String::new(), name.into(), kind.into()))),
            causes,
        }
    }

    /// 403: the request is refused (an admission webhook or policy denied it).
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::plain(403, "Forbidden", message)
    }

    /// 500: something on our side failed.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::plain(500, "InternalError", message)
    }

    /// The `metav1.Status` body.
    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            let (group_resource, name, kind) = details.as_ref();
            let (resource, group) = group_resource
                .split_once('.')
                .unwrap_or((group_resource.as_str(), ""));
            let mut details = json!({});
            if !name.is_empty() {
                details["name"] = json!(name);
            }
            if !group.is_empty() {
                details["group"] = json!(group);
            }
            if !kind.is_empty() {
                details["kind"] = json!(kind);
            } else if !resource.is_empty() {
                details["kind"] = json!(resource);
            }
            if !self.causes.is_empty() {
                details["causes"] = self
                    .causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
            }
            status["details"] = details;
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_lists_every_field_path() {
        let e = ApiError::invalid(
            "Service",
            "web",
            vec![
                FieldCause::new(
                    "FieldValueInvalid",
                    "spec.ports[0].port",
                    "must be between 1 and 65535, inclusive",
                ),
                FieldCause::new("FieldValueRequired", "spec.ports[1].port", "Required value"),
            ],
        );
        let status = e.status();
        assert_eq!(status["code"], 422);
        assert_eq!(
            status["details"]["causes"][1]["field"],
            "spec.ports[1].port"
        );
        assert!(e.message.contains("spec.ports[0].port: must be between"));
    }
}
