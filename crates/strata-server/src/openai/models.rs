//! `GET /v1/models`: the one loaded model.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::state::Shared;

/// The handler (works while loading too: the model id is known from the command line).
pub async fn list_models(State(state): State<Shared>) -> Json<Value> {
    let mut entry = json!({
        "id": state.config.model_id,
        "object": "model",
        "created": state.started_unix,
        "owned_by": "strata",
        // Anthropic's model list fields, so its SDK can read this too.
        "type": "model",
        "display_name": state.config.model_id,
    });
    if let Some(engine) = state.engine.get() {
        let c = engine.model().config();
        entry["meta"] = json!({"n_ctx": engine.n_ctx(), "n_ctx_train": c.n_ctx_train, "n_vocab": c.n_vocab, "arch": c.arch.name()});
    }
    Json(json!({"object": "list", "data": [entry], "has_more": false}))
}
