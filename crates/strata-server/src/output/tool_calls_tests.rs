use serde_json::{json, Value};

use super::*;
use crate::output::{merge, Delta};

fn run(p: &mut ToolCallParser, pieces: &[&str]) -> Vec<Delta> {
    let mut out: Vec<Delta> = Vec::new();
    for piece in pieces {
        out.extend(p.push(piece).into_iter().map(Delta::from));
    }
    out.extend(p.finish().into_iter().map(Delta::from));
    merge(out)
}

/// Parses `text` whole, split in two at every char boundary, and one char at a time; all must
/// agree. Returns the merged events.
fn every_split(text: &str, tools: &[Value]) -> Vec<Delta> {
    let whole = run(&mut ToolCallParser::new(tools), &[text]);
    for (i, _) in text.char_indices().skip(1) {
        let got = run(&mut ToolCallParser::new(tools), &[&text[..i], &text[i..]]);
        assert_eq!(got, whole, "split at byte {i} of {text:?}");
    }
    let chars: Vec<String> = text.chars().map(String::from).collect();
    let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
    assert_eq!(
        run(&mut ToolCallParser::new(tools), &refs),
        whole,
        "char by char"
    );
    whole
}

fn weather_tool() -> Vec<Value> {
    vec![
        json!({"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}
        }}}),
    ]
}

#[test]
fn hermes_call_between_text_at_every_split() {
    let text = "Sure. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, \"}\"]}}\n</tool_call> Done";
    assert_eq!(
        every_split(text, &[]),
        vec![
            Delta::Content("Sure. ".into()),
            Delta::ToolStart {
                index: 0,
                name: "get_weather".into()
            },
            Delta::ToolArgs {
                index: 0,
                delta: r#"{"city": "Paris", "n": [1, "}"]}"#.into()
            },
            Delta::ToolEnd { index: 0 },
            Delta::Content("Done".into()),
        ]
    );
}

#[test]
fn two_hermes_calls_get_consecutive_indices() {
    let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"x\": 1}, \"name\": \"b\"}\n</tool_call>";
    let d = every_split(text, &[]);
    assert_eq!(
        d[0],
        Delta::ToolStart {
            index: 0,
            name: "a".into()
        }
    );
    assert_eq!(d[2], Delta::ToolEnd { index: 0 });
    assert_eq!(
        d[3],
        Delta::ToolStart {
            index: 1,
            name: "b".into()
        }
    );
    assert_eq!(
        d[4],
        Delta::ToolArgs {
            index: 1,
            delta: r#"{"x":1}"#.into()
        }
    );
    assert_eq!(d.len(), 6, "{d:?}");
}

#[test]
fn qwen_xml_call_streams_strings_and_types_the_rest_at_every_split() {
    let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis \"Île\"\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
    let d = every_split(text, &weather_tool());
    assert_eq!(d.len(), 3, "{d:?}");
    assert_eq!(
        d[0],
        Delta::ToolStart {
            index: 0,
            name: "get_weather".into()
        }
    );
    let Delta::ToolArgs { delta, .. } = &d[1] else {
        panic!("{d:?}")
    };
    let args: Value = serde_json::from_str(delta).unwrap();
    assert_eq!(args, json!({"city": "Paris \"Île\"", "days": 3}));
    assert_eq!(d[2], Delta::ToolEnd { index: 0 });
}

#[test]
fn xml_call_without_wrapper_or_schema_and_without_parameter_end() {
    let text = "<function=f>\n<parameter=q>\nhello\n<parameter=n>\n{\"k\": [1]}\n</function>";
    let d = every_split(text, &[]);
    let Delta::ToolArgs { delta, .. } = &d[1] else {
        panic!("{d:?}")
    };
    let args: Value = serde_json::from_str(delta).unwrap();
    assert_eq!(args, json!({"q": "hello", "n": {"k": [1]}}));
}

#[test]
fn string_parameter_is_streamed_before_it_ends() {
    let mut p = ToolCallParser::new(&weather_tool());
    let ev = p.push("<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Fra");
    assert!(
        ev.contains(&ToolEvent::Start {
            index: 0,
            name: "get_weather".into()
        }),
        "{ev:?}"
    );
    let args: String = ev
        .iter()
        .filter_map(|e| match e {
            ToolEvent::Args { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(args, "{\"city\": \"San Fra");
}

#[test]
fn hermes_name_is_reported_before_arguments_finish() {
    let mut p = ToolCallParser::new(&[]);
    let ev = p.push("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"lo");
    assert_eq!(
        ev,
        vec![
            ToolEvent::Text(String::new()),
            ToolEvent::Start {
                index: 0,
                name: "f".into()
            },
            ToolEvent::Args {
                index: 0,
                delta: "{\"a\": \"lo".into()
            },
        ]
    );
}

#[test]
fn text_that_only_looks_like_a_call_stays_text() {
    for text in [
        "a <tool_call> is how I call tools",
        "<tool_call>{\"nom\": 1}</tool_call>",
        "x <function=\nnot a call",
        "ends with <tool_ca",
    ] {
        assert_eq!(
            every_split(text, &[]),
            vec![Delta::Content(text.into())],
            "{text:?}"
        );
    }
}

#[test]
fn a_call_cut_off_by_the_token_limit_is_closed() {
    let text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1";
    assert_eq!(
        every_split(text, &[]),
        vec![
            Delta::ToolStart {
                index: 0,
                name: "f".into()
            },
            Delta::ToolArgs {
                index: 0,
                delta: "{\"a\": 1".into()
            },
            Delta::ToolEnd { index: 0 },
        ]
    );
    let text = "<function=f>\n<parameter=q>\nabc";
    let d = every_split(text, &[]);
    assert_eq!(
        d[1],
        Delta::ToolArgs {
            index: 0,
            delta: "{\"q\": \"abc\"}".into()
        }
    );
}
