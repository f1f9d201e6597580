//! The HTTP API: `GET /api/v1/graph` (JSON, `format=dot|mermaid`; filters `namespace`,
//! `root` and `depth`, `kinds`, `health`; `ETag` and `If-None-Match`), `GET
//! /api/v1/graph/watch` (Server-Sent Events: `graph` with the whole view, then a `diff` per
//! change, each with the graph's sequence number as its id; `Last-Event-ID` resumes with
//! the diff from the graph last seen while it is kept), and the viewer under `/graph/`.
//! Every answer is the view of the requesting user.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use fairlead_graph::filter::{DEFAULT_DEPTH, Filter, FilterError, view};
use fairlead_graph::{Graph, Health, NodeId, diff, render};
use futures::StreamExt as _;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::authz::{Access, User, Visible};
use crate::metrics::GraphMetrics;
use crate::publish::Feed;

/// What the handlers share.
pub struct Shared {
    /// The published graphs.
    pub feed: Arc<Feed>,
    /// The authorizer.
    pub access: Access,
    /// Who a request without user headers is served as (`None`: refused).
    pub anonymous: Option<User>,
    /// Metrics.
    pub metrics: GraphMetrics,
    /// Ends watches at shutdown.
    pub stop: CancellationToken,
}

/// The routes.
pub fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new()
        .route("/api/v1/graph", get(graph))
        .route("/api/v1/graph/watch", get(watch))
        .route("/graph", get(|| async { Redirect::permanent("/graph/") }))
        .route("/graph/", get(crate::viewer::page))
        .route("/graph/{asset}", get(crate::viewer::asset))
        .route("/graph/vendor/{file}", get(crate::viewer::vendor))
        .route("/healthz", get(|| async { "ok" }))
        .with_state(shared)
}

/// The query of both endpoints.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    namespace: Option<String>,
    root: Option<String>,
    depth: Option<String>,
    kinds: Option<String>,
    health: Option<String>,
    format: Option<String>,
}

/// A request that cannot be answered, with the parameter or header that is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No user headers and no anonymous user.
    #[error(
        "no user: the graph is served behind kube-rbac-proxy, which passes the user as x-remote-user"
    )]
    NoUser,
    /// A parameter that is not valid.
    #[error("parameter {name}: {why}")]
    Param {
        /// The parameter.
        name: &'static str,
        /// Why.
        why: String,
    },
    /// The root is not in the user's graph.
    #[error(transparent)]
    Filter(#[from] FilterError),
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = match self {
            Self::NoUser => StatusCode::UNAUTHORIZED,
            Self::Param { .. } => StatusCode::BAD_REQUEST,
            Self::Filter(_) => StatusCode::NOT_FOUND,
        };
        (
            code,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{self}\n"),
        )
            .into_response()
    }
}

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Json,
    Dot,
    Mermaid,
}

