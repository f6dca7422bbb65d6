//! End-to-end: streamable HTTP over HTTPS. The test makes a CA and a certificate for
//! 127.0.0.1 / localhost with the OpenSSL CLI, serves the fixture over TLS on 127.0.0.1, and
//! runs a real `watch` whose `SSL_CERT_FILE` names that CA (`SSL_CERT_DIR` removed: this
//! machine's environment may set both). Trusted, the server connects, lists its tools and
//! survives a reconnect, a restart and a changed header while a stdio server beside it is never
//! touched; with another CA, `status` says the certificate is not trusted and what to do, and
//! the failure backs off like any other. Daemon sessions each trust their own
//! `SSL_CERT_FILE`, never the daemon's or another session's.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

/// A CA and a server certificate signed by it, for 127.0.0.1 and localhost.
struct Certs {
    dir: tempfile::TempDir,
}

impl Certs {
    fn new() -> Self {
        let certs = Certs {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        certs.ca("ca");
        certs.ca("other-ca");
        std::fs::write(
            certs.path("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .expect("extensions file");
        certs.openssl(
            "req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
             -keyout server.key -out server.csr -subj /CN=localhost",
        );
        certs.openssl(
            "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 2 -days 2 \
             -extfile server.ext -out server.pem",
        );
        certs
    }

    fn ca(&self, name: &str) {
        self.openssl(&format!(
            "req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
             -keyout {name}.key -out {name}.pem -days 2 -subj /CN=mcp-reconcile-test-{name} \
             -addext basicConstraints=critical,CA:TRUE \
             -addext keyUsage=critical,keyCertSign,cRLSign"
        ));
    }

    /// Runs `openssl` in the certificate directory with `args` (split at whitespace).
    fn openssl(&self, args: &str) {
        let args: Vec<&str> = args.split_whitespace().collect();
        let out = Command::new("openssl")
            .args(&args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("the openssl CLI runs");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The fixture serving HTTPS on 127.0.0.1.
struct Https(HttpFixture);

impl Https {
    /// Starts the fixture with the test certificate on `addr` (`127.0.0.1:0` for any port).
    fn start(certs: &Certs, addr: &str) -> Self {
        let (cert, key) = (certs.path("server.pem"), certs.path("server.key"));
        let server = HttpFixture::start(&[
            "--http".as_ref(),
            addr.as_ref(),
            "--name".as_ref(),
            "secure".as_ref(),
            "--tools".as_ref(),
            "echo,add".as_ref(),
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ]);
        assert!(
            server.url.starts_with("https://127.0.0.1:"),
            "the fixture printed {:?}",
            server.url
        );
        Https(server)
    }

    fn addr(&self) -> String {
        self.0
            .url
            .trim_start_matches("https://")
            .trim_end_matches("/mcp")
            .to_owned()
    }
}

impl std::ops::Deref for Https {
    type Target = HttpFixture;
    fn deref(&self) -> &HttpFixture {
        &self.0
    }
}

impl std::ops::DerefMut for Https {
    fn deref_mut(&mut self) -> &mut HttpFixture {
        &mut self.0
    }
}

/// `watch` trusting exactly `ca` for custom roots (the platform store stays trusted).
fn watch_trusting(p: &Project, ca: &Path) -> Watch {
    p.watch_command(&[], |command| {
        command.env("SSL_CERT_FILE", ca).env_remove("SSL_CERT_DIR");
    })
}

const HEADER_SECRET: &str = "hdr-secret-tls-1";

#[test]
fn an_https_server_with_a_test_ca_connects_and_survives_reconnects_and_a_header_change() {
    let certs = Certs::new();
    let mut server = Https::start(&certs, "127.0.0.1:0");
    let p = Project::new();
    let url = server.url.clone();
    let secure = |key: &str| json!({"httpUrl": url, "headers": {"X-Api-Key": key}});
    p.write_settings(json!({"mcpServers": {
        "secure": secure(HEADER_SECRET),
        "local": p.server("local", "echo"),
    }}));
    let watch = watch_trusting(&p, &certs.path("ca.pem"));
    let status = p.wait_for("both servers connected", |s| {
        all_connected(s, &["secure", "local"])
    });
    assert_eq!(field(&status, "secure", "tools"), 2, "{status:#?}");
    assert_eq!(field(&status, "secure", "transport"), "http", "{status:#?}");
    let local_pid = pid_of(&status, "local").expect("local runs");

    // 1. An explicit reconnect of the HTTPS server alone.
    let passes = watch.passes();
    let out = p.run(&["reconnect", "secure"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    watch.wait_output("the reconnect pass", |log| {
        log.lines().filter(|l| l.starts_with("reconcile #")).count() > passes
    });
    p.wait_for("secure connected again", |s| {
        all_connected(s, &["secure", "local"]) && field(s, "secure", "tools") == 2
    });

    // 2. The server restarts on the same port: the host notices, backs off and reconnects
    //    over TLS.
    let addr = server.addr();
    server.stop();
    p.wait_for("secure to notice the restart", |s| {
        state_of(s, "secure") != "connected"
    });
    server = Https::start(&certs, &addr);
    let status = p.wait_for("secure connected after the restart", |s| {
        all_connected(s, &["secure", "local"]) && field(s, "secure", "tools") == 2
    });
    assert_eq!(pid_of(&status, "local"), Some(local_pid), "{status:#?}");

    // 3. A changed header reconnects that server only.
    p.write_settings(json!({"mcpServers": {
        "secure": secure("hdr-secret-tls-2"),
        "local": p.server("local", "echo"),
    }}));
    watch.wait_output("the header change", |log| {
        log.contains("~ reconnect secure: headers.X-Api-Key changed (value hidden)")
    });
    let status = p.wait_for("secure connected with the new header", |s| {
        all_connected(s, &["secure", "local"]) && field(s, "secure", "tools") == 2
    });
    assert_eq!(pid_of(&status, "local"), Some(local_pid), "{status:#?}");
    assert_eq!(p.spawns("local"), 1, "the stdio server was restarted");

    let log = watch.stop();
    assert!(!log.contains("~ reconnect local"), "{log}");
    for secret in [HEADER_SECRET, "hdr-secret-tls-2"] {
        assert!(!log.contains(secret), "the log shows {secret}:\n{log}");
        let status = serde_json::to_string(&p.status()).expect("json");
        assert!(!status.contains(secret), "status shows {secret}: {status}");
    }
    drop(server);
}

#[test]
fn a_wrong_ca_shows_the_certificate_reason_and_backs_off() {
    let certs = Certs::new();
    let server = Https::start(&certs, "127.0.0.1:0");
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "secure": {"httpUrl": server.url, "headers": {"X-Api-Key": HEADER_SECRET}},
        "local": p.server("local", "echo"),
    }}));
    let other_ca = certs.path("other-ca.pem");
    let started = Instant::now();
    let watch = watch_trusting(&p, &other_ca);
    let status = p.wait_for("secure to fail", |s| {
        state_of(s, "secure") == "failed" && state_of(s, "local") == "connected"
    });
    let error = field(&status, "secure", "lastError")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.starts_with("server `secure` at https://127.0.0.1:")
            && error.contains(
                "failed the MCP handshake: send initialize request: certificate not trusted: "
            )
            && error.contains("set SSL_CERT_FILE to a PEM file with the server's CA")
            && error.contains(&format!("SSL_CERT_FILE={}", other_ca.display())),
        "{error}"
    );
    assert!(!error.contains(HEADER_SECRET), "{error}");

    // Retried on the supervisor's backoff (1 s, 2 s, 4 s, ...), never in a tight loop: each
    // failure announces a longer delay, and the second retry comes no sooner than the two
    // delays announced before it (counted from before the session started).
    watch.wait_output("the second retry of secure", |o| {
        o.contains("↻ secure (attempt 3)")
    });
    let seen = started.elapsed();
    let log = watch.output();
    let delays: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("secure"))
        .filter_map(|l| {
            let (_, after) = l.split_once("retry in ")?;
            after.split_once(" ms")?.0.parse().ok()
        })
        .take(2)
        .collect();
    assert!(
        delays.len() == 2 && delays[0] >= 500 && delays[1] > delays[0],
        "the delays grow: {delays:?}\n{log}"
    );
    assert!(
        seen >= Duration::from_millis(delays[0] + delays[1]),
        "attempt 3 after {seen:?}, sooner than the announced {delays:?} ms:\n{log}"
    );
    let status = p.status();
    assert_eq!(state_of(&status, "secure"), "failed", "{status:#?}");

    let log = watch.stop();
    assert!(log.contains("certificate not trusted"), "{log}");
    assert!(!log.contains(HEADER_SECRET), "{log}");
}

// ---------------------------------------------------------------------------------------------
// daemon sessions: each trusts its own SSL_CERT_FILE, never the daemon's or another session's

/// `command` with `SSL_CERT_FILE` = `ca` (or unset) and no `SSL_CERT_DIR`, whatever this
/// machine's environment says, in the test's runtime dir (where its daemon listens).
fn trusting(command: &mut Command, run: &Path, ca: Option<&Path>) {
    command
        .env("XDG_RUNTIME_DIR", run)
        .env("MCP_RECONCILE_LOG", "info")
        .env_remove("SSL_CERT_DIR");
    match ca {
        Some(ca) => command.env("SSL_CERT_FILE", ca),
        None => command.env_remove("SSL_CERT_FILE"),
    };
}

/// The daemon, its own environment trusting `ca`.
fn start_daemon(p: &Project, run: &Path, ca: &Path) -> Group {
    use std::os::unix::process::CommandExt;
    let log = std::fs::File::create(p.path("daemon.log")).expect("log");
    let mut command = Command::new(cli());
    command
        .args(["daemon", "--drain-ms", "300", "--idle-exit-ms", "60000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0);
    trusting(&mut command, run, Some(ca));
    let daemon = Group::new(command.spawn().expect("daemon starts"));
    let socket = run.join("mcp-reconcile/daemon.sock");
    let start = Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(start.elapsed() < PATIENCE, "the daemon never listened");
        std::thread::sleep(Duration::from_millis(25));
    }
    daemon
}

/// A stdio `serve` (a daemon session) for project dir `project` with `ca` as its
/// SSL_CERT_FILE, and a client on its stdio.
async fn attach(p: &Project, run: &Path, project: &str, ca: Option<&Path>) -> Served {
    let log = p.path("serve.log");
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .expect("log");
    let mut command = Command::new(cli());
    command.arg("serve").args(p.flags_in(project)).stderr(err);
    trusting(&mut command, run, ca);
    Served::spawn(command, log).await
}

/// `status --json` of the daemon session for project dir `project`.
fn session_status(p: &Project, run: &Path, project: &str) -> Vec<Value> {
    let mut command = Command::new(cli());
    command
        .args(["status", "--json"])
        .args(p.flags_in(project))
        .stdin(Stdio::null());
    trusting(&mut command, run, None);
    let out = command.output().expect("status runs");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().next().unwrap_or("[]")).unwrap_or_default()
}

async fn wait_session(
    p: &Project,
    run: &Path,
    project: &str,
    what: &str,
    pred: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let start = Instant::now();
    loop {
        let status = session_status(p, run, project);
        if pred(&status) {
            return status;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "timed out waiting for {what}; last status: {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Three sessions of one daemon reach the same https URL. The daemon itself was started with
/// the test CA as its SSL_CERT_FILE (as when the first session to start it had one): that
/// must not make anyone else trust it. The session whose own SSL_CERT_FILE is the CA
/// connects; the one without any fails with the certificate error and says its
/// SSL_CERT_FILE is not set; the one with another CA fails naming that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_daemon_session_trusts_its_own_ca_not_the_daemons_or_another_sessions() {
    let certs = Certs::new();
    let server = Https::start(&certs, "127.0.0.1:0");
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"secure": {"httpUrl": server.url}}}));
    let run = p.path("run");
    std::fs::create_dir_all(&run).expect("runtime dir");
    let ca = certs.path("ca.pem");
    let other_ca = certs.path("other-ca.pem");
    let _daemon = start_daemon(&p, &run, &ca);

