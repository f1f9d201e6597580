//! An element's rendering kept in the element: its `{"data": …}` JSON text and that text's
//! digest, made once when first asked for, so every version, view and document that shares
//! the element reuses them (`render` assembles documents and versions from them).

use std::sync::OnceLock;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// One element rendered: `{"data": …}`, and the SHA-256 of that text.
#[derive(Debug)]
pub(crate) struct Fragment {
    pub(crate) json: Box<str>,
    pub(crate) digest: [u8; 32],
}

#[derive(Serialize)]
struct Data<'a, T> {
    data: &'a T,
}

impl Fragment {
    fn of<T: Serialize>(element: &T) -> Self {
        let json = serde_json::to_string(&Data { data: element })
            .unwrap_or_default()
            .into_boxed_str();
        let digest = Sha256::digest(json.as_bytes()).into();
        Self { json, digest }
    }
}

/// An element's rendering, kept in the element: made when first asked for, so an element
/// shared by many versions and views is rendered once, and every document of every user is
/// assembled from the kept texts. A copy of an element starts without one (it may be
/// changed); it is never part of what an element is (always equal, never serialized).
#[derive(Default)]
pub struct Rendered(OnceLock<Fragment>);

impl Rendered {
    /// Forgets the rendering (its element is being changed).
    pub(crate) fn clear(&mut self) {
        self.0 = OnceLock::new();
    }

    pub(crate) fn get<T: Serialize>(&self, element: &T) -> &Fragment {
        self.0.get_or_init(|| Fragment::of(element))
    }
}

impl Clone for Rendered {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for Rendered {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Rendered"
        } else {
            "NotRendered"
        })
    }
}
