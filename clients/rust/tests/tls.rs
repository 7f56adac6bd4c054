//! `https://` through rustls: against a real TLS endpoint on 127.0.0.1 (`openssl s_server` with a
//! self-signed certificate made for the test), the client speaks TLS and refuses the
//! certificate, naming why. A client built without TLS would fail differently (no handshake,
//! or a refused URL), so this shows the handshake and the certificate check both happen.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// `openssl s_server` on a free port with a fresh self-signed certificate; killed on drop.
struct TlsServer {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tls_server() -> TlsServer {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let dir = std::env::temp_dir().join(format!("leafid-tls-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (key, cert) = (dir.join("key.pem"), dir.join("cert.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
        ])
        .arg("/CN=127.0.0.1")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs");
    assert!(made.success(), "openssl req failed");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("-key")
        .arg(&key)
        .arg("-cert")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server starts");
    for _ in 0..50 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    TlsServer { child, port, dir }
}

#[tokio::test]
#[ignore = "needs the openssl command: scripts/test.sh runs it"]
async fn https_speaks_tls_and_checks_the_certificate() {
    let server = tls_server();
    let client = leafid_client::Client::builder()
        .servers([format!("https://127.0.0.1:{}", server.port)])
        .wait_timeout(Duration::from_secs(2))
        .build()
        .expect("https:// is accepted");
    let err = client
        .segment("orders")
        .unwrap()
        .next_id()
        .await
        .expect_err("a self-signed certificate is refused");
    let text = err.to_string();
    assert!(
        text.to_lowercase().contains("certificate") || text.contains("UnknownIssuer"),
        "the cause names the certificate: {text}"
    );
}
