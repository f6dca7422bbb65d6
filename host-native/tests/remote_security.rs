//! End-to-end: what a remote server's URL and redirects can do. Configured headers never reach
//! another origin (a redirect there fails the server instead), and the credentials in a
//! configured URL (userinfo, `api_key=`-like query values) never show in `status --json` or
//! the log.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::json;

/// An HTTP server on 127.0.0.1 in a thread: answers every request with `respond()` and
/// records the request heads. Lives as long as the test process (the thread blocks in
/// `accept`; no child process to stop).
fn tiny_server(respond: impl Fn() -> String + Send + 'static) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for mut socket in listener.incoming().flatten() {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            log.lock()
                .expect("log")
                .push(String::from_utf8_lossy(&buf).into_owned());
            let _ = socket.write_all(respond().as_bytes());
        }
    });
    (port, seen)
}

#[test]
fn headers_never_follow_a_cross_origin_redirect_and_url_credentials_stay_hidden() {
    let (other, other_seen) = tiny_server(|| {
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            .to_owned()
    });
    let location = format!("http://127.0.0.1:{other}/mcp");
    let (first, first_seen) = tiny_server(move || {
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    });
    let url =
        format!("http://alice-user:pw-secret-1@127.0.0.1:{first}/mcp?api_key=query-secret-1&v=2");
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "http": {"httpUrl": url, "headers": {"X-Api-Key": "hdr-secret-1"}},
        "sse": {"url": url, "headers": {"X-Api-Key": "hdr-secret-1"}},
    }}));
    let watch = p.watch();
    let status = p.wait_for("both remote servers to fail", |s| {
        state_of(s, "http") == "failed" && state_of(s, "sse") == "failed"
    });
    let secrets = [
        "pw-secret-1",
        "query-secret-1",
        "hdr-secret-1",
        "alice-user",
    ];
    for name in ["http", "sse"] {
        let error = status
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["lastError"].as_str())
            .unwrap_or_default()
            .to_owned();
        assert!(
            error.contains("redirected to another origin (http://127.0.0.1:")
                && error.contains("headers are not sent there — use the final URL in the config"),
            "{name}: {error}"
        );
        for secret in secrets {
            assert!(!error.contains(secret), "{name} shows {secret}: {error}");
        }
    }
    assert!(!first_seen.lock().expect("log").is_empty());
    assert!(
        other_seen.lock().expect("log").is_empty(),
        "the other origin got a request: {:?}",
        other_seen.lock().expect("log")
    );
    let log = watch.stop();
    for secret in secrets {
        assert!(!log.contains(secret), "the log shows {secret}:\n{log}");
    }
}

#[test]
fn a_url_with_credentials_is_masked_when_the_server_is_unreachable() {
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "down": {"httpUrl": format!("http://bob:pw-secret-2@127.0.0.1:{port}/mcp?token=tok-secret-2")},
    }}));
    let watch = p.watch();
    let status = p.wait_for("down to fail", |s| state_of(s, "down") == "failed");
    let error = status[0]["lastError"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(error.contains(&format!("127.0.0.1:{port}")), "{error}");
    for secret in ["pw-secret-2", "tok-secret-2"] {
        assert!(!error.contains(secret), "{error}");
    }
    let log = watch.stop();
    assert!(
        !log.contains("pw-secret-2") && !log.contains("tok-secret-2"),
        "{log}"
    );
}
