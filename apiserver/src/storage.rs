//! Where objects live: the store (every object, one global `resourceVersion`, the window of
//! recent events), its keys, the journal that keeps it across restarts (`--data-dir`),
//! deletion with finalizers and garbage collection, and the server's own secrets kept beside
//! them (`kept`). Below `access` and `serve`; uses only
//! `objects`.

pub mod gc;
pub mod journal;
pub mod kept;
pub mod key;
pub mod store;
