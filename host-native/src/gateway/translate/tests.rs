//! The request state a modern client carries between the rounds of a call, and the questions
//! a legacy server's call may hand it: pure parts of the translation, no connection.

use rmcp::model::{ClientResult, ErrorCode, InputResponses, ServerRequest};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{
    client_result, kind, upstream_state, Payload, Translator, Waiting, MAX_UPSTREAM_STATE,
};
use crate::transport::Question;

/// The binding of a call of `tool` on `server`, as `Translator::call` makes it.
fn binding(server: &str, tool: &str) -> String {
    format!("{server}\u{0}{tool}")
}

fn request(value: serde_json::Value) -> ServerRequest {
    serde_json::from_value(value).expect("a server request")
}

fn elicitation() -> ServerRequest {
    request(json!({
        "method": "elicitation/create",
        "params": {"message": "Which branch?", "requestedSchema": {"type": "object", "properties": {}}},
    }))
}

fn roots() -> ServerRequest {
    request(json!({"method": "roots/list"}))
}

/// A server's own state, sealed for the client, opens to itself for the same server and tool.
#[test]
fn a_sealed_upstream_state_opens_for_the_call_it_was_sealed_for() {
    let translator = Translator::new();
    let at = binding("git", "commit");
    let sealed = translator.seal_upstream("step-2", &at).expect("sealed");
    match translator.open(&sealed, &at) {
        Ok(Payload::Upstream(state)) => assert_eq!(state, "step-2"),
        _ => panic!("opens to the server's state"),
    }
}

/// A state sealed for one tool is refused for another, and an altered one is refused, both
/// with `-32602`.
#[test]
fn a_transplanted_or_altered_state_is_refused_as_invalid_params() {
    let translator = Translator::new();
    let sealed = translator
        .seal_upstream("step-2", &binding("git", "commit"))
        .expect("sealed");
    let refused = |state: &str, at: &str| match translator.open(state, at) {
        Err(error) => error.code,
        Ok(_) => panic!("{state} opened for {at:?}"),
    };
    assert_eq!(
        refused(&sealed, &binding("git", "push")),
        ErrorCode::INVALID_PARAMS
    );
    // One character in the middle changed (all six bits of a middle base64 character count).
    let mut altered = sealed.clone().into_bytes();
    let middle = (altered.len() / 2..altered.len())
        .find(|&i| altered[i].is_ascii_alphanumeric())
        .expect("a base64 character");
    altered[middle] = if altered[middle] == b'A' { b'z' } else { b'A' };
    let altered = String::from_utf8(altered).expect("text");
    assert_eq!(
        refused(&altered, &binding("git", "commit")),
        ErrorCode::INVALID_PARAMS
    );
    // Another serve's key opens nothing of this one's.
    let other = Translator::new();
    assert!(other.open(&sealed, &binding("git", "commit")).is_err());
}

/// A server's state over the bound is not handed to the client.
#[test]
fn an_oversized_upstream_state_is_not_sealed() {
    let translator = Translator::new();
    let huge = "x".repeat(MAX_UPSTREAM_STATE + 1);
    assert!(translator.seal_upstream(&huge, &binding("s", "t")).is_err());
}

/// The state of a call the gateway parked, brought to a call that passes through to a modern
/// server, names nothing there: stale.
#[test]
fn a_parked_calls_state_is_stale_for_a_passing_call() {
    assert_eq!(
        upstream_state(Some(Payload::Upstream("s".into()))).ok(),
        Some(Some("s".into()))
    );
    assert_eq!(upstream_state(None).ok(), Some(None));
    let stale = upstream_state(Some(Payload::Parked(3))).expect_err("stale");
    assert_eq!(stale.code, ErrorCode::INVALID_PARAMS);
}

/// Only elicitation, sampling and roots can be asked in an input-required result; an answer
/// completes its question only when it has that question's result shape.
#[test]
fn only_askable_questions_are_asked_and_only_well_formed_answers_complete_them() {
    assert_eq!(kind(&elicitation()), Some("elicitation"));
    assert_eq!(kind(&roots()), Some("roots"));
    assert_eq!(kind(&request(json!({"method": "ping"}))), None);
    let accepted = json!({"action": "accept", "content": {"branch": "main"}});
    assert!(matches!(
        client_result(&elicitation(), &accepted),
        Some(ClientResult::ElicitResult(_))
    ));
    assert!(client_result(&elicitation(), &json!({"roots": 7})).is_none());
    assert!(matches!(
        client_result(&roots(), &json!({"roots": []})),
        Some(ClientResult::ListRootsResult(_))
    ));
}

/// A parked call's questions are keyed per kind and number; the client's next round completes
/// the ones it answered well, and the rest stay asked.
#[tokio::test]
async fn an_answer_completes_only_the_questions_it_answers_well() {
    let (_questions_tx, questions) = mpsc::channel(1);
    let (_progress_tx, progress) = mpsc::unbounded_channel();
    let mut waiting = Waiting {
        binding: binding("s", "t"),
        call: tokio::spawn(async { Ok(rmcp::model::CallToolResult::success(Vec::new())) }),
        cancel: CancellationToken::new(),
        questions,
        progress,
        asked: Vec::new(),
        keys: 0,
        since: tokio::time::Instant::now(),
    };
    let (elicit_answer, mut elicited) = oneshot::channel();
    let (roots_answer, mut rooted) = oneshot::channel();
    let (ping_answer, _) = oneshot::channel();
    waiting.ask(Question {
        request: elicitation(),
        answer: elicit_answer,
    });
    waiting.ask(Question {
        request: roots(),
        answer: roots_answer,
    });
    waiting.ask(Question {
        request: request(json!({"method": "ping"})),
        answer: ping_answer,
    });
    let keys: Vec<&str> = waiting.asked.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(keys, ["elicitation-1", "roots-2"], "ping is not askable");
    let responses: InputResponses = serde_json::from_value(json!({
        "elicitation-1": {"action": "decline"},
        "roots-2": {"roots": "not a list"},
    }))
    .expect("responses");
    waiting.answer(Some(&responses));
    assert!(matches!(
        elicited.try_recv(),
        Ok(ClientResult::ElicitResult(_))
    ));
    assert!(
        rooted.try_recv().is_err(),
        "a malformed answer completes nothing"
    );
    let keys: Vec<&str> = waiting.asked.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(keys, ["roots-2"], "still asked");
}
