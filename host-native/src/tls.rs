//! TLS for remote servers (streamable HTTP and SSE): rustls through reqwest, with the `ring`
//! crypto provider.
//!
//! Trusted roots: the platform's store (on Linux the certificate directories of the system,
//! `/etc/ssl/certs` and the like; on macOS the platform's own verifier, which reads the
//! Keychain), plus `SSL_CERT_FILE` (a PEM file) and `SSL_CERT_DIR`
//! (directories of PEM files) for a private CA — those of the session that starts the
//! connection ([`Trust`]), never another session's: a daemon session's come from its launch
//! environment, and the daemon's own environment (the first session's) is not read at all
//! ([`distrust_process_environment`]). Roots are read each time a client is built, so a CA
//! appended to the file is trusted from the next reconnect on; a session's files are read
//! with bounds ([`MAX_CERT_FILE_BYTES`], [`MAX_CERT_DIR_FILES`], [`MAX_CERT_BYTES`]), and only
//! regular files, so a FIFO or a huge file named there cannot stall or fill the process.
//!
//! A failed TLS handshake is described in plain words by [`describe_failure`]: what is wrong
//! with the certificate and what to do; for an untrusted one, the connection's own
//! `SSL_CERT_FILE` / `SSL_CERT_DIR`.

use std::collections::{BTreeMap, HashSet};
use std::error::Error;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};

/// Installs rustls' `ring` provider as the process default, once. Call it before any reqwest
/// client is built (reqwest's `rustls-no-provider` panics without one). A provider someone
/// else installed first is kept.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The variables that name a session's own trust anchors.
pub const TRUST_VARIABLES: [&str; 2] = [CERT_FILE, CERT_DIR];
/// At most this many bytes of one certificate file are read; a bigger one is skipped.
pub const MAX_CERT_FILE_BYTES: u64 = 8 << 20;
/// At most this many entries of one certificate directory are read.
pub const MAX_CERT_DIR_FILES: usize = 4096;
/// At most this many bytes of certificate files in all are read for one client.
pub const MAX_CERT_BYTES: u64 = 64 << 20;

const CERT_FILE: &str = "SSL_CERT_FILE";
const CERT_DIR: &str = "SSL_CERT_DIR";

static PROCESS_ENVIRONMENT_DISTRUSTED: AtomicBool = AtomicBool::new(false);

/// From now on this process's own `SSL_CERT_FILE` / `SSL_CERT_DIR` are not trusted
/// ([`Trust::of_process`] is the platform's store only). The daemon calls it: its
/// environment is that of whichever session started it, and a CA one project trusts must
/// not be trusted for every other; each session's connections trust its own variables.
pub fn distrust_process_environment() {
    PROCESS_ENVIRONMENT_DISTRUSTED.store(true, Ordering::SeqCst);
}

/// Whose custom trust anchors a connection uses: the `SSL_CERT_FILE` and `SSL_CERT_DIR` of
/// the session that starts it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trust {
    cert_file: Option<OsString>,
    cert_dir: Option<OsString>,
}

impl Trust {
    /// This process's variables (a session run in its own process), or none after
    /// [`distrust_process_environment`].
    pub fn of_process() -> Trust {
        if PROCESS_ENVIRONMENT_DISTRUSTED.load(Ordering::SeqCst) {
            return Trust::default();
        }
        Trust {
            cert_file: std::env::var_os(CERT_FILE),
            cert_dir: std::env::var_os(CERT_DIR),
        }
    }

    /// A session's variables (a daemon session's launch environment).
    pub fn of_vars(vars: &BTreeMap<String, String>) -> Trust {
        Trust {
            cert_file: vars.get(CERT_FILE).map(OsString::from),
            cert_dir: vars.get(CERT_DIR).map(OsString::from),
        }
    }

    /// The trust of a connection started in `launch` (a daemon session's), else this
    /// process's.
    pub fn of_launch(launch: Option<&crate::launch::Launch>) -> Trust {
        match launch {
            Some(launch) => Trust::of_vars(&launch.vars),
            None => Trust::of_process(),
        }
    }

