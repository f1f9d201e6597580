//! A requester as the server knows it once authenticated: its name, uid and groups.

use serde_json::{Value, json};

/// The admin token's user.
pub const ADMIN: &str = "fairlead-admin";

/// Who makes a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name.
    pub username: String,
    /// The uid (a ServiceAccount's), or empty.
    pub uid: String,
    /// Its groups.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The admin token's user.
    pub fn admin() -> Self {
        Self {
            username: ADMIN.into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }

    /// The ServiceAccount `namespace/name` of uid `uid`.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            username: format!("system:serviceaccount:{namespace}:{name}"),
            uid: uid.to_owned(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    /// The ServiceAccount a user name names (`system:serviceaccount:<ns>:<name>`).
    pub fn service_account_of(username: &str) -> Option<(&str, &str)> {
        username
            .strip_prefix("system:serviceaccount:")?
            .split_once(':')
    }

    /// As `userInfo` of reviews.
    pub fn to_json(&self) -> Value {
        let mut user = json!({"username": self.username, "groups": self.groups});
        if !self.uid.is_empty() {
            user["uid"] = json!(self.uid);
        }
        user
    }
}
