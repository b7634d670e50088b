//! The HTTP layer without a model: routing, errors, limits, keys, panics, loading state.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

use super::*;

fn loading_app(api_key: Option<&str>) -> Router {
    let config = ServerConfig {
        api_key: api_key.map(str::to_string),
        max_body_bytes: 1024,
        ..Default::default()
    };
    let state = AppState::new(config);
    let extra = Router::new().route("/v1/boom", get(boom));
    app(state, extra)
}

async fn boom() -> &'static str {
    panic!("handler bug")
}

async fn call(app: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn post(path: &str, body: &str) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

#[tokio::test]
async fn while_loading_health_and_generation_are_503_but_models_answers() {
    let app = loading_app(None);
    let (s, b) = call(&app, Request::get("/health").body(Body::empty()).unwrap()).await;
    assert_eq!(
        (s, b["status"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("loading"))
    );
    let (s, b) = call(
        &app,
        post(
            "/v1/chat/completions",
            r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
        ),
    )
    .await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(b["error"]["type"], "unavailable_error");
    let (s, b) = call(
        &app,
        Request::get("/v1/models").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(
        (s, b["data"][0]["id"].as_str()),
        (StatusCode::OK, Some("strata"))
    );
}

#[tokio::test]
async fn a_panicking_handler_is_a_500_and_the_app_keeps_serving() {
    let app = loading_app(None);
    let (s, b) = call(&app, Request::get("/v1/boom").body(Body::empty()).unwrap()).await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(b["error"]["type"], "server_error");
    let (s, _) = call(
        &app,
        Request::get("/v1/status").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn unknown_routes_oversized_and_malformed_bodies_get_json_errors() {
    let app = loading_app(None);
    let (s, b) = call(&app, Request::get("/nowhere").body(Body::empty()).unwrap()).await;
    assert_eq!(
        (s, b["error"]["type"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found_error"))
    );
    let (s, b) = call(&app, post("/v1/messages", "{")).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        b["type"], "error",
        "Anthropic routes answer in Anthropic's shape"
    );
    let big = format!(r#"{{"prompt": "{}"}}"#, "a".repeat(4096));
    let (s, b) = call(&app, post("/v1/completions", &big)).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(b["error"]["message"].as_str().unwrap().contains("larger"));
}

#[tokio::test]
async fn api_key_is_checked_on_every_route_but_health() {
    let app = loading_app(Some("sekret"));
    let get = |path: &str, header: Option<(&str, &str)>| {
        let mut r = Request::get(path);
        if let Some((k, v)) = header {
            r = r.header(k, v);
        }
        r.body(Body::empty()).unwrap()
    };
    assert_eq!(
        call(&app, get("/v1/status", None)).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        call(
            &app,
            get("/v1/status", Some(("authorization", "Bearer nope")))
        )
        .await
        .0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        call(
            &app,
            get("/v1/status", Some(("authorization", "Bearer sekret")))
        )
        .await
        .0,
        StatusCode::OK
    );
    assert_eq!(
        call(&app, get("/v1/status", Some(("x-api-key", "sekret"))))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        call(&app, get("/health", None)).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let (s, b) = call(&app, get("/v1/messages", None)).await;
    assert_eq!(
        (s, b["error"]["type"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("authentication_error"))
    );
}
