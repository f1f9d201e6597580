//! Protobuf helpers every renderer shares: packing a message into an `Any`, and durations.

use envoy_types::pb::google::protobuf::{Any, Duration as PbDuration};
use prost::{Message, Name};

/// Packs a message into an `Any`.
pub fn any<M: Message + Name>(message: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: message.encode_to_vec(),
    }
}

/// A duration as protobuf carries it.
pub fn duration(d: std::time::Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or_default(),
    }
}