    /// The rustls configuration of a client with this trust: the platform's roots and this
    /// trust's own, read now.
    ///
    /// # Errors
    /// No crypto provider is installed, or rustls refuses the protocol versions.
    pub fn client_config(&self) -> Result<rustls::ClientConfig, String> {
        install_crypto_provider();
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .ok_or("no TLS crypto provider is installed")?;
        let roots = self.verifier(provider.clone());
        let verifier = SessionVerifier {
            roots,
            algorithms: provider.signature_verification_algorithms,
            settings: self.settings(),
        };
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS set-up failed: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }

    /// WebPKI over the system's certificate directories and this trust's own roots; `None`
    /// when no root at all could be read.
    #[cfg(not(target_vendor = "apple"))]
    fn verifier(&self, provider: Arc<CryptoProvider>) -> Option<Arc<dyn ServerCertVerifier>> {
        use rustls::client::WebPkiServerVerifier;
        use rustls::RootCertStore;
        let mut reader = RootReader::default();
        for dir in openssl_probe::candidate_cert_dirs() {
            reader.dir(dir);
        }
        let mut store = RootCertStore::empty();
        store.add_parsable_certificates(self.own_roots(reader));
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
            .build()
            .ok()?;
        Some(verifier)
    }

    /// The platform's own verification (the Keychain's roots and trust settings, which
    /// `/etc/ssl/certs` does not hold on macOS) with this trust's roots added.
    #[cfg(target_vendor = "apple")]
    fn verifier(&self, provider: Arc<CryptoProvider>) -> Option<Arc<dyn ServerCertVerifier>> {
        let own = self.own_roots(RootReader::default());
        let verifier =
            rustls_platform_verifier::Verifier::new_with_extra_roots(own, provider).ok()?;
        Some(Arc::new(verifier))
    }

    /// This trust's file and directories, after what `reader` read already.
    fn own_roots(&self, mut reader: RootReader) -> Vec<CertificateDer<'static>> {
        if let Some(file) = &self.cert_file {
            reader.file(Path::new(file));
        }
        if let Some(dirs) = &self.cert_dir {
            for dir in std::env::split_paths(dirs) {
                reader.dir(&dir);
            }
        }
        reader.certs
    }

    /// Where custom roots come from, for the "not trusted" message.
    fn settings(&self) -> String {
        let show = |name: &str, value: &Option<OsString>| match value {
            Some(value) => format!("{name}={}", value.to_string_lossy()),
            None => format!("{name} is not set"),
        };
        format!(
            "{}, {}",
            show(CERT_FILE, &self.cert_file),
            show(CERT_DIR, &self.cert_dir)
        )
    }
}

/// Reads certificate files within the bounds, each file once.
struct RootReader {
    seen: HashSet<(u64, u64)>,
    budget: u64,
    certs: Vec<CertificateDer<'static>>,
}

impl Default for RootReader {
    fn default() -> RootReader {
        RootReader {
            seen: HashSet::new(),
            budget: MAX_CERT_BYTES,
            certs: Vec::new(),
        }
    }
}

impl RootReader {
    fn dir(&mut self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut paths: Vec<PathBuf> = entries
            .take(MAX_CERT_DIR_FILES)
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .collect();
        paths.sort();
        for path in paths {
            self.file(&path);
        }
    }

