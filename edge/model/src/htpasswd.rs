//! htpasswd users, as ingress-nginx's basic auth reads them from a Secret's `auth` key: one
//! `user:hash` a line (blank lines and `#` comments skipped), the hash bcrypt (`$2y$`,
//! `$2a$`, `$2b$`), Apache's MD5 (`$apr1$`) or SHA-1 (`{SHA}`). Reading only: the proxy's
//! authentication service checks passwords against what is read here.

/// How a user's password is hashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hash {
    /// bcrypt (`$2y$`, `$2a$`, `$2b$`), the whole hash.
    Bcrypt(String),
    /// Apache's MD5 crypt: its salt and the hash's 22 characters.
    Apr1 {
        /// The salt (at most 8 characters).
        salt: String,
        /// The encoded hash.
        hash: String,
    },
    /// `{SHA}`: the SHA-1 digest, base64.
    Sha(String),
}

/// One user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: String,
    /// Its password's hash.
    pub hash: Hash,
}

/// Why an htpasswd text cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HtpasswdError {
    /// A line is not `user:hash`.
    #[error("line {0}: not user:hash")]
    Line(usize),
    /// A hash of a kind nginx reads but this proxy does not (crypt(3) DES, plain text).
    #[error(
        "line {line}: user {user:?}: only bcrypt ($2y$), apr1 ($apr1$) and {{SHA}} hashes are supported"
    )]
    Kind {
        /// The line.
        line: usize,
        /// Its user.
        user: String,
    },
    /// No user at all.
    #[error("no user")]
    Empty,
}

/// Reads an htpasswd text.
pub fn parse(text: &str) -> Result<Vec<User>, HtpasswdError> {
    let mut users = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_number = i + 1;
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, hash) = line
            .split_once(':')
            .filter(|(n, h)| !n.is_empty() && !h.is_empty())
            .ok_or(HtpasswdError::Line(line_number))?;
        let kind = || HtpasswdError::Kind {
            line: line_number,
            user: name.to_owned(),
        };
        let hash = if ["$2y$", "$2a$", "$2b$"].iter().any(|p| hash.starts_with(p)) {
            Hash::Bcrypt(hash.to_owned())
        } else if let Some(rest) = hash.strip_prefix("$apr1$") {
            let (salt, encoded) = rest.split_once('$').ok_or_else(kind)?;
            if salt.len() > 8 || encoded.len() != 22 {
                return Err(kind());
            }
            Hash::Apr1 {
                salt: salt.to_owned(),
                hash: encoded.to_owned(),
            }
        } else if let Some(digest) = hash.strip_prefix("{SHA}") {
            Hash::Sha(digest.to_owned())
        } else {
            return Err(kind());
        };
        users.push(User {
            name: name.to_owned(),
            hash,
        });
    }
    if users.is_empty() {
        return Err(HtpasswdError::Empty);
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hashes_nginx_reads_are_read() {
        let users = parse(
            "# team\nalice:$apr1$fairlead$t6vvlCQ7SxpycJ3UcbhX50\n\nbob:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\ncarol:$2y$05$abcdefghijklmnopqrstuuWgIjVzOoPj1RH8Jb9cIg6Ht7NLTEY7m\n",
        )
        .unwrap();
        assert_eq!(users.len(), 3);
        assert_eq!(
            users[0].hash,
            Hash::Apr1 {
                salt: "fairlead".into(),
                hash: "t6vvlCQ7SxpycJ3UcbhX50".into()
            }
        );
        assert!(matches!(users[2].hash, Hash::Bcrypt(_)));
    }

    #[test]
    fn what_cannot_be_checked_is_named() {
        assert_eq!(parse("alice"), Err(HtpasswdError::Line(1)));
        assert_eq!(
            parse("alice:$apr1$x$y\n").unwrap_err().to_string(),
            "line 1: user \"alice\": only bcrypt ($2y$), apr1 ($apr1$) and {SHA} hashes are supported"
        );
        assert!(
            matches!(parse("dave:abJnggxhB/yWI"), Err(HtpasswdError::Kind { .. })),
            "crypt(3)"
        );
        assert_eq!(parse("# nobody\n"), Err(HtpasswdError::Empty));
    }
}
