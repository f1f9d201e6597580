//! Watches: a chunked stream of `{"type": ..., "object": ...}` lines.
//!
//! - From a version (`resourceVersion=N`): every event after N still in the window, then live
//!   events. Older than the window: HTTP 200 and one `ERROR` event with a `410 Expired` Status,
//!   which is what clients relist on.
//! - Without a version (or `0`), or with `sendInitialEvents=true`: an `ADDED` event per existing
//!   object first (with `sendInitialEvents`, closed by a bookmark annotated
//!   `k8s.io/initial-events-end`).
//! - Selectors see transitions: an object that stops matching is `DELETED` for that watch, one
//!   that starts matching is `ADDED`.
//! - `allowWatchBookmarks=true`: periodic `BOOKMARK` events carrying the newest version the
//!   watch has passed, so a resumed watch starts near the head.
//! - `timeoutSeconds` ends the stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, StreamBody};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::objects::errors::ApiError;
use crate::objects::resources::ResourceType;
use crate::objects::resources::present;
use crate::objects::selectors::{FieldSelector, LabelSelector};
use crate::serve::path::Target;
use crate::serve::request::{ApiState, Body, Query, selectors};
use crate::storage::store::{EventType, StoredEvent};

/// The longest a watch runs without `timeoutSeconds` (the real server picks 30–60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

struct Filter {
    rt: ResourceType,
    /// Events carry one-row Tables (`kubectl get --watch`).
    as_table: bool,
    resource: String,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(&self.rt.kind, object)
    }

    /// The event this watch sees for a store event, if any.
    fn translate(&self, event: &StoredEvent) -> Option<(&'static str, Value)> {
        if event.key.resource != self.resource
            || self
                .namespace
                .as_deref()
                .is_some_and(|ns| ns != event.key.namespace())
        {
            return None;
        }
        let now = self.matches(&event.object);
        let before = event.previous.as_deref().is_some_and(|p| self.matches(p));
        let kind = match (event.kind, before, now) {
            (EventType::Added, _, true) => "ADDED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, false, true) => "ADDED",
            (EventType::Modified, true, false) => "DELETED",
            (EventType::Deleted, _, true) => "DELETED",
            _ => return None,
        };
        Some((kind, self.render(&event.object)))
    }

    /// The object of an event as this watch delivers it.
    fn render(&self, object: &Value) -> Value {
        let presented = present(&self.rt, object);
        if self.as_table {
            let rv = presented["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            crate::serve::table::table(&self.rt, &[presented], &rv)
        } else {
            presented
        }
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut bytes =
        serde_json::to_vec(&json!({"type": kind, "object": object})).expect("values serialize");
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn bookmark(rt: &ResourceType, rv: u64, initial_events_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": metadata})
}

/// Starts a watch and returns the streaming response.
pub fn serve(
    state: Arc<ApiState>,
    target: Target,
    query: Query,
    as_table: bool,
) -> Result<Response<Body>, ApiError> {
    let (labels, fields) = selectors(&target.rt, &query)?;
    let filter = Filter {
        resource: target.rt.storage_key(),
        rt: target.rt.clone(),
        as_table,
        namespace: target.namespace.clone(),
        labels,
        fields,
    };
    let Params {
        from,
        send_initial,
        bookmarks,
        timeout,
    } = Params::read(&query)?;
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let config = Stream {
            filter,
            from,
            send_initial,
            bookmarks,
            timeout,
        };
        config.run(&state, &tx).await;
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| {
            (
                Ok::<_, std::convert::Infallible>(http_body::Frame::data(b)),
                rx,
            )
        })
    });
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::TRANSFER_ENCODING, "chunked")
        .body(StreamBody::new(stream).boxed())
        .expect("static response parts are valid"))
}

/// What a watch request's parameters ask besides its selectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// The version to watch from (`resourceVersion`; none, `""` or `"0"`: the current
    /// state first).
    pub from: Option<u64>,
    /// `sendInitialEvents=true`.
    pub send_initial: bool,
    /// `allowWatchBookmarks=true`.
    pub bookmarks: bool,
    /// How long the watch runs (`timeoutSeconds`; half an hour when absent or unreadable).
    pub timeout: Duration,
}

