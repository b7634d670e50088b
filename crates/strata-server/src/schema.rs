//! `response_format`: `json_object` and `json_schema` answers are checked after generation
//! (decoding is not constrained). The validator covers the subset of JSON Schema that OpenAI's
//! structured outputs accept: `type` (one or a list), `properties`, `required`,
//! `additionalProperties`, `items`, `enum`, `const`, `anyOf`/`oneOf`/`allOf`, `$ref` to
//! `#/$defs/…` or `#/definitions/…`, `minimum`/`maximum`, `minLength`/`maxLength`,
//! `minItems`/`maxItems`. Other keywords are ignored.

use serde_json::Value;

use crate::error::ApiError;

/// What the answer must be.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// Any text.
    Text,
    /// A JSON object.
    JsonObject,
    /// JSON valid under this schema.
    JsonSchema(Value),
}

impl ResponseFormat {
    /// Reads a request's `response_format`. Errors: unknown type, missing schema (400).
    pub fn from_request(v: Option<&Value>) -> Result<Self, ApiError> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(ResponseFormat::Text);
        };
        match v.get("type").and_then(Value::as_str) {
            Some("text") => Ok(ResponseFormat::Text),
            Some("json_object") => Ok(ResponseFormat::JsonObject),
            Some("json_schema") => {
                let schema = v.pointer("/json_schema/schema").or_else(|| v.get("schema"));
                match schema {
                    Some(s) if s.is_object() => Ok(ResponseFormat::JsonSchema(s.clone())),
                    _ => Err(ApiError::bad_param(
                        "response_format",
                        "response_format json_schema needs json_schema.schema (an object)",
                    )),
                }
            }
            _ => Err(ApiError::bad_param(
                "response_format",
                "response_format.type must be text, json_object or json_schema",
            )),
        }
    }

    /// Checks `answer`; the error says what is wrong with it (status 422: the request was fine
    /// but the model's output does not satisfy it).
    pub fn check(&self, answer: &str) -> Result<(), ApiError> {
        let fail = |why: String| {
            Err(ApiError::new(
                axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                format!("the model's answer does not satisfy response_format ({why}); constrained decoding is not implemented, so retry or simplify the schema. Answer: {}", excerpt(answer)),
            ))
        };
        if *self == ResponseFormat::Text {
            return Ok(());
        }
        let v: Value = match serde_json::from_str(answer.trim()) {
            Ok(v) => v,
            Err(e) => return fail(format!("not valid JSON: {e}")),
        };
        match self {
            ResponseFormat::JsonObject if !v.is_object() => fail("not a JSON object".into()),
            ResponseFormat::JsonSchema(schema) => match validate(schema, &v, schema, "$") {
                Ok(()) => Ok(()),
                Err(why) => fail(why),
            },
            _ => Ok(()),
        }
    }
}