    /// The certificates of `path` if it is a regular file (links followed) not read yet and
    /// within the bounds; anything else is skipped, as OpenSSL skips unreadable files.
    fn file(&mut self, path: &Path) {
        // Non-blocking, so that opening a FIFO does not wait for a writer.
        let Ok(file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(path)
        else {
            return;
        };
        let Ok(meta) = file.metadata() else {
            return;
        };
        if !meta.is_file() || !self.seen.insert((meta.dev(), meta.ino())) {
            return;
        }
        let limit = MAX_CERT_FILE_BYTES.min(self.budget);
        if meta.len() > limit {
            tracing::warn!(
                file = %path.display(),
                "certificate file skipped: larger than {limit} bytes"
            );
            return;
        }
        let mut bytes = Vec::new();
        if file.take(limit).read_to_end(&mut bytes).is_err() {
            return;
        }
        self.budget -= bytes.len() as u64;
        self.certs
            .extend(CertificateDer::pem_slice_iter(&bytes).filter_map(Result::ok));
    }
}

/// rustls' WebPKI verification against a session's roots; a certificate it does not trust
/// fails with [`NotTrusted`], which names that session's settings.
#[derive(Debug)]
struct SessionVerifier {
    /// `None` when no root at all could be read: nothing is trusted.
    roots: Option<Arc<dyn ServerCertVerifier>>,
    algorithms: WebPkiSupportedAlgorithms,
    settings: String,
}

impl ServerCertVerifier for SessionVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = match &self.roots {
            Some(roots) => {
                roots.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer,
            )),
        };
        verified.map_err(|error| match error {
            rustls::Error::InvalidCertificate(reason) if untrusted(&reason) => {
                rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
                    NotTrusted {
                        reason,
                        settings: self.settings.clone(),
                    },
                ))))
            }
            other => other,
        })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// A certificate no trusted root vouches for, with the settings of the session whose roots
/// were tried.
#[derive(Debug)]
struct NotTrusted {
    reason: CertificateError,
    settings: String,
}

impl std::fmt::Display for NotTrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.reason, self.settings)
    }
}

impl Error for NotTrusted {}

/// Whether `reason` means "not signed by a trusted CA".
fn untrusted(reason: &CertificateError) -> bool {
    use rustls::CertificateError as C;
    matches!(
        reason,
        C::UnknownIssuer
            | C::BadSignature
            | C::UnsupportedSignatureAlgorithmContext { .. }
            | C::UnsupportedSignatureAlgorithmForPublicKeyContext { .. }
    )
}

/// A plain-words account of a TLS failure in `error` itself (a `rustls::Error`, or the
/// `io::Error`s tokio-rustls and reqwest wrap one in), with what to do; `None` for any other
/// error. The caller walks the source chain (an `io::Error` does not list what it wraps as
/// its source, so this looks inside).
pub fn describe_failure(error: &(dyn Error + 'static)) -> Option<String> {
    let mut current = error;
    loop {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(explain(tls));
        }
        current = current.downcast_ref::<std::io::Error>()?.get_ref()?;
    }
}

fn explain(error: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    let rustls::Error::InvalidCertificate(certificate) = error else {
        return match error {
            rustls::Error::InvalidMessage(_)
            | rustls::Error::InappropriateMessage { .. }
            | rustls::Error::InappropriateHandshakeMessage { .. } => format!(
                "TLS handshake failed ({error}); if the server speaks plain HTTP, use an http:// URL"
            ),
            _ => format!("TLS handshake failed ({error})"),
        };
    };
    if let C::Other(OtherError(other)) = certificate {
        if let Some(not_trusted) = other.downcast_ref::<NotTrusted>() {
            return not_trusted_message(&not_trusted.reason, Some(&not_trusted.settings));
        }
    }
    match certificate {
        reason if untrusted(reason) => not_trusted_message(reason, None),
        C::NotValidForName | C::NotValidForNameContext { .. } => format!(
            "certificate not valid for this host: {certificate}; use a host name the \
             certificate names in the URL"
        ),
        C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. } => {
            format!(
                "certificate not valid now: {certificate}; the server needs a current \
                 certificate (or this machine's clock is wrong)"
            )
        }
        C::Revoked => format!("certificate revoked: {certificate}; the server needs a new one"),
        _ => format!("certificate rejected: {certificate}"),
    }
}

