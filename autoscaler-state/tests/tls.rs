//! TLS to PostgreSQL and MySQL (sqlx with rustls), configured in the state URL: `sslmode` /
//! `sslrootcert` for PostgreSQL, `ssl-mode` / `ssl-ca` for MySQL and MariaDB.
//!
//! - Against servers that do not offer TLS (test-owned fakes that answer the TLS request with
//!   "no"), `require` fails with a clear TLS error that does not show the password.
//! - Against the local PostgreSQL, when it has `ssl = on`: `verify-full` with the server's own
//!   certificate as the custom CA connects over TLS (checked in `pg_stat_ssl`) and the store
//!   works, and `verify-full` with a CA that signed nothing of the server's is refused.
//! - Against a MariaDB that only accepts TLS (`.ci/mariadb-tls.sh` starts one on 127.0.0.1:3307
//!   with a certificate of its own CA, and sets `AUTOSCALER_TEST_MYSQL_TLS_URL` and
//!   `AUTOSCALER_TEST_MYSQL_TLS_CA`): `VERIFY_IDENTITY` with that CA connects over TLS (checked in
//!   `Ssl_cipher`) and the store works; a CA that signed nothing is refused, and so is a plain
//!   connection, each without the password in the error.

#![allow(missing_docs, clippy::unwrap_used)]

mod common;

use autoscaler_core::AutoScalerStateStore;
use autoscaler_state::open_state_store;
use common::{Kind, TestDb, ctx, sample, skip, unique_name};
use sqlx::{Connection, Row};
use std::io::{Read, Write};
use std::time::Duration;

const SECRET: &str = "Sup3rS3cretPw";

/// A CA certificate that signed nothing (`tests/fixtures/tls/unrelated-ca.pem`).
fn unrelated_ca() -> String {
    format!("{}/tests/fixtures/tls/unrelated-ca.pem", env!("CARGO_MANIFEST_DIR"))
}

/// Serves one connection on 127.0.0.1 with `serve`, in a thread; returns the port.
fn fake_server(serve: fn(std::net::TcpStream)) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            serve(stream);
        }
    });
    port
}

/// A PostgreSQL server without TLS: it answers the client's SSLRequest with `N`.
fn postgres_without_tls(mut stream: std::net::TcpStream) {
    let mut request = [0u8; 8];
    if stream.read_exact(&mut request).is_ok() {
        // Length 8, then the SSLRequest code 80877103 (0x04D2162F).
        assert_eq!(
            request,
            [0, 0, 0, 8, 0x04, 0xD2, 0x16, 0x2F],
            "an SSLRequest comes first"
        );
        let _ = stream.write_all(b"N");
    }
}

/// A MySQL server without TLS: its initial handshake (protocol 10) leaves out `CLIENT_SSL`.
fn mysql_without_tls(mut stream: std::net::TcpStream) {
    const CLIENT_LONG_PASSWORD: u32 = 1;
    const CLIENT_CONNECT_WITH_DB: u32 = 8;
    const CLIENT_PROTOCOL_41: u32 = 0x200;
    const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
    const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;
    let capabilities = CLIENT_LONG_PASSWORD
        | CLIENT_CONNECT_WITH_DB
        | CLIENT_PROTOCOL_41
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH;
    let mut payload = vec![10u8];
    payload.extend_from_slice(b"8.0.36-fake\0");
    payload.extend_from_slice(&7u32.to_le_bytes()); // connection id
    payload.extend_from_slice(b"abcdefgh\0"); // auth data part 1, filler
    payload.extend_from_slice(&(capabilities as u16).to_le_bytes());
    payload.push(45); // utf8mb4_general_ci
    payload.extend_from_slice(&2u16.to_le_bytes()); // SERVER_STATUS_AUTOCOMMIT
    payload.extend_from_slice(&((capabilities >> 16) as u16).to_le_bytes());
    payload.push(21); // auth data length
    payload.extend_from_slice(&[0; 10]);
    payload.extend_from_slice(b"ijklmnopqrst\0"); // auth data part 2
    payload.extend_from_slice(b"mysql_native_password\0");
    let len = payload.len() as u32;
    let mut packet = len.to_le_bytes()[..3].to_vec();
    packet.push(0); // sequence id
    packet.extend_from_slice(&payload);
    let _ = stream.write_all(&packet);
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
}

