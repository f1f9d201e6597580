//! The viewer: one page and its script, committed and embedded in the binary (no CDN, no
//! build step), drawing the graph from the API with Cytoscape.js and the dagre layout (vendored
//! from npm at pinned versions by `scripts/vendor-viewer`, with their licences) and following
//! its watch.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The page.
const PAGE: &str = include_str!("../assets/index.html");

/// The script.
const SCRIPT: &str = include_str!("../assets/graph.js");

/// The libraries, by their names under `/graph/vendor/`, as `scripts/vendor-viewer` fetched
/// them (the test checks their digests).
const VENDORED: &[(&str, &str)] = &[
    (
        "cytoscape.min.js",
        include_str!("../assets/vendor/cytoscape.min.js"),
    ),
    (
        "cytoscape-dagre.min.js",
        include_str!("../assets/vendor/cytoscape-dagre.min.js"),
    ),
];

/// The libraries' licences.
const LICENSES: &str = include_str!("../assets/vendor/LICENSES.md");

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
        _ => not_found(),
    }
}

/// `GET /graph/vendor/<file>`: a library (cached for a day: its version changes only with the
/// binary's), or the licences.
pub async fn vendor(Path(name): Path<String>) -> Response {
    if name == "LICENSES.md" {
        return (
            [(header::CONTENT_TYPE, "text/markdown; charset=utf-8")],
            LICENSES,
        )
            .into_response();
    }
    match VENDORED.iter().find(|(file, _)| *file == name) {
        Some((_, text)) => (
            [
                (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                (header::CACHE_CONTROL, "public, max-age=86400"),
            ],
            *text,
        )
            .into_response(),
        None => not_found(),
    }
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "no such asset\n").into_response()
}

#[cfg(test)]
mod tests {
    use sha2::{Digest as _, Sha256};

    use super::*;

    #[test]
    fn the_libraries_are_the_files_fetched_and_their_licences_are_served() {
        let fetched = [
            (
                "cytoscape.min.js",
                "71fa9ebec21a7ca2c40cff6aacc30d1f6464e363662ad4b2c197e1adc770cd94",
            ),
            (
                "cytoscape-dagre.min.js",
                "ec671a41d2bfcac580352e2997797793949e3489cecaf347fc48670d4bd456b0",
            ),
        ];
        assert_eq!(VENDORED.len(), fetched.len());
        for ((file, text), (name, sha256)) in VENDORED.iter().zip(fetched) {
            let digest: String = Sha256::digest(text.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                (*file, digest.as_str()),
                (name, sha256),
                "changed since vendored"
            );
        }
        for package in [
            "cytoscape 3.35.0",
            "cytoscape-dagre 4.0.1",
            "@dagrejs/dagre",
            "@dagrejs/graphlib",
        ] {
            assert!(LICENSES.contains(&format!("## {package}")), "{package}");
        }
        for script in ["vendor/cytoscape.min.js", "vendor/cytoscape-dagre.min.js"] {
            assert!(PAGE.contains(&format!("src=\"{script}\"")), "{script}");
        }
    }
}
