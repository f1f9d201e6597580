//! The graph's publisher: rebuilds the graph after each settled change of the index or of
//! the world's watches (and each minute, so certificate expiry moves on; and after each
//! traffic sample), and publishes it with a sequence number when it differs from the last.
//! The last [`HISTORY`] versions can be recalled, so a watch that reconnects with
//! `Last-Event-ID` gets the diff from the graph it last saw: the current graph is kept whole,
//! each earlier one as the diff that takes its successor back to it (a change is a few nodes;
//! 64 whole graphs of 10,000 objects would be most of the process's memory).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use axum::body::Bytes;
use fairlead_edge_index::Index;
use fairlead_graph::render;
use fairlead_graph::{Graph, Memo, diff};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::metrics::GraphMetrics;
use crate::sources::{Sources, Statuses};
use crate::traffic::Traffic;

/// How many published graphs are kept for resuming watches.
pub const HISTORY: usize = 64;

/// How long changes arriving together are collected into one graph.
const SETTLE: Duration = Duration::from_millis(5);

/// How often the graph is rebuilt without a change (certificate expiry is judged at build).
const REBUILD: Duration = Duration::from_secs(60);

/// One published graph.
#[derive(Debug, Default)]
pub struct Published {
    /// Its sequence number (1 for the first; 0 before any).
    pub seq: u64,
    /// The graph (its elements keep their digests: every view's version is made of them).
    pub graph: Arc<Graph>,
    /// The whole graph's JSON document and version, assembled once, when first asked for.
    whole: OnceLock<(Bytes, String)>,
    /// The whole graph's version (made by the publisher, so no watch computes it).
    version: OnceLock<String>,
}

impl Published {
    fn new(seq: u64, graph: Arc<Graph>) -> Self {
        Self {
            seq,
            graph,
            whole: OnceLock::new(),
            version: OnceLock::new(),
        }
    }

    /// The JSON document of `view` (a view of this graph, or the graph itself) and its
    /// version.
    pub fn document(&self, view: &Arc<Graph>) -> (Bytes, String) {
        let assemble = |graph: &Graph| {
            let (document, version) = render::document(graph);
            (Bytes::from(document), version)
        };
        if Arc::ptr_eq(view, &self.graph) {
            return self.whole.get_or_init(|| assemble(&self.graph)).clone();
        }
        assemble(view)
    }

    /// The version of `view` (a view of this graph, or the graph itself).
    pub fn version(&self, view: &Arc<Graph>) -> String {
        if Arc::ptr_eq(view, &self.graph) {
            return self
                .version
                .get_or_init(|| render::version(&self.graph))
                .clone();
        }
        render::version(view)
    }
}

/// The published graphs: the current one, and the way back to the last few.
pub struct Feed {
    current: watch::Sender<Arc<Published>>,
    /// `(seq, diff)`: the diff from graph `seq` back to graph `seq - 1`, newest last.
    history: Mutex<VecDeque<(u64, diff::Diff)>>,
}

impl Default for Feed {
    fn default() -> Self {
        Self {
            current: watch::Sender::new(Arc::new(Published::default())),
            history: Mutex::new(VecDeque::new()),
        }
    }
}

impl Feed {
    /// The current graph, and each next one.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Published>> {
        self.current.subscribe()
    }

    /// The current graph.
    pub fn current(&self) -> Arc<Published> {
        self.current.borrow().clone()
    }

    /// The graph published as `seq`, while it can be recalled.
    pub fn at(&self, seq: u64) -> Option<Arc<Published>> {
        let current = self.current();
        if seq == current.seq {
            return Some(current);
        }
        let history = self
            .history
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Going back from the current graph needs every step after `seq`.
        if seq == 0
            || history.front().is_none_or(|(oldest, _)| seq + 1 < *oldest)
            || seq > current.seq
        {
            return None;
        }
        let mut graph = (*current.graph).clone();
        for (_, back) in history.iter().rev().take_while(|(step, _)| *step > seq) {
            diff::apply(&mut graph, back);
        }
        Some(Arc::new(Published::new(seq, Arc::new(graph))))
    }

    /// Publishes `graph` when it differs from the current one (sharing the elements it
    /// has in common with it); whether it did.
    pub fn publish(&self, mut graph: Graph) -> bool {
        let current = self.current();
        graph.share(&current.graph);
        if current.seq > 0 && current.graph.same_as(&graph) {
            return false;
        }
        let next = Arc::new(Published::new(current.seq + 1, Arc::new(graph)));
        // Rendering what changed and the version here, off the watches' way.
        next.version(&next.graph);
        if current.seq > 0 {
            let back = diff::diff(&next.graph, &current.graph);
            let mut history = self
                .history
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            history.push_back((next.seq, back));
            while history.len() > HISTORY {
                history.pop_front();
            }
        }
        self.current.send_replace(next);
        true
    }
}