impl Params {
    fn filter(&self) -> Result<Filter, ApiError> {
        let list = |v: &Option<String>| -> Vec<String> {
            v.iter()
                .flat_map(|s| s.split(','))
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let root = self
            .root
            .as_deref()
            .map(NodeId::parse)
            .transpose()
            .map_err(|e| ApiError::Param {
                name: "root",
                why: e.to_string(),
            })?;
        let depth = self
            .depth
            .as_deref()
            .map(|d| {
                d.parse::<usize>()
                    .ok()
                    .filter(|d| *d <= 64)
                    .ok_or_else(|| ApiError::Param {
                        name: "depth",
                        why: format!(
                            "{d:?} is not a number from 0 to 64 (default {DEFAULT_DEPTH})"
                        ),
                    })
            })
            .transpose()?;
        if depth.is_some() && root.is_none() {
            return Err(ApiError::Param {
                name: "depth",
                why: "only with root".into(),
            });
        }
        let health = list(&self.health)
            .iter()
            .map(|h| {
                Health::parse(h).ok_or_else(|| ApiError::Param {
                    name: "health",
                    why: format!("{h:?} is not healthy, degraded, failing or unknown"),
                })
            })
            .collect::<Result<BTreeSet<_>, _>>()?;
        Ok(Filter {
            namespace: self.namespace.clone().filter(|n| !n.is_empty()),
            root,
            depth,
            kinds: list(&self.kinds).into_iter().collect(),
            health,
        })
    }

    fn format(&self) -> Result<Format, ApiError> {
        match self.format.as_deref().unwrap_or("json") {
            "json" => Ok(Format::Json),
            "dot" => Ok(Format::Dot),
            "mermaid" => Ok(Format::Mermaid),
            other => Err(ApiError::Param {
                name: "format",
                why: format!("{other:?} is not json, dot or mermaid"),
            }),
        }
    }
}

/// The requesting user.
fn user(shared: &Shared, headers: &HeaderMap) -> Result<User, ApiError> {
    User::from_headers(headers)
        .or_else(|| shared.anonymous.clone())
        .ok_or(ApiError::NoUser)
}

/// `user`'s view of `graph` through `filter` (`graph` itself when that is everything).
async fn user_view(
    shared: &Shared,
    user: &User,
    graph: &Arc<Graph>,
    filter: &Filter,
) -> Result<Arc<Graph>, FilterError> {
    let visible = shared.access.allowed(user, graph, &shared.metrics).await;
    if visible == Visible::Everything && filter.keeps_everything() {
        return Ok(graph.clone());
    }
    view(graph, &|node| visible.admits(node), filter).map(Arc::new)
}

async fn graph(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    params: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let response = answer(&shared, &headers, params).await;
    let response = match response {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    shared
        .metrics
        .requests
        .with_label_values(&["graph", response.status().as_str()])
        .inc();
    response
}

async fn answer(
    shared: &Shared,
    headers: &HeaderMap,
    params: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(params) = params.map_err(|e| ApiError::Param {
        name: "query",
        why: e.body_text(),
    })?;
    let user = user(shared, headers)?;
    let filter = params.filter()?;
    let format = params.format()?;
    let published = shared.feed.current();
    let graph = user_view(shared, &user, &published.graph, &filter).await?;
    // The version is made of the elements' kept digests; a document is written only for a
    // client that does not hold it already.
    let version = published.version(&graph);
    let etag = match format {
        Format::Json => format!("\"{version}\""),
        Format::Dot => format!("\"{version}.dot\""),
        Format::Mermaid => format!("\"{version}.mermaid\""),
    };
    let cache = [
        (
            header::ETAG,
            HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"\"")),
        ),
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static("private, no-cache"),
        ),
        (
            header::VARY,
            HeaderValue::from_static("x-remote-user, x-remote-groups"),
        ),
    ];
    let matches = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == "*" || tag.trim_start_matches("W/") == etag
        });
    if matches {
        return Ok((StatusCode::NOT_MODIFIED, cache).into_response());
    }
    let (content_type, body) = match format {
        Format::Json => ("application/json", published.document(&graph).0),
        Format::Dot => (
            "text/vnd.graphviz; charset=utf-8",
            render::dot(&graph).into(),
        ),
        Format::Mermaid => ("text/plain; charset=utf-8", render::mermaid(&graph).into()),
    };
    Ok((
        StatusCode::OK,
        cache,
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response())
}

/// Removes one from the watch gauge when the stream ends.
struct Watching(GraphMetrics);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.watchers.dec();
    }
}

async fn watch(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    params: Result<Query<Params>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let started = (|| {
        let Query(params) = params.map_err(|e| ApiError::Param {
            name: "query",
            why: e.body_text(),
        })?;
        Ok::<_, ApiError>((user(&shared, &headers)?, params.filter()?))
    })();
    let (user, filter) = match started {
        Ok(s) => s,
        Err(e) => {
            let response = e.into_response();
            shared
                .metrics
                .requests
                .with_label_values(&["watch", response.status().as_str()])
                .inc();
            return response;
        }
    };
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(16);
    shared.metrics.watchers.inc();
    shared
        .metrics
        .requests
        .with_label_values(&["watch", "200"])
        .inc();
    let task_shared = shared.clone();
    tokio::spawn(async move {
        let shared = task_shared;
        let _watching = Watching(shared.metrics.clone());
        let mut published = shared.feed.subscribe();
        let mut current = published.borrow_and_update().clone();
        // A root that is gone is an empty view, not the end of the watch.
        let see = async |graph: &Arc<Graph>| {
            user_view(&shared, &user, graph, &filter)
                .await
                .unwrap_or_default()
        };
        let mut seen = see(&current.graph).await;
        let first = match resume.and_then(|seq| shared.feed.at(seq)) {
            Some(before) => {
                let before_view = see(&before.graph).await;
                diff_event(&diff::diff(&before_view, &seen), &seen, &current)
            }
            None => Ok(Event::default()
                .event("graph")
                .id(current.seq.to_string())
                .data(String::from_utf8_lossy(&current.document(&seen).0))),
        };
        if let Ok(event) = first
            && tx.send(event).await.is_err()
        {
            return;
        }
        loop {
            tokio::select! {
                () = shared.stop.cancelled() => return,
                () = tx.closed() => return,
                changed = published.changed() => if changed.is_err() { return },
            }
            current = published.borrow_and_update().clone();
            let next = see(&current.graph).await;
            let changes = diff::diff(&seen, &next);
            if changes.is_empty() {
                continue;
            }
            let Ok(event) = diff_event(&changes, &next, &current) else {
                continue;
            };
            seen = next;
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, Infallible>);
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A `diff` event of `changes`, which lead to `after`, a view of `published`.
fn diff_event(
    changes: &diff::Diff,
    after: &Arc<Graph>,
    published: &crate::publish::Published,
) -> Result<Event, axum::Error> {
    let mut data = serde_json::to_value(changes).unwrap_or_default();
    data["version"] = published.version(after).into();
    Event::default()
        .event("diff")
        .id(published.seq.to_string())
        .json_data(data)
}
