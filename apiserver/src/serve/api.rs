//! The REST handler: authentication, routing, and the verbs (get, list, watch, create, update,
//! patch, delete, deletecollection) over the store, with the API conventions for metadata,
//! status subresources, preconditions and selectors.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use serde_json::{Value, json};

use crate::objects::crd;
use crate::objects::errors::{ApiError, FieldCause};
use crate::objects::meta;
use crate::objects::patch::{self, PatchType};
use crate::objects::resources::ResourceType;
use crate::objects::validation;
use crate::serve::discovery;
use crate::serve::openapi;
use crate::serve::path::{self, Route, Target};
use crate::serve::table;
use crate::serve::watch;
use crate::storage::store::{Commit, StoreError, StoreKey, Write, resource_version};

pub use crate::serve::request::{ApiState, Body, Query, selectors};

/// The largest request body accepted (the real server's limit is 3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How often a write that raced another is retried before the client sees a conflict.
const PATCH_RETRIES: usize = 5;

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(body).expect("values serialize");
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(bytes)).boxed())
        .expect("static response parts are valid")
}

/// The response for an error.
pub fn error_response(error: &ApiError) -> Response<Body> {
    json_response(
        StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &error.status(),
    )
}

/// Handles one request.
pub async fn handle<B>(state: Arc<ApiState>, request: Request<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let uri = request.uri().to_string();
    let mut record = crate::access::audit::Record::default();
    let result = route(state.clone(), request, &mut record).await;
    let response = match result {
        Ok(response) => {
            tracing::debug!(%method, %path, status = response.status().as_u16(), "request");
            response
        }
        Err(error) => {
            tracing::debug!(%method, %path, status = error.code, reason = error.reason, message = %error.message, "request failed");
            error_response(&error)
        }
    };
    if let Some(log) = &state.audit {
        log.write(&record, method.as_str(), &uri, response.status().as_u16());
    }
    response
}

async fn route<B>(
    state: Arc<ApiState>,
    request: Request<B>,
    record: &mut crate::access::audit::Record,
) -> Result<Response<Body>, ApiError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let route = path::parse(request.uri().path(), &state.registry)?;
    let user = if route == Route::Health {
        crate::access::user::UserInfo::admin()
    } else {
        crate::serve::authn::authenticate(&state, request.headers())?
    };
    if route != Route::Health {
        record.user = Some(user.clone());
    }
    if !matches!(route, Route::Resource(_) | Route::Health) {
        let verb = request.method().as_str().to_ascii_lowercase();
        let asked = crate::access::rbac::Attributes::non_resource(&verb, request.uri().path());
        record.attrs = Some(asked.clone());
        crate::access::rbac::authorize(&state.store, &user, &asked)?;
    }
    let query: Query = request
        .uri()
        .query()
        .map(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .into_owned()
                .collect()
        })
        .unwrap_or_default();
    let types = state.registry.all();
    let ok = |v: Value| Ok(json_response(StatusCode::OK, &v));
    match route {
        Route::Version => ok(discovery::version()),
        Route::Health => Ok(Response::new(Full::new(Bytes::from_static(b"ok")).boxed())),
        Route::CoreVersions => ok(discovery::core_versions()),
        Route::Groups => ok(discovery::group_list(&types)),
        Route::Group(group) => discovery::group(&types, &group)
            .map_or_else(|| Err(ApiError::no_route(request.uri().path())), ok),
        Route::ResourceList(group, version) => discovery::resource_list(&types, &group, &version)
            .map_or_else(|| Err(ApiError::no_route(request.uri().path())), ok),
        Route::OpenApiV2 => {
            let document = openapi::v2_document(&types);
            let accept = request
                .headers()
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            if crate::serve::openapi_proto::wanted(accept) {
                Ok(Response::builder()
                    .status(StatusCode::OK)
                    .header(
                        header::CONTENT_TYPE,
                        crate::serve::openapi_proto::CONTENT_TYPE,
                    )
                    .body(
                        Full::new(Bytes::from(crate::serve::openapi_proto::document(
                            &document,
                        )))
                        .boxed(),
                    )
                    .expect("static response parts are valid"))
            } else {
                ok(document)
            }
        }
        Route::OpenApiV3(None) => ok(openapi::v3_index(&types)),
        Route::OpenApiV3(Some(group_version)) => openapi::v3_document(&types, &group_version)
            .map_or_else(|| Err(ApiError::no_route(request.uri().path())), ok),
        Route::Resource(target) => resource(state, request, *target, query, user, record).await,
    }
}

async fn read_body<B>(body: B) -> Result<Bytes, ApiError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(err)
            if err
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ApiError::too_large(MAX_BODY_BYTES))
        }
        Err(err) => Err(ApiError::bad_request(format!("reading the body: {err}"))),
    }
}