/// Unix seconds now.
fn now() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// What one build leaves the next.
#[derive(Default)]
struct Kept {
    statuses: Statuses,
    memo: Memo,
}

/// Rebuilds and publishes until `stop`.
pub async fn run(
    index: Arc<Index>,
    sources: Sources,
    traffic: Option<Traffic>,
    feed: Arc<Feed>,
    metrics: GraphMetrics,
    stop: CancellationToken,
) {
    let mut snapshots = index.subscribe();
    // Statuses change without a new snapshot (the input is the same): they wake a build too.
    let mut statuses = index.statuses();
    let mut samples = traffic.as_ref().map(Traffic::subscribe);
    let mut kept = Kept::default();
    loop {
        let snapshot = snapshots.borrow_and_update().clone();
        let samples_now = samples.as_mut().map(|s| s.borrow_and_update().clone());
        // Building is seconds of CPU at worst: not on the runtime's workers.
        let job = {
            let (index, sources, feed, metrics) = (
                index.clone(),
                sources.clone(),
                feed.clone(),
                metrics.clone(),
            );
            let mut kept = std::mem::take(&mut kept);
            tokio::task::spawn_blocking(move || {
                let started = Instant::now();
                let world = sources.world(&index, &mut kept.statuses);
                let mut graph =
                    fairlead_graph::build_with(&snapshot.input, &world, now(), &mut kept.memo);
                if let Some(samples) = &samples_now {
                    fairlead_graph::traffic::overlay(&mut graph, samples);
                }
                metrics
                    .build_seconds
                    .observe(started.elapsed().as_secs_f64());
                metrics
                    .elements
                    .set(i64::try_from(graph.len()).unwrap_or(i64::MAX));
                if feed.publish(graph) {
                    metrics.versions.inc();
                }
                kept
            })
        };
        kept = match job.await {
            Ok(kept) => kept,
            Err(e) => {
                tracing::error!(error = %e, "building the graph failed; the next build starts afresh");
                Kept::default()
            }
        };
        let traffic_changed = async {
            match samples.as_mut() {
                Some(s) => s.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            changed = snapshots.changed() => if changed.is_err() { return },
            changed = statuses.changed() => if changed.is_err() { return },
            () = sources.changed.notified() => {}
            _ = traffic_changed => {}
            () = tokio::time::sleep(REBUILD) => {}
        }
        tokio::time::sleep(SETTLE).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_different_graph_is_published_and_the_last_are_kept() {
        let feed = Feed::default();
        assert_eq!(feed.current().seq, 0);
        assert!(
            feed.publish(Graph::default()),
            "the first is always published"
        );
        assert!(
            !feed.publish(Graph::default()),
            "the same graph again is not"
        );
        for i in 0..(HISTORY + 5) {
            let mut g = Graph::default();
            let id = fairlead_graph::NodeId::new("", "Service", "ns", &format!("s{i}"));
            g.nodes.insert(
                id.clone(),
                Arc::new(fairlead_graph::Node {
                    id,
                    group: String::new(),
                    kind: "Service".into(),
                    namespace: Some("ns".into()),
                    name: format!("s{i}"),
                    parent: None,
                    missing: false,
                    health: fairlead_graph::Health::Healthy,
                    reasons: Vec::new(),
                    status: fairlead_graph::status::Status::default(),
                    traffic: None,
                    digest: Default::default(),
                }),
            );
            assert!(feed.publish(g));
        }
        let last = feed.current().seq;
        assert_eq!(last, 1 + HISTORY as u64 + 5);
        let recalled = |seq: u64| {
            feed.at(seq)
                .map(|p| p.graph.nodes.keys().next().map(|id| id.to_string()))
        };
        assert_eq!(
            recalled(last),
            Some(Some(format!("/Service/ns/s{}", HISTORY + 4)))
        );
        // Each recalled graph is the one published then.
        let oldest = last - HISTORY as u64;
        assert_eq!(
            recalled(oldest),
            Some(Some(format!("/Service/ns/s{}", oldest - 2)))
        );
        assert_eq!(recalled(oldest - 1), None, "older ones are gone");
        assert_eq!(recalled(last + 1), None);
    }
}