impl Params {
    /// The parameters of `query`; a `resourceVersion` that is no version is refused.
    pub fn read(query: &Query) -> Result<Self, ApiError> {
        let from =
            match query.get("resourceVersion").map(String::as_str) {
                None | Some("" | "0") => None,
                Some(rv) => Some(rv.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))
                })?),
            };
        Ok(Self {
            from,
            send_initial: query.get("sendInitialEvents").map(String::as_str) == Some("true"),
            bookmarks: query.get("allowWatchBookmarks").map(String::as_str) == Some("true"),
            timeout: query
                .get("timeoutSeconds")
                .and_then(|t| t.parse().ok())
                .map_or(DEFAULT_TIMEOUT, Duration::from_secs),
        })
    }
}

struct Stream {
    filter: Filter,
    from: Option<u64>,
    send_initial: bool,
    bookmarks: bool,
    timeout: Duration,
}

impl Stream {
    async fn run(self, state: &ApiState, tx: &mpsc::Sender<Bytes>) {
        let store = &state.store;
        let initial = self.from.is_none() || self.send_initial;
        let (start, items, backlog, mut live) = loop {
            let (items, start) = if initial {
                store.list(&self.filter.resource, self.filter.namespace.as_deref())
            } else {
                (Vec::new(), self.from.unwrap_or_default())
            };
            match store.watch_from(start) {
                Ok((backlog, live)) => break (start, items, backlog, live),
                Err(expired) if !initial => {
                    let error = ApiError::expired(expired.to_string());
                    let _ = tx.send(line("ERROR", &error.status())).await;
                    return;
                }
                // The window moved past the list while it was taken: list again.
                Err(_) => continue,
            }
        };
        let mut last = start;
        for item in items.iter().filter(|i| self.filter.matches(i)) {
            let object = self.filter.render(item);
            if tx.send(line("ADDED", &object)).await.is_err() {
                return;
            }
        }
        if self.send_initial
            && tx
                .send(line("BOOKMARK", &bookmark(&self.filter.rt, start, true)))
                .await
                .is_err()
        {
            return;
        }
        for event in backlog {
            last = event.rv;
            if let Some((kind, object)) = self.filter.translate(&event)
                && tx.send(line(kind, &object)).await.is_err()
            {
                return;
            }
        }
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(state.bookmark_interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                () = &mut deadline => return,
                () = tx.closed() => return,
                _ = ticker.tick(), if self.bookmarks => {
                    // Everything up to the head has been sent once the receiver is drained.
                    let head = store.current_rv();
                    loop {
                        match live.try_recv() {
                            Ok(event) => {
                                if !self.forward(&event, &mut last, tx).await {
                                    return;
                                }
                            }
                            Err(broadcast::error::TryRecvError::Empty) => break,
                            Err(_) => return self.expire(tx).await,
                        }
                    }
                    last = last.max(head);
                    if tx.send(line("BOOKMARK", &bookmark(&self.filter.rt, last, false))).await.is_err() {
                        return;
                    }
                }
                event = live.recv() => match event {
                    Ok(event) => {
                        if !self.forward(&event, &mut last, tx).await {
                            return;
                        }
                    }
                    Err(_) => return self.expire(tx).await,
                },
            }
        }
    }

    async fn forward(&self, event: &StoredEvent, last: &mut u64, tx: &mpsc::Sender<Bytes>) -> bool {
        if event.rv <= *last {
            return true;
        }
        *last = event.rv;
        match self.filter.translate(event) {
            Some((kind, object)) => tx.send(line(kind, &object)).await.is_ok(),
            None => true,
        }
    }

    /// The watch fell behind the broadcast buffer: tell the client to relist.
    async fn expire(&self, tx: &mpsc::Sender<Bytes>) {
        let error = ApiError::expired("the watch fell behind; relist");
        let _ = tx.send(line("ERROR", &error.status())).await;
    }
}