/// "certificate not trusted" and what to do, with the settings of the session whose roots
/// were tried when known.
fn not_trusted_message(reason: &CertificateError, settings: Option<&str>) -> String {
    let settings = settings.map(|s| format!(" ({s})")).unwrap_or_default();
    format!(
        "certificate not trusted: {reason} (not signed by a CA this session trusts); set \
         SSL_CERT_FILE to a PEM file with the server's CA (or SSL_CERT_DIR to a directory of \
         them) in the environment of the mcp-reconcile that starts the server, and restart \
         it{settings}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_failures_say_what_to_do() {
        // As reqwest reports it: an io::Error around tokio-rustls' io::Error around rustls'.
        let io = std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ));
        let text = describe_failure(&io).expect("a TLS failure inside io::Errors");
        assert!(
            text.starts_with("certificate not trusted: ")
                && text.contains("set SSL_CERT_FILE to a PEM file with the server's CA"),
            "{text}"
        );

        let expired = rustls::Error::InvalidCertificate(rustls::CertificateError::Expired);
        let text = describe_failure(&expired).expect("a TLS failure");
        assert!(text.starts_with("certificate not valid now"), "{text}");

        let name = rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName);
        let text = describe_failure(&name).expect("a TLS failure");
        assert!(
            text.contains("use a host name the certificate names"),
            "{text}"
        );

        let plain = std::io::Error::other("connection refused");
        assert_eq!(describe_failure(&plain), None);
    }

    #[test]
    fn a_sessions_fifo_or_huge_file_is_skipped_without_blocking() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fifo = dir.path().join("ca.pem");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
        let huge = dir.path().join("huge.pem");
        std::fs::File::create(&huge)
            .and_then(|f| f.set_len(MAX_CERT_FILE_BYTES + 1))
            .expect("a sparse file");
        let vars = |pairs: &[(&str, &Path)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.to_string_lossy().into_owned()))
                .collect()
        };
        let platform = Trust::default().own_roots(RootReader::default()).len();
        // A FIFO with no writer would block a plain open() for ever.
        let session = Trust::of_vars(&vars(&[(CERT_FILE, &fifo), (CERT_DIR, dir.path())]));
        assert_eq!(session.own_roots(RootReader::default()).len(), platform);
        assert_eq!(
            Trust::of_vars(&vars(&[(CERT_FILE, &huge)]))
                .own_roots(RootReader::default())
                .len(),
            platform
        );
        assert!(session
            .settings()
            .contains(&format!("SSL_CERT_FILE={}", fifo.display())));
    }

    #[test]
    fn the_provider_installs_once_and_clients_build() {
        install_crypto_provider();
        install_crypto_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        reqwest::Client::builder()
            .tls_backend_preconfigured(Trust::of_process().client_config().expect("config"))
            .build()
            .expect("a client with TLS");
    }

    /// A remote server's shared key counts the trust anchors its session's connection reads
    /// (`launch` keys, this module reads them): two sessions with other roots never share it.
    #[test]
    fn a_remote_servers_key_covers_the_sessions_trust_anchors() {
        use crate::launch::{Launch, NOT_COUNTED, OWN_PREFIX};
        use mcp_reconcile_kernel::identity::ConnectionId;
        use mcp_reconcile_kernel::ServerConfig;

        let launch = |vars: &[(&str, &str)]| Launch {
            dir: PathBuf::from("/p"),
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            raw: Vec::new(),
            tokens: None,
        };
        for var in TRUST_VARIABLES {
            assert!(
                !NOT_COUNTED.contains(&var) && !var.starts_with(OWN_PREFIX),
                "{var}"
            );
        }
        let id = ConnectionId("r::0123456789abcdef".into());
        let remote =
            ServerConfig::from_json(r#"{"httpUrl":"https://mcp.example/mcp"}"#).expect("config");
        let plain = launch(&[("PATH", "/bin")]).shared_id(&id, &remote);
        for var in TRUST_VARIABLES {
            let one = launch(&[("PATH", "/bin"), (var, "/ca/one.pem")]);
            let two = launch(&[("PATH", "/bin"), (var, "/ca/two.pem")]);
            assert_ne!(one.shared_id(&id, &remote), plain, "{var}");
            assert_ne!(
                one.shared_id(&id, &remote),
                two.shared_id(&id, &remote),
                "{var}"
            );
        }
    }
}