/// Decodes a request body of the given content type: JSON, YAML, or (for built-in kinds)
/// Kubernetes protobuf. CBOR is answered with 415, on which Kubernetes clients fall back to
/// JSON.
fn decode_as(bytes: &[u8], content_type: &str) -> Result<Value, ApiError> {
    match content_type.split(';').next().unwrap_or("").trim() {
        "" | "application/json" | "*/*" => decode(bytes, false),
        "application/yaml" => decode(bytes, true),
        crate::serve::protobuf::CONTENT_TYPE => crate::serve::protobuf::decode_body(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding the protobuf body: {e}"))),
        other => Err(ApiError::unsupported_media_type(
            other,
            &[
                "application/json",
                "application/yaml",
                crate::serve::protobuf::CONTENT_TYPE,
            ],
        )),
    }
}

fn decode(bytes: &[u8], yaml: bool) -> Result<Value, ApiError> {
    if yaml {
        serde_yaml_ng::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
    } else {
        serde_json::from_slice(bytes).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })
    }
}

/// The RBAC verb of a request to `target`.
fn verb(method: &Method, target: &Target, watching: bool) -> String {
    match (method, target.name.is_some()) {
        (&Method::GET | &Method::HEAD, false) if watching => "watch".into(),
        (&Method::GET | &Method::HEAD, false) => "list".into(),
        (&Method::GET | &Method::HEAD, true) => "get".into(),
        (&Method::POST, _) => "create".into(),
        (&Method::PUT, _) => "update".into(),
        (&Method::PATCH, _) => "patch".into(),
        (&Method::DELETE, true) => "delete".into(),
        (&Method::DELETE, false) => "deletecollection".into(),
        (other, _) => other.as_str().to_ascii_lowercase(),
    }
}

async fn resource<B>(
    state: Arc<ApiState>,
    request: Request<B>,
    target: Target,
    query: Query,
    user: crate::access::user::UserInfo,
    record: &mut crate::access::audit::Record,
) -> Result<Response<Body>, ApiError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let method = request.method().clone();
    let user_agent = request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown")
        .to_owned();
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    let as_table = table::wants_table(&accept);
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    let watching =
        target.watch_prefix || matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    let mut asked = crate::access::rbac::Attributes::resource(
        &verb(&method, &target, watching),
        &target.rt.group,
        &target.rt.plural,
        target.namespace.as_deref().unwrap_or_default(),
        target.name.as_deref().unwrap_or_default(),
    );
    asked.subresource = target.subresource.clone().unwrap_or_default();
    record.attrs = Some(asked.clone());
    crate::access::rbac::authorize(&state.store, &user, &asked)?;
    let body = read_body(request.into_body()).await?;
    if target.rt.is_review() {
        if method != Method::POST || target.name.is_some() {
            return Err(ApiError::method_not_allowed(format!(
                "{} can only be created",
                target.rt.plural
            )));
        }
        let object = decode_as(&body, &content_type)?;
        let answered = crate::serve::reviews::create(
            &state,
            &user,
            &target.rt,
            target.namespace.as_deref(),
            object,
        )?;
        return Ok(json_response(StatusCode::CREATED, &answered));
    }
    if target.subresource.as_deref() == Some("token") {
        let object = decode_as(&body, &content_type)?;
        let issued = crate::serve::reviews::token_request(
            &state,
            target.namespace.as_deref().unwrap_or_default(),
            target.name.as_deref().unwrap_or_default(),
            object,
        )?;
        return Ok(json_response(StatusCode::CREATED, &issued));
    }
    let ctx = Ctx {
        state: &state,
        target: &target,
        query: &query,
        manager: field_manager(&query, &user_agent),
        user: &user,
        warnings: Default::default(),
        commit: dry_run(&query)?,
    };
    let scale = target.subresource.as_deref() == Some("scale");
    let mut response = match (&method, target.name.is_some()) {
        _ if scale => ctx.scale(&method, &body, &content_type).await,
        (&Method::GET, false) if watching => {
            watch::serve(state.clone(), target.clone(), query.clone(), as_table)
        }
        (&Method::GET, false) => ctx.list().map(|list| {
            if as_table {
                let items = list["items"].as_array().cloned().unwrap_or_default();
                let rv = list["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default();
                json_response(StatusCode::OK, &table::table(&target.rt, &items, rv))
            } else {
                json_response(StatusCode::OK, &list)
            }
        }),
        (&Method::GET, true) => ctx.get().map(|object| {
            if as_table {
                let rv = object["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                json_response(StatusCode::OK, &table::table(&target.rt, &[object], &rv))
            } else {
                json_response(StatusCode::OK, &object)
            }
        }),
        (&Method::POST, false) => {
            let object = decode_as(&body, &content_type)?;
            ctx.create(object)
                .await
                .map(|v| json_response(StatusCode::CREATED, &v))
        }
        (&Method::PUT, true) => {
            let object = decode_as(&body, &content_type)?;
            ctx.update(object)
                .await
                .map(|v| json_response(StatusCode::OK, &v))
        }
        (&Method::PATCH, true) => {
            let patch_type = PatchType::from_content_type(&content_type).ok_or_else(|| {
                ApiError::unsupported_media_type(
                    &content_type,
                    &[
                        "application/json-patch+json",
                        "application/merge-patch+json",
                        "application/apply-patch+yaml",
                        "application/strategic-merge-patch+json",
                    ],
                )
            })?;
            let patch = decode(&body, patch_type == PatchType::Apply)?;
            ctx.patch(patch_type, &patch).await
        }
        (&Method::DELETE, true) => {
            let options = if body.is_empty() {
                json!({})
            } else {
                decode_as(&body, &content_type)?
            };
            ctx.delete(&options).await
        }
        (&Method::DELETE, false) => {
            let options = if body.is_empty() {
                json!({})
            } else {
                decode_as(&body, &content_type)?
            };
            ctx.delete_collection(&options)
                .await
                .map(|v| json_response(StatusCode::OK, &v))
        }
        _ => Err(ApiError::method_not_allowed(format!(
            "{method} is not supported on this path"
        ))),
    }?;
    let warnings = std::mem::take(&mut *ctx.warnings.lock().expect("warnings lock"));
    for warning in warnings {
        let text = format!("299 - \"{}\"", warning.replace('"', "\\\""));
        if let Ok(value) = http::HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    Ok(response)
}

pub use crate::objects::resources::present;

struct Ctx<'a> {
    state: &'a ApiState,
    target: &'a Target,
    query: &'a Query,
    /// The field manager of non-apply writes.
    manager: String,
    /// Who asks (the token's user, or whom it impersonates).
    user: &'a crate::access::user::UserInfo,
    /// `Warning` headers for the response (unknown fields under `fieldValidation=Warn`, …).
    warnings: std::sync::Mutex<Vec<String>>,
    /// Whether writes are stored or only checked (`dryRun=All`).
    commit: Commit,
}

/// Whether a request's writes are stored: `dryRun=All` checks and answers them (validation,
/// defaults, admission) and stores nothing; no other value exists.
fn dry_run(query: &Query) -> Result<Commit, ApiError> {
    dry_run_of(query.get("dryRun").map(String::as_str))
}

/// [`dry_run`] of the values given (a query's, or a `DeleteOptions` body's `dryRun` list).
fn dry_run_of<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<Commit, ApiError> {
    let mut commit = Commit::Store;
    for value in values {
        match value {
            "" => {}
            "All" => commit = Commit::DryRun,
            other => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: Unsupported value: {other:?}: supported values: \"All\""
                )));
            }
        }
    }
    Ok(commit)
}

