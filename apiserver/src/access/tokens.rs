//! ServiceAccount tokens: JWTs (ES256) the server signs for the TokenRequest API
//! (`POST …/serviceaccounts/<name>/token`, `kubectl create token`) and verifies on every
//! request and for TokenReview. Claims as the real server writes them: `iss`, `sub`
//! (`system:serviceaccount:<ns>:<name>`), `aud`, `iat`, `nbf`, `exp`, and
//! `kubernetes.io.{namespace, serviceaccount.{name, uid}}`; a token is good while it is
//! within its time, names an audience asked for, and its ServiceAccount still exists with the
//! uid it names. The signing key is kept in the data directory (mode 0600), so tokens outlive
//! a restart; without one, in memory.

use std::path::Path;

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _};
use serde_json::{Value, json};

/// The issuer, and the audience of tokens for this server.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The file of the signing key in the data directory.
const KEY_FILE: &str = "service-account-key.pk8";

/// The shortest and the default lifetime of a requested token, seconds (as the real server).
pub const MIN_EXPIRATION: i64 = 600;
/// The lifetime of a token whose request names none, seconds.
pub const DEFAULT_EXPIRATION: i64 = 3600;

/// Seconds since the Unix epoch, as token times are.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Why a token is not good, or the key could not be had.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts of JSON.
    #[error("the token is malformed")]
    Malformed,
    /// The signature does not verify.
    #[error("the token's signature is invalid")]
    Signature,
    /// Past `exp`, or before `nbf`.
    #[error("the token has expired or is not valid yet")]
    Expired,
    /// No audience asked for.
    #[error("the token's audiences {0:?} are not among the ones accepted")]
    Audience(Vec<String>),
    /// The key could not be read, made or written.
    #[error("the service account signing key: {0}")]
    Key(String),
}

/// The signing key.
pub struct Signer {
    key: EcdsaKeyPair,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("kid", &self.kid).finish()
    }
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Signer {
    /// The key of `dir` (made there when missing), or a new one in memory.
    pub fn open(dir: Option<&Path>) -> Result<Self, TokenError> {
        let rng = SystemRandom::new();
        let algorithm = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let key_error = |e: &dyn std::fmt::Display| TokenError::Key(e.to_string());
        let pkcs8 = crate::storage::kept::kept(dir, KEY_FILE, || {
            EcdsaKeyPair::generate_pkcs8(algorithm, &rng)
                .map(|made| made.as_ref().to_vec())
                .map_err(|e| e.to_string())
        })
        .map_err(|e| key_error(&e))?;
        let key = EcdsaKeyPair::from_pkcs8(algorithm, &pkcs8, &rng).map_err(|e| key_error(&e))?;
        let kid = b64(
            &ring::digest::digest(&ring::digest::SHA256, key.public_key().as_ref()).as_ref()[..16],
        );
        Ok(Self { key, kid, rng })
    }

    /// A token for the ServiceAccount `namespace/name` (uid `uid`), for `audiences`, valid
    /// from `now` for `seconds`.
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        now: i64,
        seconds: i64,
    ) -> String {
        let header = json!({"alg": "ES256", "kid": self.kid, "typ": "JWT"});
        let claims = json!({
            "iss": ISSUER,
            "sub": format!("system:serviceaccount:{namespace}:{name}"),
            "aud": audiences,
            "iat": now, "nbf": now, "exp": now + seconds,
            "jti": uuid::Uuid::new_v4().to_string(),
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        });
        let signing_input = format!(
            "{}.{}",
            b64(&serde_json::to_vec(&header).expect("values serialize")),
            b64(&serde_json::to_vec(&claims).expect("values serialize"))
        );
        let signature = self
            .key
            .sign(&self.rng, signing_input.as_bytes())
            .expect("signing with a valid key");
        format!("{signing_input}.{}", b64(signature.as_ref()))
    }

    /// The claims of `token` when its signature verifies, it is valid at `now`, and it names
    /// one of `audiences`.
    pub fn verify(&self, token: &str, now: i64, audiences: &[String]) -> Result<Value, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let decode = |part: &str| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| TokenError::Malformed)
        };
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            self.key.public_key().as_ref(),
        );
        public
            .verify(format!("{header}.{claims}").as_bytes(), &decode(signature)?)
            .map_err(|_| TokenError::Signature)?;
        let claims: Value =
            serde_json::from_slice(&decode(claims)?).map_err(|_| TokenError::Malformed)?;
        let time = |field: &str| claims[field].as_i64();
        if time("exp").is_none_or(|exp| now >= exp) || time("nbf").is_some_and(|nbf| now < nbf) {
            return Err(TokenError::Expired);
        }
        let named: Vec<String> = match &claims["aud"] {
            Value::String(one) => vec![one.clone()],
            Value::Array(many) => many
                .iter()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        if !named.iter().any(|a| audiences.contains(a)) {
            return Err(TokenError::Audience(named));
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_until_they_expire_and_only_for_their_audience() {
        let signer = Signer::open(None).unwrap();
        let api = vec![ISSUER.to_owned()];
        let token = signer.issue("team", "bot", "u-1", &api, 1_000, 600);
        let claims = signer.verify(&token, 1_100, &api).unwrap();
        assert_eq!(claims["sub"], "system:serviceaccount:team:bot");
        assert_eq!(claims["kubernetes.io"]["serviceaccount"]["uid"], "u-1");
        assert!(matches!(
            signer.verify(&token, 1_600, &api),
            Err(TokenError::Expired)
        ));
        assert!(matches!(
            signer.verify(&token, 1_100, &["vault".to_owned()]),
            Err(TokenError::Audience(_))
        ));
        // Another key's token, and a tampered one, do not verify.
        let other = Signer::open(None)
            .unwrap()
            .issue("team", "bot", "u-1", &api, 1_000, 600);
        assert!(matches!(
            signer.verify(&other, 1_100, &api),
            Err(TokenError::Signature)
        ));
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = b64(br#"{"sub":"system:serviceaccount:kube-system:admin","exp":9999999999,"aud":["https://kubernetes.default.svc.cluster.local"]}"#);
        parts[1] = &forged;
        assert!(matches!(
            signer.verify(&parts.join("."), 1_100, &api),
            Err(TokenError::Signature)
        ));
        assert!(matches!(
            signer.verify("not-a-jwt", 1_100, &api),
            Err(TokenError::Malformed)
        ));
    }

    #[test]
    fn the_key_is_kept_in_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let api = vec![ISSUER.to_owned()];
        let token = Signer::open(Some(dir.path()))
            .unwrap()
            .issue("team", "bot", "u-1", &api, 1_000, 600);
        let again = Signer::open(Some(dir.path())).unwrap();
        assert!(again.verify(&token, 1_100, &api).is_ok());
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
