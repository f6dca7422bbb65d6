//! Error texts of a connection, without rmcp's transport type names.

use rmcp::service::ServiceError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

/// `error` and each of its sources not already in the text, joined by ": " (reqwest's
/// "error sending request" says why only in its sources).
pub(super) fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let _ = append_causes(&mut text, error);
    text
}

/// Appends each cause not yet in `text`; a TLS failure replaces everything (what surrounds
/// it is only "error sending request", "client error (Connect)") and ends the walk.
fn append_causes(
    text: &mut String,
    error: &(dyn std::error::Error + 'static),
) -> std::ops::ControlFlow<()> {
    let mut next = Some(error);
    while let Some(cause) = next {
        if let Some(tls) = crate::tls::describe_failure(cause) {
            *text = tls;
            return std::ops::ControlFlow::Break(());
        }
        let more = cause.to_string();
        if !text.contains(&more) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&more);
        }
        // rmcp's `Client` variant wraps the reqwest error without exposing it as a source.
        if let Some(StreamableHttpError::Client(inner)) =
            cause.downcast_ref::<StreamableHttpError<reqwest::Error>>()
        {
            append_causes(text, inner)?;
        }
        next = cause.source();
    }
    std::ops::ControlFlow::Continue(())
}

/// A handshake error without rmcp's transport type names.
pub(super) fn describe_init_error(error: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match error {
        E::TransportError { error, context } => format!("{context}: {}", describe(&*error.error)),
        E::ConnectionClosed(context) => {
            format!("the server closed the connection during {context}")
        }
        other => describe(other),
    }
}

/// A request error without rmcp's transport type names.
pub(super) fn describe_service_error(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportSend(dynamic) => {
            format!("cannot send the request: {}", describe(&*dynamic.error))
        }
        other => describe(other),
    }
}
