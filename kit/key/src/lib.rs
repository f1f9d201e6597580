//! The typed key of a Kubernetes object: its namespace (empty for cluster-scoped objects) and
//! name. Decision code (the translator, the planners) and the I/O around it share it, so no
//! crate splits `"namespace/name"` strings of its own.
//!
//! Its text form is `namespace/name` (`name` alone when cluster-scoped): what it is displayed,
//! parsed and serialized as, so statuses, metrics labels and golden files read as before, and
//! keys sort as their text does.

use std::cmp::Ordering;
use std::fmt;

/// Where an object lives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Name.
    pub name: String,
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
    /// The key of `name` in `namespace`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of a cluster-scoped object.
    pub fn cluster(name: impl Into<String>) -> Self {
        Self::new("", name)
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
        if key.name.is_empty() {
            return Err(ParseError::Empty(text.to_owned()));
        }
        Ok(key)
    }

    /// The text form's bytes, in order (for comparing without allocating).
    fn text_bytes(&self) -> impl Iterator<Item = u8> + '_ {
        let slash: &[u8] = if self.namespace.is_empty() { b"" } else { b"/" };
        self.namespace
            .bytes()
            .chain(slash.iter().copied())
            .chain(self.name.bytes())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

impl std::str::FromStr for ObjectKey {
    type Err = ParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// As the text form sorts: keys of one namespace together, and the same order as the
/// `"namespace/name"` strings this key replaces.
impl Ord for ObjectKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.text_bytes().cmp(other.text_bytes())
    }
}

impl PartialOrd for ObjectKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl serde::Serialize for ObjectKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
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
        assert_eq!(key.to_string(), "apps/shop");
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
    }
}
