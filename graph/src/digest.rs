//! An element's digest, kept in the element: the SHA-256 of its JSON text (16 bytes of it),
//! made once when first asked for, so every version shared by the element reuses it
//! (`render` makes a graph's version from its elements' digests).

use std::sync::OnceLock;

use sha2::{Digest as _, Sha256};

/// The digest of an element's JSON, kept in the element: made when first asked for; a copy
/// of an element starts without one (it may be changed); never part of what an element is
/// (always equal, never serialized).
#[derive(Default)]
pub struct Digest(OnceLock<[u8; 16]>);

impl Digest {
    /// Forgets the digest (its element is being changed).
    pub(crate) fn clear(&mut self) {
        self.0 = OnceLock::new();
    }

    /// The digest, of the text `write` gives when it is not kept yet.
    pub(crate) fn get(&self, write: impl FnOnce(&mut String)) -> [u8; 16] {
        *self.0.get_or_init(|| {
            let mut text = String::new();
            write(&mut text);
            let full = Sha256::digest(text.as_bytes());
            let mut digest = [0; 16];
            digest.copy_from_slice(&full[..16]);
            digest
        })
    }
}

impl Clone for Digest {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for Digest {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Digested"
        } else {
            "NotDigested"
        })
    }
}