fn assert_tls_refusal(url: &str, error: &str) {
    assert!(
        error.to_ascii_lowercase().contains("tls"),
        "the error says TLS: {error}"
    );
    assert!(!error.contains(SECRET), "the password leaked: {error}");
    assert!(!url.contains("***"), "the test URL itself is plain");
}

#[tokio::test]
async fn requiring_tls_from_a_server_without_it_fails_clearly_without_the_password() {
    let run = async {
        let port = fake_server(postgres_without_tls);
        let url = format!("postgres://app:{SECRET}@127.0.0.1:{port}/db?sslmode=require");
        let error = open_state_store(&url).await.unwrap_err().to_string();
        assert_tls_refusal(&url, &error);
        assert!(error.contains("server does not support TLS"), "{error}");

        let port = fake_server(mysql_without_tls);
        let url = format!("mysql://app:{SECRET}@127.0.0.1:{port}/db?ssl-mode=REQUIRED");
        let error = open_state_store(&url).await.unwrap_err().to_string();
        assert_tls_refusal(&url, &error);
        assert!(error.contains("server does not support TLS"), "{error}");
    };
    tokio::time::timeout(Duration::from_secs(60), run).await.unwrap();
}

/// `ssl`, and the certificate file the server presents if this process can read it.
async fn server_tls(admin: &str) -> (bool, Option<String>) {
    let mut conn = sqlx::PgConnection::connect(admin).await.unwrap();
    let ssl: String = sqlx::query("SHOW ssl").fetch_one(&mut conn).await.unwrap().get(0);
    let cert: String = sqlx::query("SHOW ssl_cert_file")
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get(0);
    conn.close().await.unwrap();
    let cert = std::path::Path::new(&cert);
    let cert = if cert.is_relative() {
        None
    } else {
        std::fs::read(cert).ok().map(|_| cert.display().to_string())
    };
    (ssl == "on", cert)
}

#[tokio::test]
async fn postgres_over_tls_with_a_custom_ca() {
    let run = async {
        let Some(db) = TestDb::new(Kind::Postgres).await else {
            return;
        };
        let admin = std::env::var("AUTOSCALER_TEST_POSTGRES_URL").unwrap();
        let (ssl, cert) = server_tls(&admin).await;
        if !ssl {
            // A server without TLS: `require` must refuse it rather than fall back.
            let error = open_state_store(&format!("{}&sslmode=require", db.url))
                .await
                .unwrap_err();
            assert!(error.to_string().contains("server does not support TLS"), "{error}");
            eprintln!("skipping the positive half: the local PostgreSQL has ssl = off");
            db.cleanup().await;
            return;
        }
        let Some(cert) = cert else {
            eprintln!("skipping the positive half: the server's certificate file is not readable here");
            db.cleanup().await;
            return;
        };
        // The server's (self-signed) certificate is its own CA. The host is the name the
        // certificate carries (Debian's is `localhost`): with sqlx 0.8.6 on rustls 0.23,
        // `verify-ca` checks the host name as `verify-full` does.
        let base = db.url.replacen("@127.0.0.1:", "@localhost:", 1);
        // The checks run before the schema is dropped, whatever their outcome.
        let outcome = tokio::spawn(check_tls(base, cert)).await;
        db.cleanup().await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic.into_panic());
        }
    };
    tokio::time::timeout(Duration::from_secs(60), run).await.unwrap();
}

/// Over `base` (a PostgreSQL URL of a schema of its own): a `verify-full` store with the server's
/// certificate as CA works over an encrypted connection; a CA that signed nothing is refused.
async fn check_tls(base: String, cert: String) {
    let url = format!("{base}&sslmode=verify-full&sslrootcert={cert}");
    let store = open_state_store(&url).await.unwrap();
    let c = ctx("tls-job");
    store
        .store_parallelism_overrides(&c, &sample(1).overrides)
        .await
        .unwrap();
    store.flush(&c).await.unwrap();
    AutoScalerStateStore::<String, common::Ctx>::remove_info_from_cache(&store, &"tls-job".to_owned()).await;
    assert_eq!(store.get_parallelism_overrides(&c).await.unwrap(), sample(1).overrides);
    store.close().await;
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let tls: bool = sqlx::query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get(0);
    conn.close().await.unwrap();
    assert!(tls, "the connection of this URL is encrypted");

    // A CA that did not sign the server's certificate is refused.
    let untrusted = format!("{base}&sslmode=verify-full&sslrootcert={}", unrelated_ca());
    let error = open_state_store(&untrusted).await.unwrap_err().to_string();
    assert!(
        error.to_ascii_lowercase().contains("certificate"),
        "the error names the certificate: {error}"
    );
}

