//! Chat templates rendered by minijinja must equal Python Jinja2's output, byte for byte.
//!
//! The references come from `scripts/make_chat_template_refs.py`, which renders the real
//! templates of our small models (SmolLM2, Qwen2.5-Coder) and of Qwen3, Qwen3.5, Qwen3-Coder,
//! Llama 3.1 and Gemma 2 over a set of conversations the way transformers does.

use serde_json::{Map, Value};
use std::path::PathBuf;
use strata_engine::chat_template::{
    ChatMessage, ChatTemplate, ChatTemplateError, RenderOptions, PLAIN_TEMPLATE,
};

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/chat_template")
}

fn load_refs() -> Value {
    let text = std::fs::read_to_string(data_dir().join("refs.json")).expect("refs.json");
    serde_json::from_str(&text).expect("refs.json parses")
}

fn compile(refs: &Value, name: &str) -> ChatTemplate {
    let t = &refs["templates"][name];
    let file = t["file"].as_str().unwrap();
    let source = if file == "plain" {
        PLAIN_TEMPLATE.to_string()
    } else {
        std::fs::read_to_string(data_dir().join(file)).unwrap()
    };
    let (bos, eos) = (
        t["bos_token"].as_str().unwrap(),
        t["eos_token"].as_str().unwrap(),
    );
    ChatTemplate::new(&source, bos, eos).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn first_difference(a: &str, b: &str) -> String {
    let at = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let ctx = |s: &str| {
        s.chars()
            .skip(at.saturating_sub(40))
            .take(80)
            .collect::<String>()
    };
    format!(
        "first difference at char {at}:\n  got:  {:?}\n  want: {:?}",
        ctx(a),
        ctx(b)
    )
}

#[test]
fn renders_match_python_jinja2_for_every_template_and_conversation() {
    let refs = load_refs();
    let renders = refs["renders"].as_array().unwrap();
    assert!(renders.len() > 100, "too few references: {}", renders.len());
    let mut failures = Vec::new();
    for r in renders {
        let name = r["template"].as_str().unwrap();
        let conv = &refs["conversations"][r["conversation"].as_str().unwrap()];
        let messages: Vec<ChatMessage> = serde_json::from_value(conv["messages"].clone()).unwrap();
        let opts = RenderOptions {
            add_generation_prompt: r["add_generation_prompt"].as_bool().unwrap(),
            tools: conv.get("tools").and_then(Value::as_array).cloned(),
            kwargs: r["kwargs"].as_object().cloned().unwrap_or_else(Map::new),
        };
        let label = format!(
            "{name} / {} / agp={} / {}",
            r["conversation"], opts.add_generation_prompt, r["kwargs"]
        );
        let got = compile(&refs, name).render(&messages, &opts);
        match (got, r.get("expected"), r.get("error")) {
            (Ok(text), Some(Value::String(want)), _) if &text == want => {}
            (Ok(text), Some(Value::String(want)), _) => {
                failures.push(format!("{label}: {}", first_difference(&text, want)))
            }
            (Err(ChatTemplateError::Raised(msg)), _, Some(err)) if err["raised"] == true => {
                if err["message"] != msg.as_str() {
                    failures.push(format!("{label}: raised {msg:?}, want {}", err["message"]));
                }
            }
            (Err(e), _, Some(err)) if err["raised"] == false => {
                assert!(!matches!(e, ChatTemplateError::Raised(_)), "{label}: {e}");
            }
            (got, _, _) => failures.push(format!("{label}: got {got:?}, want {r}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_fixture_template_compiles() {
    let refs = load_refs();
    for name in refs["templates"].as_object().unwrap().keys() {
        compile(&refs, name);
    }
}

#[test]
fn qwen3_enable_thinking_false_closes_the_think_block() {
    let refs = load_refs();
    let t = compile(&refs, "qwen3-0.6b");
    let mut opts = RenderOptions {
        add_generation_prompt: true,
        ..Default::default()
    };
    opts.kwargs
        .insert("enable_thinking".into(), Value::Bool(false));
    let out = t.render(&[ChatMessage::new("user", "Hi")], &opts).unwrap();
    assert_eq!(
        out,
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    );
}
