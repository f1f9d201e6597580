//! The protobuf wire format, both ways: a reader of `(field number, value)` pairs for the
//! request bodies the server decodes, and the few writers the documents it encodes
//! (`/openapi/v2`) and its tests need.

use crate::serve::protobuf::DecodeError;

/// A field's value on the wire.
#[derive(Clone, Copy, Debug)]
pub enum Wire<'a> {
    /// A varint (wire type 0).
    Varint(u64),
    /// Eight bytes (wire type 1).
    Fixed64(u64),
    /// Length-delimited bytes (wire type 2).
    Len(&'a [u8]),
    /// Four bytes (wire type 5), skipped.
    Fixed32,
}

/// Reads `(number, value)` pairs off a message's bytes.
pub struct Reader<'a> {
    rest: &'a [u8],
    message: &'static str,
    failed: bool,
}

impl<'a> Reader<'a> {
    /// A reader of `bytes`, a message named `message` (for errors).
    pub fn new(bytes: &'a [u8], message: &'static str) -> Self {
        Self {
            rest: bytes,
            message,
            failed: false,
        }
    }

    fn fail(&mut self, why: &str) -> Option<Result<(u32, Wire<'a>), DecodeError>> {
        self.failed = true;
        Some(Err(DecodeError::Malformed {
            path: self.message.to_owned(),
            why: why.to_owned(),
        }))
    }
}

impl<'a> Iterator for Reader<'a> {
    type Item = Result<(u32, Wire<'a>), DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        let Some((key, used)) = varint(self.rest) else {
            return self.fail("a truncated field key");
        };
        self.rest = &self.rest[used..];
        let number = u32::try_from(key >> 3).unwrap_or(0);
        let wire = match key & 7 {
            0 => match varint(self.rest) {
                Some((v, used)) => {
                    self.rest = &self.rest[used..];
                    Wire::Varint(v)
                }
                None => return self.fail("a truncated varint"),
            },
            1 if self.rest.len() >= 8 => {
                let (bytes, rest) = self.rest.split_at(8);
                self.rest = rest;
                Wire::Fixed64(u64::from_le_bytes(bytes.try_into().unwrap_or_default()))
            }
            2 => match varint(self.rest) {
                Some((len, used)) if (len as usize) <= self.rest.len() - used => {
                    let start = used;
                    let end = used + len as usize;
                    let bytes = &self.rest[start..end];
                    self.rest = &self.rest[end..];
                    Wire::Len(bytes)
                }
                _ => return self.fail("a length beyond the end of the message"),
            },
            5 if self.rest.len() >= 4 => {
                self.rest = &self.rest[4..];
                Wire::Fixed32
            }
            _ => return self.fail("an unknown or truncated wire type"),
        };
        Some(Ok((number, wire)))
    }
}

/// A varint and the bytes it took.
pub fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// Appends a varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a field key.
pub fn put_key(out: &mut Vec<u8>, number: u32, wire_type: u64) {
    put_varint(out, (u64::from(number) << 3) | wire_type);
}

/// Appends a varint field.
pub fn put_varint_field(out: &mut Vec<u8>, number: u32, value: u64) {
    put_key(out, number, 0);
    put_varint(out, value);
}

/// Appends a length-delimited field (bytes, a string, a message).
pub fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_key(out, number, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a `double` field.
pub fn put_double(out: &mut Vec<u8>, number: u32, value: f64) {
    put_key(out, number, 1);
    out.extend_from_slice(&value.to_le_bytes());
}