/// The TLS-only MariaDB's URL (no TLS parameters) and the CA that signed its certificate.
const MYSQL_TLS_ENV: &str = "AUTOSCALER_TEST_MYSQL_TLS_URL";
const MYSQL_TLS_CA_ENV: &str = "AUTOSCALER_TEST_MYSQL_TLS_CA";

#[tokio::test]
async fn mysql_over_tls_with_a_custom_ca() {
    let run = async {
        let (Ok(server), Ok(ca)) = (std::env::var(MYSQL_TLS_ENV), std::env::var(MYSQL_TLS_CA_ENV)) else {
            let _ = skip::<()>(&format!(
                "{MYSQL_TLS_ENV} / {MYSQL_TLS_CA_ENV} are not set (`eval \"$(bash .ci/mariadb-tls.sh)\"` starts a TLS-only MariaDB)"
            ));
            return;
        };
        let verified = |base: &str, ca: &str| format!("{base}?ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}");
        // A database and a user with a password of their own on the TLS server.
        let name = unique_name();
        let admin_url = verified(&server, &ca);
        let mut admin = sqlx::MySqlConnection::connect(&admin_url).await.unwrap();
        for statement in [
            format!("CREATE DATABASE {name} CHARACTER SET utf8mb4"),
            format!("CREATE USER '{name}'@'%' IDENTIFIED BY '{SECRET}'"),
            format!("GRANT ALL ON {name}.* TO '{name}'@'%'"),
        ] {
            sqlx::raw_sql(&statement).execute(&mut admin).await.unwrap();
        }
        let (_, host) = server.rsplit_once('@').unwrap();
        let host = host.split('/').next().unwrap();
        let base = format!("mysql://{name}:{SECRET}@{host}/{name}");
        // The checks run before the database and user are dropped, whatever their outcome.
        let outcome = tokio::spawn(check_mysql_tls(base, ca)).await;
        for statement in [format!("DROP DATABASE {name}"), format!("DROP USER '{name}'@'%'")] {
            sqlx::raw_sql(&statement).execute(&mut admin).await.unwrap();
        }
        admin.close().await.unwrap();
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic.into_panic());
        }
    };
    tokio::time::timeout(Duration::from_secs(60), run).await.unwrap();
}

/// Over `base` (a MySQL URL with a password, of a database of its own): a `VERIFY_IDENTITY`
/// store with `ca` works over an encrypted connection; an unrelated CA and a plain connection are
/// refused without the password in the error.
async fn check_mysql_tls(base: String, ca: String) {
    let url = format!("{base}?ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}");
    let store = open_state_store(&url).await.unwrap();
    let c = ctx("mysql-tls-job");
    store
        .store_parallelism_overrides(&c, &sample(1).overrides)
        .await
        .unwrap();
    store.flush(&c).await.unwrap();
    AutoScalerStateStore::<String, common::Ctx>::remove_info_from_cache(&store, &"mysql-tls-job".to_owned()).await;
    assert_eq!(store.get_parallelism_overrides(&c).await.unwrap(), sample(1).overrides);
    store.close().await;

    let mut conn = sqlx::MySqlConnection::connect(&url).await.unwrap();
    let cipher: String = sqlx::query("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get(1);
    conn.close().await.unwrap();
    assert!(!cipher.is_empty(), "the connection of this URL is encrypted");

    // A CA that did not sign the server's certificate is refused.
    let untrusted = format!("{base}?ssl-mode=VERIFY_CA&ssl-ca={}", unrelated_ca());
    let error = open_state_store(&untrusted).await.unwrap_err().to_string();
    assert!(
        error.to_ascii_lowercase().contains("certificate"),
        "the error names the certificate: {error}"
    );
    assert!(!error.contains(SECRET), "the password leaked: {error}");

    // The server requires TLS: a connection without it is refused, also without the password.
    let error = open_state_store(&format!("{base}?ssl-mode=DISABLED"))
        .await
        .unwrap_err()
        .to_string();
    assert!(!error.contains(SECRET), "the password leaked: {error}");
}
