//! Authentication and RBAC through `kube::Client`: a ServiceAccount's token from the
//! TokenRequest API authenticates as it; it may do what its bindings grant and gets the real
//! server's 403 otherwise; discovery and self-reviews are everyone's; TokenReview and
//! SubjectAccessReview answer for others; impersonation needs `impersonate`; granting rules
//! one does not hold needs `escalate` or `bind`; a deleted ServiceAccount's token stops
//! working; the audit log records who was refused what.

use fairlead_apiserver::{ApiServer, Config};
use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenReview};
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SubjectAccessReview};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

fn from<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

fn refusal<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("not refused: {other:?}"),
    }
}

async fn token(admin: &kube::Client, namespace: &str, name: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let issued: TokenRequest = accounts
        .create_subresource(
            "token",
            name,
            &PostParams::default(),
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600}}),
        )
        .await
        .unwrap();
    let status = issued.status.unwrap();
    assert!(status.expiration_timestamp.is_some());
    status.token.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_accounts_do_what_their_bindings_grant() {
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.log");
    let server = ApiServer::start(Config {
        audit_log: Some(audit.clone()),
        ..Config::default()
    })
    .await
    .unwrap();
    let admin = server.client().await.unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "team"}})),
        )
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), "team");
    accounts
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bot"}})),
        )
        .await
        .unwrap();
    let bot_token = token(&admin, "team", "bot").await;
    let bot = server.client_with_token(&bot_token).await.unwrap();

    // Who it is, and that discovery is open to it.
    let me: SelfSubjectReview = Api::all(bot.clone())
        .create(
            &PostParams::default(),
            &from(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        )
        .await
        .unwrap();
    let info = me.status.unwrap().user_info.unwrap();
    assert_eq!(
        info.username.as_deref(),
        Some("system:serviceaccount:team:bot")
    );
    assert_eq!(
        info.groups.unwrap(),
        [
            "system:serviceaccounts",
            "system:serviceaccounts:team",
            "system:authenticated"
        ]
    );
    bot.list_api_groups()
        .await
        .expect("discovery is everyone's");

    // Nothing granted yet: the real server's 403.
    let maps: Api<ConfigMap> = Api::namespaced(bot.clone(), "team");
    let (code, message) = refusal(maps.list(&Default::default()).await);
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "configmaps is forbidden: User \"system:serviceaccount:team:bot\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"team\""
    );

    // The audit log has the refusal: who, what, the code.
    let events: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let refused = events
        .iter()
        .find(|e| e["responseStatus"]["code"] == 403)
        .expect("the refusal is audited");
    assert_eq!(
        refused["user"]["username"],
        "system:serviceaccount:team:bot"
    );
    assert_eq!(refused["verb"], "list");
    assert_eq!(
        refused["objectRef"],
        json!({"resource": "configmaps", "apiGroup": "", "namespace": "team"})
    );
    assert!(
        events.iter().any(
            |e| e["user"]["username"] == "fairlead-admin" && e["responseStatus"]["code"] == 201
        ),
        "the admin's writes too"
    );

    // A Role and a RoleBinding grant reading ConfigMaps in team, and managing roles there.
    Api::<Role>::namespaced(admin.clone(), "team")
        .create(&PostParams::default(), &from(json!({"metadata": {"name": "reader"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["create"]}]})))
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "team")
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "bot-reads"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "team"}]})),
        )
        .await
        .unwrap();
    maps.list(&Default::default()).await.expect("granted");
    let (code, message) = refusal(
        maps.create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "x"}})),
        )
        .await,
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("cannot create resource \"configmaps\""),
        "{message}"
    );
    let elsewhere: Api<ConfigMap> = Api::namespaced(bot.clone(), "default");
    assert_eq!(refusal(elsewhere.list(&Default::default()).await).0, 403);

    // What it may do, asked by itself and about it.
    let can = |verb: &str| {
        let bot = bot.clone();
        let verb = verb.to_owned();
        async move {
            let review: SelfSubjectAccessReview = Api::all(bot)
                .create(&PostParams::default(), &from(json!({
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": {"namespace": "team", "verb": verb, "resource": "configmaps"}}})))
                .await
                .unwrap();
            review.status.unwrap().allowed
        }
    };
    assert!(can("list").await);
    assert!(!can("delete").await);
    let review: SubjectAccessReview = Api::all(admin.clone())
        .create(&PostParams::default(), &from(json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "system:serviceaccount:team:bot", "groups": ["system:serviceaccounts"],
                "resourceAttributes": {"namespace": "team", "verb": "watch", "resource": "configmaps"}}})))
        .await
        .unwrap();
    assert!(review.status.unwrap().allowed);
    let (code, _) = refusal(
        Api::<SubjectAccessReview>::all(bot.clone())
            .create(
                &PostParams::default(),
                &from(json!({
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "x", "nonResourceAttributes": {"verb": "get", "path": "/"}}})),
            )
            .await,
    );
    assert_eq!(
        code, 403,
        "asking about others needs subjectaccessreviews create"
    );

    // Granting what it does not hold needs escalate.
    let (code, message) = refusal(
        Api::<Role>::namespaced(bot.clone(), "team")
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": "deleter"}, "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"]}]})),
            )
            .await,
    );
    assert_eq!(code, 403);
    assert!(
        message.contains("is attempting to grant RBAC permissions not currently held"),
        "{message}"
    );
    Api::<Role>::namespaced(bot.clone(), "team")
        .create(
            &PostParams::default(),
            &from(json!({"metadata": {"name": "lister"}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})),
        )
        .await
        .expect("a role of rules it holds");

    // Impersonation: the admin may become the bot (and has its rights only); the bot may not
    // become anyone.
    let as_bot = server
        .client_as("system:serviceaccount:team:bot", &[])
        .await
        .unwrap();
    let (code, _) = refusal(
        Api::<ConfigMap>::namespaced(as_bot, "team")
            .create(
                &PostParams::default(),
                &from(json!({"metadata": {"name": "y"}})),
            )
            .await,
    );
    assert_eq!(code, 403);
    let mut config = server.config_with_token(&bot_token).await.unwrap();
    config.auth_info.impersonate = Some("fairlead-admin".into());
    let escalating = kube::Client::try_from(config).unwrap();
    let (code, message) = refusal(
        Api::<ConfigMap>::namespaced(escalating, "team")
            .list(&Default::default())
            .await,
    );
    assert_eq!(code, 403);
    assert_eq!(
        message,
        "users \"fairlead-admin\" is forbidden: User \"system:serviceaccount:team:bot\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );

    // TokenReview tells who a token is; a deleted ServiceAccount's token is no more.
    let review = async || {
        let reviewed: TokenReview = Api::all(admin.clone())
            .create(
                &PostParams::default(),
                &from(json!({
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": bot_token}})),
            )
            .await
            .unwrap();
        reviewed.status.unwrap()
    };
    let status = review().await;
    assert_eq!(status.authenticated, Some(true));
    assert_eq!(
        status.user.unwrap().username.as_deref(),
        Some("system:serviceaccount:team:bot")
    );
    accounts
        .delete("bot", &DeleteParams::default())
        .await
        .unwrap();
    let (code, _) = refusal(maps.list(&Default::default()).await);
    assert_eq!(code, 401);
    let status = review().await;
    assert_eq!(status.authenticated, Some(false));
    assert!(status.error.unwrap().contains("does not exist"));
}