    let with_ca = attach(&p, &run, "with-ca", Some(&ca)).await;
    let without = attach(&p, &run, "without", None).await;
    let with_other = attach(&p, &run, "with-other", Some(&other_ca)).await;

    let status = wait_session(&p, &run, "with-ca", "secure connected", |s| {
        all_connected(s, &["secure"])
    })
    .await;
    assert_eq!(field(&status, "secure", "tools"), 2, "{status:#?}");
    let names = with_ca.tool_names().await;
    assert!(names.iter().any(|n| n == "mcp__secure__echo"), "{names:?}");

    let failed = |s: &[Value]| state_of(s, "secure") == "failed";
    let status = wait_session(&p, &run, "without", "secure to fail", failed).await;
    let error = field(&status, "secure", "lastError")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("certificate not trusted: ")
            && error.contains("SSL_CERT_FILE is not set")
            && !error.contains(&ca.display().to_string()),
        "{error}"
    );
    let names = without.tool_names().await;
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__secure__")),
        "{names:?}"
    );

    let status = wait_session(&p, &run, "with-other", "secure to fail", failed).await;
    let error = field(&status, "secure", "lastError")
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        error.contains("certificate not trusted: ")
            && error.contains(&format!("SSL_CERT_FILE={}", other_ca.display())),
        "{error}"
    );
    let names = with_other.tool_names().await;
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__secure__")),
        "{names:?}"
    );
    for served in [with_ca, without, with_other] {
        served.close().await;
    }
}