/// The manager of a write: `fieldManager`, else the client's program name as the real server
/// derives it from the User-Agent (`kubectl`, `kube-rs`…).
fn field_manager(query: &Query, user_agent: &str) -> String {
    query
        .get("fieldManager")
        .filter(|m| !m.is_empty())
        .cloned()
        .unwrap_or_else(|| user_agent.split('/').next().unwrap_or("unknown").to_owned())
}

impl Ctx<'_> {
    fn rt(&self) -> &ResourceType {
        &self.target.rt
    }

    fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or_default()
    }

    fn key(&self, name: &str) -> StoreKey {
        StoreKey::new(
            self.rt().storage_key(),
            self.target.namespace.as_deref().unwrap_or_default(),
            name,
        )
    }

    fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.rt().group_resource(), self.name())
    }

    /// The stored object of the request's name.
    fn current(&self) -> Result<Arc<Value>, ApiError> {
        self.state
            .store
            .get(&self.key(self.name()))
            .ok_or_else(|| self.not_found())
    }

    /// 409 for a write whose resourceVersion is not the stored one.
    fn stale(&self, name: &str) -> ApiError {
        ApiError::conflict(
            &self.rt().group_resource(),
            name,
            StoreError::Conflict.to_string(),
        )
    }

    fn store_error(&self, name: &str, error: StoreError) -> ApiError {
        let gr = self.rt().group_resource();
        match error {
            StoreError::AlreadyExists => ApiError::already_exists(&gr, name),
            StoreError::NotFound => ApiError::not_found(&gr, name),
            StoreError::Conflict => ApiError::conflict(&gr, name, error.to_string()),
            StoreError::Journal(e) => ApiError::internal(e.to_string()),
        }
    }

    fn get(&self) -> Result<Value, ApiError> {
        let object = self.current()?;
        Ok(present(self.rt(), &object))
    }

    fn list(&self) -> Result<Value, ApiError> {
        let rt = self.rt();
        let (labels, fields) = selectors(rt, self.query)?;
        let limit: usize = self
            .query
            .get("limit")
            .and_then(|l| l.parse().ok())
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX);
        let (items, mut rv) = self
            .state
            .store
            .list(&rt.storage_key(), self.target.namespace.as_deref());
        let mut after: Option<(String, String)> = None;
        if let Some(token) = self.query.get("continue").filter(|t| !t.is_empty()) {
            let (token_rv, ns, name) = decode_continue(token)?;
            if token_rv < self.state.store.oldest_watchable() {
                return Err(ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
                ));
            }
            rv = token_rv;
            after = Some((ns, name));
        }
        let mut matching = items
            .iter()
            .filter(|o| labels.matches(o) && fields.matches(&rt.kind, o))
            .filter(|o| {
                after.as_ref().is_none_or(|(ns, name)| {
                    let key = (
                        o["metadata"]["namespace"].as_str().unwrap_or_default(),
                        o["metadata"]["name"].as_str().unwrap_or_default(),
                    );
                    key > (ns.as_str(), name.as_str())
                })
            });
        let page: Vec<Value> = matching
            .by_ref()
            .take(limit)
            .map(|o| present(rt, o))
            .collect();
        let remaining = matching.count();
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if remaining > 0
            && let Some(last) = page.last()
        {
            metadata["continue"] = json!(encode_continue(
                rv,
                last["metadata"]["namespace"].as_str().unwrap_or_default(),
                last["metadata"]["name"].as_str().unwrap_or_default(),
            ));
            metadata["remainingItemCount"] = json!(remaining);
        }
        Ok(json!({
            "kind": format!("{}List", rt.kind),
            "apiVersion": rt.api_version(),
            "metadata": metadata,
            "items": page,
        }))
    }

    /// Checks kind, apiVersion, namespace and metadata of a body.
    fn check_body(&self, object: &mut Value) -> Result<(), ApiError> {
        let rt = self.rt();
        if !object.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        if let Some(kind) = object.get("kind").and_then(Value::as_str)
            && kind != rt.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind of the body ({kind}) does not match the resource ({})",
                rt.kind
            )));
        }
        if let Some(api_version) = object.get("apiVersion").and_then(Value::as_str)
            && api_version != rt.api_version()
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                rt.api_version()
            )));
        }
        if object.get("metadata").is_none_or(Value::is_null) {
            object["metadata"] = json!({});
        }
        if !object["metadata"].is_object() {
            return Err(ApiError::bad_request("metadata must be an object"));
        }
        let path_ns = self.target.namespace.clone().unwrap_or_default();
        if rt.namespaced {
            match object["metadata"]["namespace"].as_str() {
                Some(ns) if !ns.is_empty() && ns != path_ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => object["metadata"]["namespace"] = json!(path_ns),
            }
        } else if let Some(m) = object["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        object["apiVersion"] = json!(rt.storage_api_version());
        object["kind"] = json!(rt.kind);
        Ok(())
    }

    /// Everything the server does to an object before storing it: name and built-in
    /// validation, CRD checks, and for custom resources the schema (defaults, pruning, CEL).
    fn admit(&self, object: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
        let rt = self.rt();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut causes: Vec<FieldCause> =
            meta::validate_name(&rt.kind, &name).into_iter().collect();
        causes.extend(validation::validate(
            &rt.kind,
            object,
            self.state.validation,
        ));
        if rt.kind == "CustomResourceDefinition" {
            causes.extend(crd::validate(object));
            for version in object["spec"]["versions"].as_array().into_iter().flatten() {
                for report in
                    crate::objects::cel::unsupported_rules(&version["schema"]["openAPIV3Schema"])
                {
                    let message = format!(
                        "version {}: rule skipped: {report}",
                        version["name"].as_str().unwrap_or_default()
                    );
                    tracing::warn!(crd = %name, "{message}");
                    self.warnings.lock().expect("warnings lock").push(message);
                }
            }
        }
        if let Some(schema) = rt.schema.as_deref() {
            let outcome = crate::objects::schema::check(schema, object, old);
            causes.extend(outcome.causes);
            if !outcome.pruned.is_empty() {
                let unknown: Vec<String> = outcome
                    .pruned
                    .iter()
                    .map(|p| format!("unknown field \"{p}\""))
                    .collect();
                match self.query.get("fieldValidation").map(String::as_str) {
                    Some("Strict") => {
                        return Err(ApiError::bad_request(format!(
                            "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {}",
                            rt.kind,
                            rt.version,
                            rt.kind,
                            unknown.join(", ")
                        )));
                    }
                    Some("Ignore") => {}
                    _ => self.warnings.lock().expect("warnings lock").extend(unknown),
                }
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(&rt.kind, &name, causes))
        }
    }

    fn check_namespace(&self) -> Result<(), ApiError> {
        let Some(ns) = self
            .target
            .namespace
            .as_deref()
            .filter(|_| self.rt().namespaced)
        else {
            return Ok(());
        };
        let key = StoreKey::new("namespaces", "", ns);
        match self.state.store.get(&key) {
            None => Err(ApiError::not_found("namespaces", ns)),
            Some(namespace) if meta::is_deleting(&namespace) => Err(ApiError::forbidden(format!(
                "unable to create new content in namespace {ns} because it is being terminated"
            ))),
            Some(_) => Ok(()),
        }
    }

    /// Validating webhooks and admission policies (told whether it is a dry run: `commit`);
    /// their warnings join the response's.
    async fn admit_external(
        &self,
        operation: &'static str,
        name: &str,
        (object, old_object): (Option<&Value>, Option<&Value>),
        commit: Commit,
    ) -> Result<(), ApiError> {
        let attributes = crate::serve::admission::Attributes {
            operation,
            rt: self.rt(),
            subresource: self.target.subresource.as_deref().unwrap_or_default(),
            name,
            namespace: self.target.namespace.as_deref().unwrap_or_default(),
            object,
            old_object,
            user: self.user,
            dry_run: commit == Commit::DryRun,
        };
        if operation != "DELETE"
            && let Some(object) = object
        {
            crate::access::rbac::escalation(
                &self.state.store,
                self.user,
                &self.rt().kind,
                self.target.namespace.as_deref().unwrap_or_default(),
                object,
            )?;
        }
        let warnings = crate::serve::admission::admit(&self.state.store, &attributes).await?;
        self.warnings
            .lock()
            .expect("warnings lock")
            .extend(warnings);
        Ok(())
    }

    async fn create(&self, mut object: Value) -> Result<Value, ApiError> {
        if self.target.subresource.is_some() {
            return Err(ApiError::method_not_allowed(
                "create is not supported on subresources",
            ));
        }
        self.check_body(&mut object)?;
        let uid = uuid::Uuid::new_v4();
        let name = match object["metadata"]["name"]
            .as_str()
            .filter(|n| !n.is_empty())
        {
            Some(name) => name.to_owned(),
            None => match object["metadata"]["generateName"]
                .as_str()
                .filter(|n| !n.is_empty())
            {
                Some(prefix) => meta::generated_name(prefix, &uid),
                None => String::new(),
            },
        };
        object["metadata"]["name"] = json!(name);
        meta::prepare_create(self.rt(), &mut object, &uid);
        if self.rt().kind == "Service" {
            let (existing, _) = self.state.store.list("services", None);
            crate::objects::allocate::service(&mut object, &existing, &uid);
        }
        if !self.rt().custom {
            crate::objects::defaults::on_create(&self.rt().kind, &mut object);
        }
        self.admit(&mut object, None)?;
        self.check_namespace()?;
        self.admit_external("CREATE", &name, (Some(&object), None), self.commit)
            .await?;
        let stored = self
            .state
            .store
            .write_as(self.commit, &self.key(&name), Write::Create(object))
            .map_err(|e| self.store_error(&name, e))?;
        self.after_write(&stored)?;
        Ok(present(self.rt(), &stored))
    }

    /// Side effects of a committed write (none for a dry run): CRDs establish their kinds.
    fn after_write(&self, stored: &Value) -> Result<(), ApiError> {
        if self.commit == Commit::Store
            && self.rt().kind == "CustomResourceDefinition"
            && !meta::is_deleting(stored)
        {
            let name = stored["metadata"]["name"].as_str().unwrap_or_default();
            self.state
                .registry
                .set_custom(name, crd::served_types(stored));
            if stored["status"]["conditions"].is_null() {
                let mut with_status = stored.clone();
                with_status["status"] = crd::established_status(stored);
                self.state
                    .store
                    .write(
                        &self.key(name),
                        Write::Update {
                            object: with_status,
                            expect_rv: None,
                        },
                    )
                    .map_err(|e| self.store_error(name, e))?;
            }
        }
        Ok(())
    }

    /// Commits `new` over `current` (already merged), with the generation, precondition and
    /// finalizer rules; returns the stored object.
    async fn commit(
        &self,
        current: &Value,
        mut new: Value,
        expect_rv: Option<u64>,
        record_update: bool,
    ) -> Result<Value, ApiError> {
        let to_status = self.target.subresource.as_deref() == Some("status");
        new = meta::carry_over(self.rt(), current, new, to_status);
        if record_update {
            crate::objects::apply::record_update(
                current,
                &mut new,
                &self.manager,
                self.target.subresource.as_deref().unwrap_or_default(),
                &self.rt().api_version(),
                self.rt().schema.as_deref(),
            );
        }
        if !self.rt().custom {
            if self.rt().kind == "Service" && !to_status {
                let (existing, _) = self.state.store.list("services", None);
                let seed = uuid::Uuid::new_v4();
                crate::objects::allocate::service_update(current, &mut new, &existing, &seed);
            }
            crate::objects::defaults::on_write(&self.rt().kind, &mut new);
        }
        self.admit(&mut new, Some(current))?;
        if !to_status && meta::spec_changed(self.rt(), current, &new) {
            meta::bump_generation(&mut new);
        }
        if meta::same_ignoring_times(current, &new) {
            // As the real server does: a write that changes nothing is not stored and keeps
            // the resourceVersion, so watchers see no event.
            return Ok(current.clone());
        }
        let name = self.name().to_owned();
        self.admit_external("UPDATE", &name, (Some(&new), Some(current)), self.commit)
            .await?;
        let key = self.key(&name);
        let finalized = meta::is_deleting(&new) && meta::finalizers(&new).is_empty();
        let stored = self
            .state
            .store
            .write_as(
                self.commit,
                &key,
                Write::Update {
                    object: new,
                    expect_rv,
                },
            )
            .map_err(|e| self.store_error(&name, e))?;
        if finalized {
            let deleted = self
                .state
                .store
                .write_as(
                    self.commit,
                    &key,
                    Write::Delete {
                        expect_rv: Some(resource_version(&stored)),
                        expect_uid: None,
                    },
                )
                .map_err(|e| self.store_error(&name, e))?;
            self.state.gc.notify_one();
            return Ok((*deleted).clone());
        }
        Ok((*stored).clone())
    }

    async fn update(&self, mut object: Value) -> Result<Value, ApiError> {
        self.check_body(&mut object)?;
        let name = self.name().to_owned();
        match object["metadata"]["name"].as_str() {
            Some(n) if n == name => {}
            Some(n) if !n.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => object["metadata"]["name"] = json!(name),
        }
        let current = self.current()?;
        let expect_rv = object["metadata"]["resourceVersion"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {s:?}")))
            })
            .transpose()?;
        let stored = self.commit(&current, object, expect_rv, true).await?;
        self.after_write(&stored)?;
        Ok(present(self.rt(), &stored))
    }

    async fn patch(
        &self,
        patch_type: PatchType,
        patch: &Value,
    ) -> Result<Response<Body>, ApiError> {
        let name = self.name().to_owned();
        if patch_type == PatchType::Apply {
            return self.apply(patch).await;
        }
        for _ in 0..PATCH_RETRIES {
            let current = self.current()?;
            let base = present(self.rt(), &current);
            let mut patched = match patch_type {
                PatchType::Merge => patch::merge(&base, patch),
                PatchType::Strategic => patch::strategic(&base, patch),
                PatchType::Json => patch::json(&base, patch)?,
                PatchType::Apply => unreachable!("handled above"),
            };
            self.check_body(&mut patched)?;
            patched["metadata"]["name"] = json!(name);
            let expect_rv = match patched["metadata"]["resourceVersion"].as_str() {
                Some(rv)
                    if rv
                        != current["metadata"]["resourceVersion"]
                            .as_str()
                            .unwrap_or_default() =>
                {
                    return Err(self.stale(&name));
                }
                _ => Some(resource_version(&current)),
            };
            if let Some(response) = self
                .retryable_commit(&current, patched, expect_rv, true)
                .await?
            {
                return Ok(response);
            }
        }
        Err(self.too_many_writes(&name))
    }

    async fn apply(&self, config: &Value) -> Result<Response<Body>, ApiError> {
        let name = self.name().to_owned();
        let manager = self
            .query
            .get("fieldManager")
            .filter(|m| !m.is_empty())
            .ok_or_else(apply_without_manager)?;
        let force = self.query.get("force").map(String::as_str) == Some("true");
        let mut config = config.clone();
        if config.get("apiVersion").is_none() || config.get("kind").is_none() {
            return Err(ApiError::bad_request(
                "apply configurations must set apiVersion and kind",
            ));
        }
        self.check_body(&mut config)?;
        match config["metadata"]["name"].as_str() {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => config["metadata"]["name"] = json!(name),
        }
        let subresource = self.target.subresource.clone().unwrap_or_default();
        if let Some(map) = config.as_object_mut() {
            if subresource == "status" {
                map.retain(|k, _| {
                    matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status")
                });
                if let Some(m) = map.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.retain(|k, _| matches!(k.as_str(), "name" | "namespace" | "resourceVersion"));
                }
            } else if self.rt().status_subresource {
                map.remove("status");
            }
        }
        let explicit_rv = config["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok());
        let api_version = self.rt().api_version();
        let request = crate::objects::apply::ApplyRequest {
            manager,
            force,
            subresource: &subresource,
            api_version: &api_version,
            schema: self.rt().schema.as_deref(),
        };
        for _ in 0..PATCH_RETRIES {
            let Some(current) = self.state.store.get(&self.key(&name)) else {
                if !subresource.is_empty() {
                    return Err(self.not_found());
                }
                // An apply that creates needs `create` as well as `patch`, as on the real
                // server.
                let asked = crate::access::rbac::Attributes::resource(
                    "create",
                    &self.rt().group,
                    &self.rt().plural,
                    self.target.namespace.as_deref().unwrap_or_default(),
                    &name,
                );
                crate::access::rbac::authorize(&self.state.store, self.user, &asked)?;
                let created = crate::objects::apply::apply(&json!({}), &config, &request)
                    .map_err(|c| apply_conflict(&c))?;
                // At the version asked for again: `create` checks the body against it (the
                // check above left it at the storage version).
                return match self.create(present(self.rt(), &created)).await {
                    Ok(v) => Ok(json_response(StatusCode::CREATED, &v)),
                    Err(e) if e.reason == "AlreadyExists" => continue,
                    Err(e) => Err(e),
                };
            };
            if explicit_rv.is_some_and(|rv| rv != resource_version(&current)) {
                return Err(self.stale(&name));
            }
            let merged = crate::objects::apply::apply(&current, &config, &request)
                .map_err(|c| apply_conflict(&c))?;
            let expect_rv = Some(resource_version(&current));
            if let Some(response) = self
                .retryable_commit(&current, merged, expect_rv, false)
                .await?
            {
                return Ok(response);
            }
        }
        Err(self.too_many_writes(&name))
    }

    /// Commits a patch or apply and answers with the stored object; `None` when the write lost
    /// a race with another and the caller should read again and retry.
    async fn retryable_commit(
        &self,
        current: &Value,
        new: Value,
        expect_rv: Option<u64>,
        record_update: bool,
    ) -> Result<Option<Response<Body>>, ApiError> {
        match self.commit(current, new, expect_rv, record_update).await {
            Ok(stored) => {
                self.after_write(&stored)?;
                Ok(Some(json_response(
                    StatusCode::OK,
                    &present(self.rt(), &stored),
                )))
            }
            Err(e) if is_race(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `/scale`: the object's `Scale` read, replaced or patched; a write changes only
    /// `spec.replicas` of the object.
    async fn scale(
        &self,
        method: &Method,
        body: &Bytes,
        content_type: &str,
    ) -> Result<Response<Body>, ApiError> {
        let name = self.name().to_owned();
        for _ in 0..PATCH_RETRIES {
            let current = self.current()?;
            let view = crate::objects::scale::of(&current);
            let wanted = match *method {
                Method::GET => return Ok(json_response(StatusCode::OK, &view)),
                Method::PUT => {
                    let scale = decode_as(body, content_type)?;
                    if let Some(rv) = scale["metadata"]["resourceVersion"]
                        .as_str()
                        .filter(|rv| !rv.is_empty())
                        && rv != resource_version(&current).to_string()
                    {
                        return Err(self.stale(&name));
                    }
                    scale
                }
                Method::PATCH => {
                    let accepted = [
                        "application/json-patch+json",
                        "application/merge-patch+json",
                        "application/strategic-merge-patch+json",
                    ];
                    let patch = decode(body, false)?;
                    match PatchType::from_content_type(content_type) {
                        Some(PatchType::Merge) => patch::merge(&view, &patch),
                        Some(PatchType::Strategic) => patch::strategic(&view, &patch),
                        Some(PatchType::Json) => patch::json(&view, &patch)?,
                        Some(PatchType::Apply) | None => {
                            return Err(ApiError::unsupported_media_type(content_type, &accepted));
                        }
                    }
                }
                _ => {
                    return Err(ApiError::method_not_allowed(format!(
                        "{method} is not supported on the scale subresource"
                    )));
                }
            };
            let scaled = crate::objects::scale::apply(&current, &wanted)?;
            match self
                .commit(&current, scaled, Some(resource_version(&current)), true)
                .await
            {
                Ok(stored) => {
                    return Ok(json_response(
                        StatusCode::OK,
                        &crate::objects::scale::of(&stored),
                    ));
                }
                Err(e) if is_race(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(self.too_many_writes(&name))
    }

    fn too_many_writes(&self, name: &str) -> ApiError {
        ApiError::conflict(
            &self.rt().group_resource(),
            name,
            "too many concurrent writes",
        )
    }

    async fn delete(&self, options: &Value) -> Result<Response<Body>, ApiError> {
        let name = self.name().to_owned();
        // kubectl says a deletion's dry run in its DeleteOptions body, not the query.
        let commit = match dry_run_of(
            options["dryRun"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str),
        )? {
            Commit::DryRun => Commit::DryRun,
            Commit::Store => self.commit,
        };
        let policy = self
            .query
            .get("propagationPolicy")
            .map(String::as_str)
            .or_else(|| options["propagationPolicy"].as_str())
            .unwrap_or("Background")
            .to_owned();
        if !matches!(policy.as_str(), "Background" | "Foreground" | "Orphan") {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy {policy:?} is not one of Background, Foreground, Orphan"
            )));
        }
        let expect_uid = options["preconditions"]["uid"].as_str().map(str::to_owned);
        let expect_rv = options["preconditions"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse().ok());
        let current = self.current()?;
        self.admit_external("DELETE", &name, (None, Some(&current)), commit)
            .await?;
        let result = crate::storage::gc::delete_object(
            &self.state.store,
            &self.key(&name),
            &policy,
            (expect_rv, expect_uid),
            commit,
        )
        .map_err(|e| self.store_error(&name, e))?;
        self.state.gc.notify_one();
        if commit == Commit::Store && self.rt().kind == "CustomResourceDefinition" && result.removed
        {
            self.state.registry.set_custom(&name, Vec::new());
            let resource = result.object["spec"]["names"]["plural"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
                + "."
                + result.object["spec"]["group"].as_str().unwrap_or_default();
            for key in self.state.store.keys(Some(&resource), None) {
                let _ = self.state.store.write(
                    &key,
                    Write::Delete {
                        expect_rv: None,
                        expect_uid: None,
                    },
                );
            }
        }
        // As the real handler: 202 only when the object stays and the client asked for
        // cascading deletion with the deprecated `orphanDependents: false`.
        let status = if !result.removed && options["orphanDependents"] == json!(false) {
            StatusCode::ACCEPTED
        } else {
            StatusCode::OK
        };
        if result.removed && !crate::objects::resources::returns_deleted_object(self.rt()) {
            return Ok(json_response(
                status,
                &deleted_status(self.rt(), &result.object),
            ));
        }
        Ok(json_response(status, &present(self.rt(), &result.object)))
    }

    async fn delete_collection(&self, options: &Value) -> Result<Value, ApiError> {
        let list = self.list()?;
        let mut deleted = Vec::new();
        for item in list["items"].as_array().into_iter().flatten() {
            let name = item["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let target = Target {
                namespace: item["metadata"]["namespace"]
                    .as_str()
                    .map(str::to_owned)
                    .or(self.target.namespace.clone()),
                name: Some(name.clone()),
                ..self.target.clone()
            };
            let ctx = Ctx {
                state: self.state,
                target: &target,
                query: self.query,
                manager: self.manager.clone(),
                user: self.user,
                warnings: Default::default(),
                commit: self.commit,
            };
            match ctx.delete(options).await {
                Ok(_) => deleted.push(item.clone()),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(json!({
            "kind": format!("{}List", self.rt().kind),
            "apiVersion": self.rt().api_version(),
            "metadata": {"resourceVersion": self.state.store.current_rv().to_string()},
            "items": deleted,
        }))
    }
}

/// A conflict from a write that lost a race with another (retried when the client did not ask
/// for a precondition).
/// What the real registry answers for a removed object of a kind that does not return it:
/// a `Status` naming it (its `details.kind` is the plural resource, as the real one's is).
fn deleted_status(rt: &ResourceType, object: &Value) -> Value {
    let mut details = json!({
        "name": object["metadata"]["name"],
        "kind": rt.plural,
        "uid": object["metadata"]["uid"],
    });
    if !rt.group.is_empty() {
        details["group"] = json!(rt.group);
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// What the real server answers a server-side apply without `fieldManager`: 422 Invalid on
/// `PatchOptions.meta.k8s.io`, the field named.
fn apply_without_manager() -> ApiError {
    let mut error = ApiError::invalid(
        "PatchOptions.meta.k8s.io",
        "",
        vec![crate::objects::errors::FieldCause::new(
            "FieldValueRequired",
            "fieldManager",
            "Required value: is required for apply patch",
        )],
    );
    error.details = Some(Box::new((
        "patchoptions.meta.k8s.io".into(),
        String::new(),
        "PatchOptions".into(),
    )));
    error
}

fn is_race(error: &ApiError) -> bool {
    error.code == 409 && error.reason == "Conflict" && error.causes.is_empty()
}

/// The 409 of an apply that conflicts with other managers.
fn apply_conflict(conflicts: &[crate::objects::apply::Conflict]) -> ApiError {
    let list: Vec<String> = conflicts
        .iter()
        .map(|c| format!("conflict with \"{}\": {}", c.manager, c.field))
        .collect();
    let noun = if conflicts.len() == 1 {
        "conflict"
    } else {
        "conflicts"
    };
    ApiError {
        code: 409,
        reason: "Conflict",
        message: format!(
            "Apply failed with {} {noun}: {}",
            conflicts.len(),
            list.join("\n")
        ),
        details: None,
        causes: conflicts
            .iter()
            .map(|c| {
                FieldCause::new(
                    "FieldManagerConflict",
                    c.field.clone(),
                    format!("conflict with \"{}\"", c.manager),
                )
            })
            .collect(),
    }
}

fn encode_continue(rv: u64, namespace: &str, name: &str) -> String {
    let raw = format!("{rv}\n{namespace}\n{name}");
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Result<(u64, String, String), ApiError> {
    let invalid = || ApiError::bad_request(format!("invalid continue token {token:?}"));
    let bytes: Vec<u8> = (0..token.len())
        .step_by(2)
        .map(|i| {
            token
                .get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect::<Option<_>>()
        .ok_or_else(invalid)?;
    let text = String::from_utf8(bytes).map_err(|_| invalid())?;
    let mut parts = text.splitn(3, '\n');
    let rv = parts
        .next()
        .and_then(|r| r.parse().ok())
        .ok_or_else(invalid)?;
    let namespace = parts.next().ok_or_else(invalid)?.to_owned();
    let name = parts.next().ok_or_else(invalid)?.to_owned();
    Ok((rv, namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let token = encode_continue(42, "default", "web-1");
        assert_eq!(
            decode_continue(&token).unwrap(),
            (42, "default".into(), "web-1".into())
        );
        assert_eq!(decode_continue("zz").unwrap_err().code, 400);
    }
}
