//! [`Ordered`]: a connection's transport that counts the server's log messages as they arrive,
//! in the connection's order. rmcp hands each notification to a task of its own, so a call's
//! response can be seen before the log messages the server sent ahead of it have been relayed;
//! the caller waits for the count to drain before it answers ([`super::relay::Askers::logs_relayed`]).

use std::future::Future;

use rmcp::model::{JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;

use super::relay::Askers;

/// `inner`, with each log message counted on `askers` as it is received.
pub(super) struct Ordered<T> {
    inner: T,
    askers: Askers,
}

impl<T> Ordered<T> {
    pub(super) fn new(inner: T, askers: Askers) -> Self {
        Ordered { inner, askers }
    }
}

impl<T> Transport<RoleClient> for Ordered<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let receiving = self.inner.receive();
        let askers = &self.askers;
        async move {
            let message = receiving.await;
            if let Some(JsonRpcMessage::Notification(note)) = &message {
                if let ServerNotification::LoggingMessageNotification(_) = note.notification {
                    askers.log_arrived();
                }
            }
            message
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