fn excerpt(s: &str) -> String {
    let mut e: String = s.chars().take(200).collect();
    if e.len() < s.len() {
        e.push('…');
    }
    format!("{e:?}")
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// Validates `v` at `path` against `schema`; `root` resolves `$ref`s.
pub fn validate(schema: &Value, v: &Value, root: &Value, path: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return Ok(());
    };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = r
            .strip_prefix('#')
            .and_then(|p| root.pointer(p))
            .ok_or_else(|| format!("cannot resolve $ref {r}"))?;
        return validate(target, v, root, path);
    }
    match s.get("type") {
        Some(Value::String(t)) if !type_ok(t, v) => {
            return Err(format!("{path} should be of type {t}"))
        }
        Some(Value::Array(ts))
            if ts
                .iter()
                .all(|t| t.as_str().is_some_and(|t| !type_ok(t, v))) =>
        {
            return Err(format!(
                "{path} has none of the types {}",
                Value::Array(ts.clone())
            ))
        }
        _ => {}
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return Err(format!(
                "{path} should be one of {}",
                Value::Array(e.clone())
            ));
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            return Err(format!("{path} should be {c}"));
        }
    }
    for (key, all) in [("allOf", true), ("anyOf", false), ("oneOf", false)] {
        if let Some(subs) = s.get(key).and_then(Value::as_array) {
            let results: Vec<_> = subs
                .iter()
                .map(|sub| validate(sub, v, root, path))
                .collect();
            let ok = results.iter().filter(|r| r.is_ok()).count();
            if (all && ok < subs.len()) || (!all && ok == 0) {
                return Err(results
                    .into_iter()
                    .find_map(Result::err)
                    .unwrap_or_else(|| format!("{path} fails {key}")));
            }
        }
    }
    let num = |k: &str| s.get(k).and_then(Value::as_f64);
    if let Some(x) = v.as_f64() {
        if num("minimum").is_some_and(|m| x < m) || num("maximum").is_some_and(|m| x > m) {
            return Err(format!("{path} = {x} is out of range"));
        }
    }
    if let Some(t) = v.as_str() {
        let n = t.chars().count() as f64;
        if num("minLength").is_some_and(|m| n < m) || num("maxLength").is_some_and(|m| n > m) {
            return Err(format!("{path} has the wrong length ({n} characters)"));
        }
    }
    if let Some(a) = v.as_array() {
        let n = a.len() as f64;
        if num("minItems").is_some_and(|m| n < m) || num("maxItems").is_some_and(|m| n > m) {
            return Err(format!("{path} has the wrong number of items ({n})"));
        }
        if let Some(items) = s.get("items") {
            for (i, x) in a.iter().enumerate() {
                validate(items, x, root, &format!("{path}[{i}]"))?;
            }
        }
    }
    if let Some(o) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        for req in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(k) = req.as_str().filter(|k| !o.contains_key(*k)) {
                return Err(format!("{path} is missing the required property '{k}'"));
            }
        }
        for (k, x) in o {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => validate(sub, x, root, &format!("{path}.{k}"))?,
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        return Err(format!("{path} has the unexpected property '{k}'"))
                    }
                    Some(sub @ Value::Object(_)) => validate(sub, x, root, &format!("{path}.{k}"))?,
                    _ => {}
                },
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schema_subset_accepts_and_rejects_with_a_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1},
                "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}},
                "age": {"type": ["integer", "null"], "minimum": 0}
            },
            "required": ["name"],
            "additionalProperties": false,
            "$defs": {"tag": {"enum": ["a", "b"]}}
        });
        let f = ResponseFormat::JsonSchema(schema);
        assert!(f
            .check(r#"{"name": "x", "tags": ["a"], "age": null}"#)
            .is_ok());
        let e = f.check(r#"{"name": "x", "tags": ["c"]}"#).unwrap_err();
        assert!(e.message.contains("$.tags[0]"), "{}", e.message);
        assert!(f
            .check(r#"{"tags": []}"#)
            .unwrap_err()
            .message
            .contains("'name'"));
        assert!(f.check(r#"{"name": "x", "extra": 1}"#).is_err());
        assert!(f.check(r#"{"name": "x", "age": 1.5}"#).is_err());
        assert!(f
            .check("not json")
            .unwrap_err()
            .message
            .contains("not valid JSON"));
        assert!(ResponseFormat::JsonObject.check("[1]").is_err());
        assert!(ResponseFormat::JsonObject.check(" {\"a\": 1}\n").is_ok());
    }

    #[test]
    fn response_format_is_read_from_the_request() {
        assert_eq!(
            ResponseFormat::from_request(None).unwrap(),
            ResponseFormat::Text
        );
        let v = json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}});
        assert!(matches!(
            ResponseFormat::from_request(Some(&v)).unwrap(),
            ResponseFormat::JsonSchema(_)
        ));
        assert!(ResponseFormat::from_request(Some(&json!({"type": "xml"}))).is_err());
    }
}
