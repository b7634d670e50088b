//! Server-sent events: a job's engine events become SSE events through an API's formatter,
//! with keep-alive comments while nothing else is sent (queued, or reading a long prompt).
//! When the client goes away the body stream is dropped, which drops the job's receiver, which
//! stops the generation at its next token.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::worker::Event;

/// A `data:` event holding `value` as JSON.
pub fn json_event(value: &serde_json::Value) -> SseEvent {
    SseEvent::default().data(value.to_string())
}

/// A named event (`event: NAME`) holding `value` as JSON (the Anthropic stream's shape).
pub fn named_event(name: &str, value: &serde_json::Value) -> SseEvent {
    SseEvent::default().event(name).data(value.to_string())
}

/// Streams `head`, then `format(event)` for each engine event until the job is done or failed.
pub fn respond<F>(
    rx: UnboundedReceiver<Event>,
    head: Vec<SseEvent>,
    keep_alive: Duration,
    format: F,
) -> Response
where
    F: FnMut(Event) -> Vec<SseEvent> + Send + 'static,
{
    let body = stream::unfold(
        (rx, format, false),
        |(mut rx, mut format, done)| async move {
            if done {
                return None;
            }
            let ev = rx.recv().await?;
            let done = matches!(ev, Event::Done(_) | Event::Failed(_));
            Some((stream::iter(format(ev)), (rx, format, done)))
        },
    )
    .flatten();
    let events = stream::iter(head).chain(body).map(Ok::<_, Infallible>);
    sse(events, keep_alive)
}

fn sse<S: Stream<Item = Result<SseEvent, Infallible>> + Send + 'static>(
    s: S,
    keep_alive: Duration,
) -> Response {
    Sse::new(s)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tokio::sync::mpsc::unbounded_channel;

    #[tokio::test]
    async fn an_idle_stream_sends_keep_alive_comments() {
        let (_tx, rx) = unbounded_channel();
        let resp = respond(rx, Vec::new(), Duration::from_millis(20), |_| Vec::new());
        let mut body = resp.into_body();
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(&frame.into_data().unwrap()[..], b": keep-alive\n\n");
    }

    #[tokio::test]
    async fn dropping_the_response_closes_the_job_channel() {
        let (tx, rx) = unbounded_channel();
        let resp = respond(rx, Vec::new(), Duration::from_secs(5), |_| Vec::new());
        assert!(!tx.is_closed());
        drop(resp);
        assert!(tx.is_closed(), "the engine would not see the client leave");
    }
}
