//! The agent's and the controller's event streams: a broadcast channel served as
//! server-sent events, each a JSON body named by its kind.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::{Stream, StreamExt};
use serde::Serialize;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

/// A comment this often keeps idle proxies and load balancers from closing a stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// An event that can be sent on a stream.
pub trait StreamEvent: Serialize + Clone + Send + 'static {
    /// The SSE event name clients dispatch on.
    fn event_name(&self) -> &'static str;
    /// What a reader that fell behind hears in place of the `missed` events, so that it
    /// knows instead of silently skipping them.
    fn lagged(missed: u64) -> Self;
    /// The event name under which a failure to encode an event is reported.
    const ENCODE_FAILURE: &'static str;
}

/// Serves `rx` as server-sent events until the channel closes or `shutdown` fires (a
/// graceful shutdown would otherwise wait for every open stream).
pub fn broadcast_stream<T: StreamEvent>(
    rx: broadcast::Receiver<T>,
    shutdown: CancellationToken,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let event = match rx.recv().await {
            Ok(ev) => ev,
            Err(RecvError::Lagged(missed)) => T::lagged(missed),
            Err(RecvError::Closed) => return None,
        };
        Some((Ok(encode(&event)), rx))
    })
    .take_until(shutdown.cancelled_owned());
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

fn encode<T: StreamEvent>(e: &T) -> Event {
    match Event::default().event(e.event_name()).json_data(e) {
        Ok(ev) => ev,
        // Serialising our own enums cannot fail; say so on the stream if it ever does.
        Err(err) => Event::default()
            .event(T::ENCODE_FAILURE)
            .data(format!("encoding event: {err}")),
    }
}
