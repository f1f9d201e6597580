//! The viewer: one page and its script, committed and embedded in the binary (no CDN, no
//! build step), drawing the graph from the API and following its watch.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The page.
const PAGE: &str = include_str!("../assets/index.html");

/// The script.
const SCRIPT: &str = include_str!("../assets/graph.js");

/// `GET /graph/`.
pub async fn page() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response()
}

/// `GET /graph/<asset>`.
pub async fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "graph.js" => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            SCRIPT,
        )
            .into_response(),
        _ => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}
