//! The PostgreSQL probe against real servers (Debian `postgresql`): a primary and a streaming
//! replica told apart by their query, a promotion followed, the TLS modes, and failures with
//! their reasons.

use std::time::Duration;

use fairlead_health::probe::ProbeFailure;
use fairlead_health::probe::postgres::{Credentials, TlsMode, probe};
use fairlead_health_api::PostgreSqlProbe;
use fairlead_kit::pki::Ca;
use fairlead_kit::testing::postgres::{PASSWORD, Postgres, Tls};

const TIMEOUT: Duration = Duration::from_secs(3);

fn credentials(tls_mode: TlsMode, ca: Option<&str>) -> Credentials {
    Credentials {
        user: "postgres".into(),
        password: Some(PASSWORD.into()),
        tls_mode,
        client_cert: None,
        client_key: None,
        ca_cert: ca.map(str::to_owned),
    }
}

fn spec(query: &str) -> PostgreSqlProbe {
    PostgreSqlProbe {
        target_port: 0,
        db_name: Some("postgres".into()),
        query: query.into(),
        auth_secret_name: None,
    }
}

const PRIMARY_ONLY: &str = "select not pg_is_in_recovery()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_tells_the_primary_from_the_replica_and_follows_a_promotion() {
    let primary = tokio::task::spawn_blocking(|| Postgres::start(None))
        .await
        .unwrap()
        .unwrap();
    let replica = primary.replica().unwrap();
    let plain = credentials(TlsMode::Disabled, None);

    probe(primary.addr(), &spec("select 1"), &plain, TIMEOUT)
        .await
        .expect("the default query passes");
    probe(primary.addr(), &spec(PRIMARY_ONLY), &plain, TIMEOUT)
        .await
        .expect("primary");
    assert_eq!(
        probe(replica.addr(), &spec(PRIMARY_ONLY), &plain, TIMEOUT).await,
        Err(ProbeFailure::NotTrue("\"f\"".into()))
    );

    primary.stop().unwrap();
    replica.promote().unwrap();
    probe(replica.addr(), &spec(PRIMARY_ONLY), &plain, TIMEOUT)
        .await
        .expect("the promoted replica");
    let old = probe(primary.addr(), &spec(PRIMARY_ONLY), &plain, TIMEOUT).await;
    assert!(matches!(old, Err(ProbeFailure::Connect(_))), "{old:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_carry_a_reason() {
    let server = tokio::task::spawn_blocking(|| Postgres::start(None))
        .await
        .unwrap()
        .unwrap();
    let mut wrong = credentials(TlsMode::Disabled, None);
    wrong.password = Some("wrong".into());
    let err = probe(server.addr(), &spec("select 1"), &wrong, TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("password authentication failed for user \"postgres\""),
        "{err}"
    );

    let plain = credentials(TlsMode::Disabled, None);
    for (query, reason) in [
        ("select false", "query returned \"f\", not true"),
        ("select 0", "query returned \"0\", not true"),
        ("select null::bool", "query returned NULL, not true"),
        ("select 1 where false", "query returned no rows, not true"),
    ] {
        let err = probe(server.addr(), &spec(query), &plain, TIMEOUT)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), reason, "{query}");
    }
    let err = probe(
        server.addr(),
        &spec("select * from missing"),
        &plain,
        TIMEOUT,
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("relation \"missing\" does not exist"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_modes_verify_what_deckhouse_verifies() {
    let ca = Ca::generate("pg-test-ca").unwrap();
    let other_ca = Ca::generate("other-ca").unwrap();
    // One server whose certificate names its IP, one whose certificate names only a DNS name.
    let with_ip = ca
        .issue_server(&["db.example"], &["127.0.0.1".parse().unwrap()])
        .unwrap();
    let without_ip = ca.issue_server(&["db.example"], &[]).unwrap();
    let tls = |cert: &fairlead_kit::pki::CertifiedKey| Tls {
        cert_pem: cert.cert_pem.clone(),
        key_pem: cert.key_pem.clone(),
        required: true,
    };
    let (a, b) = (tls(&with_ip), tls(&without_ip));
    let named = tokio::task::spawn_blocking(move || Postgres::start(Some(a)))
        .await
        .unwrap()
        .unwrap();
    let unnamed = tokio::task::spawn_blocking(move || Postgres::start(Some(b)))
        .await
        .unwrap()
        .unwrap();
    let ca_pem = Some(ca.cert_pem());
    let q = spec("select 1");

    let disabled = probe(
        named.addr(),
        &q,
        &credentials(TlsMode::Disabled, None),
        TIMEOUT,
    )
    .await;
    assert!(
        matches!(disabled, Err(ProbeFailure::Postgres(ref m)) if m.contains("no encryption")),
        "hostssl only: {disabled:?}"
    );
    probe(
        named.addr(),
        &q,
        &credentials(TlsMode::SkipVerification, None),
        TIMEOUT,
    )
    .await
    .expect("encrypted, unverified");
    probe(
        named.addr(),
        &q,
        &credentials(TlsMode::VerifyCa, ca_pem),
        TIMEOUT,
    )
    .await
    .expect("chain");
    probe(
        named.addr(),
        &q,
        &credentials(TlsMode::VerifyAll, ca_pem),
        TIMEOUT,
    )
    .await
    .expect("chain and IP");

    probe(
        unnamed.addr(),
        &q,
        &credentials(TlsMode::VerifyCa, ca_pem),
        TIMEOUT,
    )
    .await
    .expect("VerifyCA ignores the name");
    let all = probe(
        unnamed.addr(),
        &q,
        &credentials(TlsMode::VerifyAll, ca_pem),
        TIMEOUT,
    )
    .await;
    assert!(
        matches!(all, Err(ProbeFailure::Tls(_))),
        "the pod IP is not in the certificate: {all:?}"
    );

    let foreign = probe(
        named.addr(),
        &q,
        &credentials(TlsMode::VerifyCa, Some(other_ca.cert_pem())),
        TIMEOUT,
    )
    .await;
    assert!(
        matches!(foreign, Err(ProbeFailure::Tls(_))),
        "another CA: {foreign:?}"
    );
}
