//! The typed key of a Kubernetes object: its namespace (empty for cluster-scoped objects) and
//! name. Decision code (the translator, the planners) and the I/O around it share it, so no
//! crate splits `"namespace/name"` strings of its own.
//!
//! Its text form is `namespace/name` (`name` alone when cluster-scoped): what it is kept,
//! displayed, parsed and serialized as, so statuses, metrics labels and golden files read as
//! before, and keys sort as their text does.

use std::cmp::Ordering;
use std::fmt;

/// Where an object lives: its namespace (empty when cluster-scoped) and name, kept as the
/// text form itself, so comparing, hashing and printing a key is one string's work and a
/// key is one allocation.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `namespace/name`, or `name`.
    text: String,
    /// Where the name starts in `text` (0 when cluster-scoped).
    name_at: usize,
}

/// Text that is not `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Nothing, or an empty part.
    #[error("{0:?} is not namespace/name: a part is empty")]
    Empty(String),
    /// More than one `/`.
    #[error("{0:?} is not namespace/name: more than one '/'")]
    TooMany(String),
}

impl ObjectKey {
    /// The key of `name` in `namespace` (cluster-scoped when `namespace` is empty).
    pub fn new(namespace: impl AsRef<str>, name: impl AsRef<str>) -> Self {
        let (namespace, name) = (namespace.as_ref(), name.as_ref());
        if namespace.is_empty() {
            return Self::cluster(name);
        }
        let mut text = String::with_capacity(namespace.len() + 1 + name.len());
        text.push_str(namespace);
        text.push('/');
        text.push_str(name);
        Self {
            text,
            name_at: namespace.len() + 1,
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self {
            text: name.into(),
            name_at: 0,
        }
    }

    /// Reads `namespace/name`, or `name` alone (cluster-scoped).
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let key = match text.split_once('/') {
            None => Self::cluster(text),
            Some((_, rest)) if rest.contains('/') => {
                return Err(ParseError::TooMany(text.to_owned()));
            }
            Some(("", _)) => {
                return Err(ParseError::Empty(text.to_owned()));
            }
            Some((namespace, name)) => Self::new(namespace, name),
        };
        if key.name().is_empty() {
            return Err(ParseError::Empty(text.to_owned()));
        }
        Ok(key)
    }

    /// The namespace; empty for cluster-scoped objects.
    pub fn namespace(&self) -> &str {
        self.text[..self.name_at]
            .strip_suffix('/')
            .unwrap_or_default()
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.text[self.name_at..]
    }

    /// The text form, `namespace/name` (or `name`).
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// How `a/…` sorts against `b/…` when neither `a` nor `b` holds a `/` (kinds before a key):
/// `Equal` when `a == b` (the rest decides). Compared a slice at a time, not a byte.
#[inline]
pub fn segment_cmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let common = a.len().min(b.len());
    match a[..common].cmp(&b[..common]) {
        Ordering::Equal => {}
        decided => return decided,
    }
    // One is a prefix of the other: the shorter goes on with '/', the longer with a byte
    // that is not one.
    match a.len().cmp(&b.len()) {
        Ordering::Equal => Ordering::Equal,
        Ordering::Less => b'/'.cmp(&b[common]),
        Ordering::Greater => a[common].cmp(&b'/'),
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl std::str::FromStr for ObjectKey {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl serde::Serialize for ObjectKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for ObjectKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_and_writes_its_text_form() {
        let key = ObjectKey::parse("apps/shop").unwrap();
        assert_eq!(key, ObjectKey::new("apps", "shop"));
        assert_eq!((key.namespace(), key.name()), ("apps", "shop"));
        assert_eq!(key.to_string(), "apps/shop");
        let cluster = ObjectKey::cluster("d8-alb");
        assert_eq!((cluster.namespace(), cluster.name()), ("", "d8-alb"));
        assert_eq!(ObjectKey::new("", "d8-alb"), cluster);
        assert_eq!(
            ObjectKey::parse("d8-alb").unwrap(),
            ObjectKey::cluster("d8-alb")
        );
        assert_eq!(ObjectKey::cluster("d8-alb").to_string(), "d8-alb");
        for bad in ["", "/x", "x/", "a/b/c"] {
            assert!(ObjectKey::parse(bad).is_err(), "{bad:?} read");
        }
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(json, "\"apps/shop\"");
        assert_eq!(serde_json::from_str::<ObjectKey>(&json).unwrap(), key);
        assert!(serde_json::from_str::<ObjectKey>("\"a/b/c\"").is_err());
    }

    #[test]
    fn keys_sort_as_their_text_does() {
        let texts = ["a-b/y", "a/x", "a/x-1", "ab/a", "b"];
        let mut keys: Vec<ObjectKey> = texts.iter().map(|t| ObjectKey::parse(t).unwrap()).collect();
        keys.sort();
        let mut sorted: Vec<&str> = texts.to_vec();
        sorted.sort();
        assert_eq!(
            keys.iter().map(ToString::to_string).collect::<Vec<_>>(),
            sorted
        );
        // A tuple order would put "a/x" before "a-b/y"; the text order does not.
        assert!(ObjectKey::new("a-b", "y") < ObjectKey::new("a", "x"));
        // Every pair, both ways, as their texts.
        let many = [
            "a/x", "a-b/y", "ab/a", "a0/z", "b", "a", "a/x-1", "ns/n", "ns-1/n", "n", "ns/n/",
        ];
        for a in many.iter().filter_map(|t| ObjectKey::parse(t).ok()) {
            for b in many.iter().filter_map(|t| ObjectKey::parse(t).ok()) {
                assert_eq!(a.cmp(&b), a.to_string().cmp(&b.to_string()), "{a} vs {b}");
            }
        }
        assert_eq!(
            segment_cmp("HTTPRoute", "HTTPRouteX"),
            "HTTPRoute/".cmp("HTTPRouteX/")
        );
        assert_eq!(segment_cmp("b", "a"), std::cmp::Ordering::Greater);
    }
}
