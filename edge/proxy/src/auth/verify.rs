//! Checks a password against an htpasswd hash ([`fairlead_edge_model::htpasswd`]): bcrypt,
//! Apache's MD5 crypt (`$apr1$`, computed here as Apache's `apr_md5_encode` does), SHA-1.

use base64::Engine as _;
use fairlead_edge_model::htpasswd::Hash;
use md5::{Digest as _, Md5};

/// Whether `password` is the one `hash` was made from.
pub fn matches(hash: &Hash, password: &str) -> bool {
    match hash {
        Hash::Bcrypt(h) => bcrypt::verify(password, h).unwrap_or(false),
        Hash::Apr1 { salt, hash } => apr1(password.as_bytes(), salt.as_bytes()) == *hash,
        Hash::Sha(digest) => {
            use sha1::Sha1;
            let computed =
                base64::engine::general_purpose::STANDARD.encode(Sha1::digest(password.as_bytes()));
            computed == *digest
        }
    }
}

/// The 22 characters of Apache's MD5 crypt of `password` with `salt`.
fn apr1(password: &[u8], salt: &[u8]) -> String {
    const MAGIC: &[u8] = b"$apr1$";
    let mut context = Md5::new();
    context.update(password);
    context.update(MAGIC);
    context.update(salt);
    let mut alternate = Md5::new();
    alternate.update(password);
    alternate.update(salt);
    alternate.update(password);
    let alternate = alternate.finalize();
    let mut left = password.len();
    while left > 0 {
        let n = left.min(16);
        context.update(&alternate[..n]);
        left -= n;
    }
    let mut i = password.len();
    while i > 0 {
        if i & 1 == 1 {
            context.update([0u8]);
        } else {
            context.update(&password[..1]);
        }
        i >>= 1;
    }
    let mut digest: [u8; 16] = context.finalize().into();
    for round in 0..1000 {
        let mut next = Md5::new();
        if round & 1 == 1 {
            next.update(password);
        } else {
            next.update(digest);
        }
        if round % 3 != 0 {
            next.update(salt);
        }
        if round % 7 != 0 {
            next.update(password);
        }
        if round & 1 == 1 {
            next.update(digest);
        } else {
            next.update(password);
        }
        digest = next.finalize().into();
    }
    const ALPHABET: &[u8] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut out = String::with_capacity(22);
    let mut put = |mut value: u32, count: usize| {
        for _ in 0..count {
            out.push(char::from(ALPHABET[(value & 0x3f) as usize]));
            value >>= 6;
        }
    };
    for (a, b, c) in [(0, 6, 12), (1, 7, 13), (2, 8, 14), (3, 9, 15), (4, 10, 5)] {
        put(
            (u32::from(digest[a]) << 16) | (u32::from(digest[b]) << 8) | u32::from(digest[c]),
            4,
        );
    }
    put(u32::from(digest[11]), 2);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlead_edge_model::htpasswd::parse;

    #[test]
    fn every_kind_checks_the_right_password_only() {
        let bcrypt_hash = bcrypt::hash("secret", 4).unwrap();
        let text = format!(
            "alice:$apr1$fairlead$t6vvlCQ7SxpycJ3UcbhX50\nbob:{{SHA}}5en6G6MezRroT3XKqkdPOmY/BfQ=\ncarol:{bcrypt_hash}\n"
        );
        for user in parse(&text).unwrap() {
            assert!(matches(&user.hash, "secret"), "{}", user.name);
            assert!(!matches(&user.hash, "Secret"), "{}", user.name);
            assert!(!matches(&user.hash, ""), "{}", user.name);
        }
    }
}
