//! TLS for remote servers (streamable HTTP and SSE): rustls through reqwest, with the `ring`
//! crypto provider and the platform verifier.
//!
//! Trusted roots: the platform's store, plus `SSL_CERT_FILE` (a PEM file) and `SSL_CERT_DIR`
//! (directories of PEM files) for a private CA. The platform verifier alone would use only the
//! variables once one is set (rustls-native-certs does so), so [`extra_roots`] adds the
//! platform's certificate directories back. Roots are read each time a client is built, so a
//! CA appended to the file is trusted from the next reconnect on.
//!
//! A failed TLS handshake is described in plain words by [`describe_failure`]: what is wrong
//! with the certificate and what to do.

use std::error::Error;
use std::sync::Once;

/// Installs rustls' `ring` provider as the process default, once. Call it before any reqwest
/// client is built (reqwest's `rustls-no-provider` panics without one). A provider someone
/// else installed first is kept.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The roots to merge into the platform verifier's: none when neither `SSL_CERT_FILE` nor
/// `SSL_CERT_DIR` is set (the verifier reads the platform's store itself); otherwise the
/// certificates of the platform's directories (`/etc/ssl/certs`, ...), which the verifier
/// then leaves out. Unreadable files are skipped, as the verifier does.
pub fn extra_roots() -> Vec<reqwest::Certificate> {
    let cert_dirs = std::env::var_os(CERT_DIR);
    if std::env::var_os(CERT_FILE).is_none() && cert_dirs.is_none() {
        return Vec::new();
    }
    // A platform directory named in SSL_CERT_DIR is read by the verifier already.
    let named: Vec<std::path::PathBuf> = cert_dirs
        .map(|dirs| std::env::split_paths(&dirs).collect())
        .unwrap_or_default();
    openssl_probe::candidate_cert_dirs()
        .filter(|dir| !named.iter().any(|n| n == dir))
        .flat_map(|dir| rustls_native_certs::load_certs_from_paths(None, Some(dir)).certs)
        .filter_map(|der| reqwest::Certificate::from_der(der.as_ref()).ok())
        .collect()
}

const CERT_FILE: &str = "SSL_CERT_FILE";
const CERT_DIR: &str = "SSL_CERT_DIR";

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
    match certificate {
        C::UnknownIssuer
        | C::BadSignature
        | C::UnsupportedSignatureAlgorithmContext { .. }
        | C::UnsupportedSignatureAlgorithmForPublicKeyContext { .. } => format!(
            "certificate not trusted: {certificate} (not signed by a CA this machine trusts); \
             set SSL_CERT_FILE to a PEM file with the server's CA (or SSL_CERT_DIR to a \
             directory of them) and restart mcp-reconcile ({})",
            ca_settings()
        ),
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

/// Where custom roots come from now, for the "not trusted" message.
fn ca_settings() -> String {
    let show = |name: &str| match std::env::var_os(name) {
        Some(value) => format!("{name}={}", value.to_string_lossy()),
        None => format!("{name} is not set"),
    };
    format!("{}, {}", show(CERT_FILE), show(CERT_DIR))
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
    fn the_provider_installs_once_and_clients_build() {
        install_crypto_provider();
        install_crypto_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        reqwest::Client::builder()
            .tls_certs_merge(extra_roots())
            .build()
            .expect("a client with TLS");
    }
}
