//! Python's `json.dumps` and `str()`/`repr()` text for template values.
//!
//! Hugging Face's templates run under Python Jinja2, where `tojson` is
//! `json.dumps(x, ensure_ascii=False, ...)` and `{{ x }}` / `x | string` print `str(x)`
//! (`None`, `True`, `{'a': 1}`). minijinja's own spellings differ (`none`, `true`, compact JSON),
//! so these functions reproduce Python's byte for byte.

use serde_json::Value as Json;
use std::fmt::Write;

/// Options of `json.dumps` that templates pass to `tojson`.
#[derive(Debug, Clone, Default)]
pub struct JsonStyle {
    /// `indent=N`: newline plus N spaces per level; `None` keeps everything on one line.
    pub indent: Option<usize>,
    /// `separators=(item, key)`; default `(", ", ": ")`, or `(",", ": ")` with an indent.
    pub separators: Option<(String, String)>,
    /// `sort_keys=True`.
    pub sort_keys: bool,
    /// `ensure_ascii=True`: non-ASCII characters written as `\u` plus four hex digits (UTF-16 surrogate pairs
    /// above U+FFFF); Hugging Face's default is `False`.
    pub ensure_ascii: bool,
}

/// `json.dumps(value, ...)` with `style`.
pub fn dumps(value: &Json, style: &JsonStyle) -> String {
    let (item, key) = match &style.separators {
        Some((i, k)) => (i.as_str(), k.as_str()),
        None if style.indent.is_some() => (",", ": "),
        None => (", ", ": "),
    };
    let mut out = String::new();
    write_json(&mut out, value, style, item, key, 0);
    out
}

fn write_json(out: &mut String, v: &Json, style: &JsonStyle, item: &str, key: &str, depth: usize) {
    let newline = |out: &mut String, depth: usize| {
        if let Some(n) = style.indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * depth));
        }
    };
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => write_number(out, n, true),
        Json::String(s) => write_json_str(out, s, style.ensure_ascii),
        Json::Array(items) if items.is_empty() => out.push_str("[]"),
        Json::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                }
                newline(out, depth + 1);
                write_json(out, x, style, item, key, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        Json::Object(map) if map.is_empty() => out.push_str("{}"),
        Json::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            if style.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item);
                }
                newline(out, depth + 1);
                write_json_str(out, k, style.ensure_ascii);
                out.push_str(key);
                write_json(out, x, style, item, key, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
    }
}

/// A JSON string as Python writes it: `"`, `\` and control characters below U+0020 escaped,
/// and with `ascii` everything above U+007F too.
fn write_json_str(out: &mut String, s: &str, ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ascii && !c.is_ascii() => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Integers as digits; floats as Python's `repr(float)` (`1.0`, `1e-05`, `1e+16`); `json`
/// selects the JSON spelling of non-finite values (`NaN`, `Infinity`) over Python's (`nan`, `inf`).
fn write_number(out: &mut String, n: &serde_json::Number, json: bool) {
    if n.is_f64() {
        out.push_str(&py_float(n.as_f64().unwrap_or(f64::NAN), json));
    } else {
        let _ = write!(out, "{n}");
    }
}

fn py_float(f: f64, json: bool) -> String {
    if f.is_nan() {
        return if json { "NaN" } else { "nan" }.into();
    }
    if f.is_infinite() {
        let s = if json { "Infinity" } else { "inf" };
        return if f < 0.0 { format!("-{s}") } else { s.into() };
    }
    let sci = format!("{f:e}"); // shortest round-trip digits, e.g. "1.5e-7"
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if f != 0.0 && !(-4..16).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.abs());
    }
    let plain = format!("{f}");
    if plain.contains('.') {
        plain
    } else {
        format!("{plain}.0")
    }
}

/// Python's `str(value)`: strings as they are, everything else as `repr`.
pub fn py_str(value: &Json) -> String {
    match value {
        Json::String(s) => s.clone(),
        other => {
            let mut out = String::new();
            write_repr(&mut out, other);
            out
        }
    }
}

fn write_repr(out: &mut String, v: &Json) {
    match v {
        Json::Null => out.push_str("None"),
        Json::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Json::Number(n) => write_number(out, n, false),
        Json::String(s) => write_repr_str(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, x);
            }
            out.push(']');
        }
        Json::Object(map) => {
            out.push('{');
            for (i, (k, x)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr_str(out, k);
                out.push_str(": ");
                write_repr(out, x);
            }
            out.push('}');
        }
    }
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`.
fn write_repr_str(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dumps_matches_python_defaults() {
        let v = json!({"b": [1, 2.5, null, true], "a": "Zürich \"q\"\n<&>"});
        let s = dumps(&v, &JsonStyle::default());
        assert_eq!(
            s,
            r#"{"b": [1, 2.5, null, true], "a": "Zürich \"q\"\n<&>"}"#
        );
    }

    #[test]
    fn dumps_with_indent_uses_comma_without_space() {
        let v = json!({"a": [1, {}], "b": []});
        let style = JsonStyle {
            indent: Some(2),
            ..Default::default()
        };
        assert_eq!(
            dumps(&v, &style),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}"
        );
    }

    #[test]
    fn dumps_ensure_ascii_escapes_as_utf16() {
        let style = JsonStyle {
            ensure_ascii: true,
            ..Default::default()
        };
        assert_eq!(dumps(&json!("Zü😀"), &style), r#""Z\u00fc\ud83d\ude00""#);
    }

    #[test]
    fn floats_follow_python_repr() {
        for (f, want) in [(1.0, "1.0"), (0.1, "0.1"), (1e-5, "1e-05"), (1e16, "1e+16")] {
            assert_eq!(py_float(f, false), want);
        }
        assert_eq!(py_float(1e15, false), "1000000000000000.0");
        assert_eq!(py_float(-0.0001, false), "-0.0001");
    }

    #[test]
    fn str_of_values_matches_python() {
        assert_eq!(py_str(&json!(null)), "None");
        assert_eq!(py_str(&json!(true)), "True");
        assert_eq!(py_str(&json!("it's")), "it's");
        assert_eq!(
            py_str(&json!({"k": ["it's", 1.0]})),
            r#"{'k': ["it's", 1.0]}"#
        );
    }
}
