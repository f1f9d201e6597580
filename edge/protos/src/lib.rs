//! Envoy's API as a descriptor pool (compiled by `build.rs` from the `.proto` files under
//! `proto/`, copies of those the `envoy-types` crate ships), for two jobs the generated Rust
//! types cannot do:
//!
//! - render a resource as proto3 JSON (`to_json`), with `Any` fields expanded, so golden files
//!   read like Envoy's own config dumps;
//! - check a resource against the protoc-gen-validate rules of Envoy's API (`validate`),
//!   including the messages packed in its `Any` fields (`typed_config`), which is what Envoy
//!   itself checks before it accepts a configuration. Behind the `validate` feature (on by
//!   default, off in the shipped binary): its rules crate needs `protoc` to build, and only
//!   tests check resources this way.

use std::sync::OnceLock;

use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DynamicMessage};

#[cfg(feature = "validate")]
mod validate;
#[cfg(feature = "validate")]
pub use validate::validate;

static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy.bin"));

/// Why a resource could not be rendered or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pool does not hold the message type.
    #[error("{0} is not in Envoy's descriptor set")]
    UnknownType(String),
    /// The bytes do not decode as the type.
    #[error("{type_name}: {source}")]
    Decode {
        /// Message type.
        type_name: String,
        /// Why.
        source: prost::DecodeError,
    },
    /// JSON rendering failed.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A protoc-gen-validate rule is broken.
    #[cfg(feature = "validate")]
    #[error("{path}: {message}")]
    Invalid {
        /// Where, as message types from the resource down to the broken one.
        path: String,
        /// The rule's complaint.
        message: String,
    },
}

/// The descriptor pool of Envoy's API.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        DescriptorPool::decode(DESCRIPTORS).expect("the descriptor set built by build.rs decodes")
    })
}

/// Decodes `bytes` as the message `type_name`.
pub fn decode(type_name: &str, bytes: &[u8]) -> Result<DynamicMessage, Error> {
    let descriptor = pool()
        .get_message_by_name(type_name)
        .ok_or_else(|| Error::UnknownType(type_name.to_owned()))?;
    DynamicMessage::decode(descriptor, bytes).map_err(|source| Error::Decode {
        type_name: type_name.to_owned(),
        source,
    })
}

/// A generated message as a dynamic one.
pub fn dynamic<M: Message + Name>(message: &M) -> Result<DynamicMessage, Error> {
    decode(&M::full_name(), &message.encode_to_vec())
}

/// Proto3 JSON of a message, default fields left out, `Any` fields expanded.
pub fn to_json<M: Message + Name>(message: &M) -> Result<serde_json::Value, Error> {
    Ok(serde_json::to_value(dynamic(message)?)?)
}
