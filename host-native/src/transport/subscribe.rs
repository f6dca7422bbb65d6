//! [`Subscribing`]: the streamable HTTP client's way to know when it is subscribed.
//!
//! After `initialize` a session server gets a standalone `GET` stream for the messages it sends
//! on its own (`list_changed`, requests, answers it moves off a closed `POST` stream). rmcp
//! opens it in a task of its own, so without this the first listing and the first calls race
//! it: the stream might open before, between or after them. That made the session's order
//! differ from run to run — a server that answers a call on the `GET` stream (SEP-1699) saw
//! the subscription sometimes before and sometimes after the call. The host waits for the
//! stream's answer (its response headers, or the refusal) before its first listing, bounded by
//! [`SUBSCRIBE_WAIT`]; a session without a session id gets no such stream and does not wait.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;
use tokio::sync::watch;

/// Longest the handshake waits for the standalone stream's answer; past it the host goes on and
/// the stream opens when it does.
pub const SUBSCRIBE_WAIT: Duration = Duration::from_secs(2);

/// Where the standalone stream is, as the client wrapper saw it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stream {
    /// `initialize` has not answered yet.
    Unknown,
    /// `initialize` answered without a session id: no standalone stream comes.
    None,
    /// `initialize` gave a session id: rmcp is opening the stream.
    Opening,
    /// The server answered the stream's `GET` (opened it, or refused it).
    Answered,
}

/// A [`StreamableHttpClient`] that passes everything on to `C` and records when the first
/// standalone stream was answered.
#[derive(Clone)]
pub struct Subscribing<C> {
    inner: C,
    state: Arc<watch::Sender<Stream>>,
}

/// Resolves once the session is subscribed or will not be.
pub struct Subscribed(watch::Receiver<Stream>);

impl<C> Subscribing<C> {
    pub fn new(inner: C) -> (Self, Subscribed) {
        let (state, rx) = watch::channel(Stream::Unknown);
        (
            Subscribing {
                inner,
                state: Arc::new(state),
            },
            Subscribed(rx),
        )
    }

    /// Passes a `POST`'s result on; the answer to `initialize` says whether a stream comes.
    fn note<T>(
        &self,
        initialize: bool,
        result: Result<StreamableHttpPostResponse, T>,
    ) -> Result<StreamableHttpPostResponse, T> {
        if let (true, Ok(response)) = (initialize, &result) {
            let next = match response {
                StreamableHttpPostResponse::Json(_, Some(_))
                | StreamableHttpPostResponse::Sse(_, Some(_)) => Stream::Opening,
                _ => Stream::None,
            };
            self.state.send_if_modified(|s| {
                let unknown = *s == Stream::Unknown;
                if unknown {
                    *s = next;
                }
                unknown
            });
        }
        result
    }

    fn answered(&self, last_event_id: Option<&String>) {
        // A resumption (`Last-Event-ID`) is not the subscription.
        if last_event_id.is_none() {
            self.state.send_if_modified(|s| {
                let changed = *s != Stream::Answered;
                *s = Stream::Answered;
                changed
            });
        }
    }
}

impl Subscribed {
    /// Waits (at most [`SUBSCRIBE_WAIT`]) for the standalone stream's answer, when one comes.
    pub async fn wait(mut self) {
        let _ = tokio::time::timeout(
            SUBSCRIBE_WAIT,
            self.0
                .wait_for(|s| matches!(s, Stream::None | Stream::Answered)),
        )
        .await;
    }
}

fn is_initialize(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_))
    )
}

impl<C> StreamableHttpClient for Subscribing<C>
where
    C: StreamableHttpClient + Sync,
{
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let initialize = is_initialize(&message);
        let result = self
            .inner
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        self.note(initialize, result)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let initialize = is_initialize(&message);
        let result = self
            .inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.note(initialize, result)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let initialize = is_initialize(&message);
        let result = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        self.note(initialize, result)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let resuming = last_event_id.clone();
        let result = self
            .inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await;
        self.answered(resuming.as_ref());
        result
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let resuming = last_event_id.clone();
        let result = self
            .inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.answered(resuming.as_ref());
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{NumberOrString, ServerJsonRpcMessage, ServerResult};

    fn answer(session: Option<&str>) -> StreamableHttpPostResponse {
        let message =
            ServerJsonRpcMessage::response(ServerResult::empty(()), NumberOrString::Number(1));
        StreamableHttpPostResponse::Json(message, session.map(str::to_owned))
    }

    fn resolved(subscribed: Subscribed) -> bool {
        futures::FutureExt::now_or_never(subscribed.wait()).is_some()
    }

    #[tokio::test]
    async fn a_session_without_an_id_gets_no_stream_and_lists_at_once() {
        let (client, subscribed) = Subscribing::new(());
        let _ = client.note::<()>(true, Ok(answer(None)));
        assert!(resolved(subscribed));
    }

    #[tokio::test]
    async fn a_session_with_an_id_lists_once_its_stream_is_answered() {
        let (client, subscribed) = Subscribing::new(());
        let _ = client.note::<()>(true, Ok(answer(Some("s1"))));
        let waiting = subscribed.0.clone();
        assert!(!resolved(Subscribed(waiting.clone())));
        // A resumption is not the subscription; a later POST's answer changes nothing.
        client.answered(Some(&"event-1".to_owned()));
        let _ = client.note::<()>(false, Ok(answer(None)));
        assert!(!resolved(Subscribed(waiting.clone())));
        client.answered(None);
        assert!(resolved(subscribed));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_never_answers_holds_the_listing_back_only_so_long() {
        let (client, subscribed) = Subscribing::new(());
        let _ = client.note::<()>(true, Ok(answer(Some("s1"))));
        let started = tokio::time::Instant::now();
        subscribed.wait().await;
        assert_eq!(started.elapsed(), SUBSCRIBE_WAIT);
    }
}
