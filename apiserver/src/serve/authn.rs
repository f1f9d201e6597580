//! Who makes a request: the bearer token's user — the admin token's `fairlead-admin` (in
//! `system:masters`), or a ServiceAccount's ([`crate::access::tokens`]: `system:serviceaccount:<ns>:<name>`
//! in `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`) —
//! then whom it impersonates (`Impersonate-User`, `Impersonate-Group`, as `kubectl --as`),
//! which [`crate::access::rbac`] must allow (`impersonate` on users, groups or serviceaccounts).

pub use crate::access::user::UserInfo;
use crate::objects::errors::ApiError;
use crate::serve::request::ApiState;
use crate::storage::store::StoreKey;

/// The user of `token`, when it is the admin token or a good ServiceAccount token for one of
/// `audiences`; why not otherwise.
pub fn user_of_token(
    state: &ApiState,
    token: &str,
    audiences: &[String],
) -> Result<UserInfo, String> {
    if token == state.token {
        return Ok(UserInfo::admin());
    }
    let claims = state
        .signer
        .verify(token, crate::access::tokens::unix_now(), audiences)
        .map_err(|e| e.to_string())?;
    let account = &claims["kubernetes.io"]["serviceaccount"];
    let (Some(namespace), Some(name), Some(uid)) = (
        claims["kubernetes.io"]["namespace"].as_str(),
        account["name"].as_str(),
        account["uid"].as_str(),
    ) else {
        return Err("the token names no service account".into());
    };
    let key = StoreKey::new("serviceaccounts", namespace, name);
    match state.store.get(&key) {
        Some(sa) if sa["metadata"]["uid"] == uid => {
            Ok(UserInfo::service_account(namespace, name, uid))
        }
        Some(_) => Err(format!(
            "service account {namespace}/{name} was recreated since the token was issued"
        )),
        None => Err(format!("service account {namespace}/{name} does not exist")),
    }
}

/// The requester: the bearer token's user (401 without a good one), then whom it
/// impersonates, if the requester may.
pub fn authenticate(state: &ApiState, headers: &http::HeaderMap) -> Result<UserInfo, ApiError> {
    let token = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(ApiError::unauthorized)?;
    let user = user_of_token(
        state,
        token.trim(),
        &[crate::access::tokens::ISSUER.to_owned()],
    )
    .map_err(|why| {
        tracing::debug!(%why, "a request's token was refused");
        ApiError::unauthorized()
    })?;
    impersonate(state, user, headers)
}

/// `user`, or whom the request impersonates when `user` may impersonate them.
fn impersonate(
    state: &ApiState,
    user: UserInfo,
    headers: &http::HeaderMap,
) -> Result<UserInfo, ApiError> {
    let text = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect()
    };
    let Some(username) = text("impersonate-user").into_iter().next() else {
        return Ok(user);
    };
    let mut checks = vec![match UserInfo::service_account_of(&username) {
        Some((namespace, name)) => crate::access::rbac::Attributes::resource(
            "impersonate",
            "",
            "serviceaccounts",
            namespace,
            name,
        ),
        None => {
            crate::access::rbac::Attributes::resource("impersonate", "", "users", "", &username)
        }
    }];
    let mut groups = text("impersonate-group");
    for group in &groups {
        checks.push(crate::access::rbac::Attributes::resource(
            "impersonate",
            "",
            "groups",
            "",
            group,
        ));
    }
    for check in &checks {
        if !crate::access::rbac::allowed(&state.store, &user, check) {
            return Err(crate::access::rbac::forbidden(&user, check));
        }
    }
    let impersonated = match UserInfo::service_account_of(&username) {
        Some((namespace, name)) => {
            let mut sa = UserInfo::service_account(namespace, name, "");
            sa.groups.retain(|g| !groups.contains(g));
            groups.extend(sa.groups);
            UserInfo {
                username,
                uid: String::new(),
                groups,
            }
        }
        None => {
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            UserInfo {
                username,
                uid: String::new(),
                groups,
            }
        }
    };
    Ok(impersonated)
}
