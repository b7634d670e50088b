//! The functions and filters Hugging Face adds to a chat template's Jinja environment
//! (`raise_exception`, `strftime_now`, `tojson`), plus Python's `str()` for `{{ x }}` and
//! `x | string`.

use super::pyfmt::{dumps, py_str, JsonStyle};
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind, Output, State};
use std::time::{SystemTime, UNIX_EPOCH};

/// The message of a template's `raise_exception(...)`, carried as an error source so that
/// rendering can tell it apart from engine errors.
#[derive(Debug, Clone)]
pub struct Raised(pub String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// `raise_exception(message)`: aborts rendering with the template's own message.
pub fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message.clone()).with_source(Raised(message)))
}

/// `strftime_now(format)`: the current time (UTC) formatted like Python's `strftime`.
pub fn strftime_now(format: String) -> Result<Value, Error> {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Ok(Value::from(strftime(&format, secs)))
}

/// `tojson(value, indent=None, separators=None, sort_keys=False, ensure_ascii=False)` as
/// `json.dumps` writes it (Hugging Face's override of Jinja2's HTML-safe `tojson`).
pub fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match kwargs.get::<Option<Value>>("indent")?.or(indent) {
        Some(v) if v.is_none() || v.is_undefined() => None,
        Some(v) => Some(usize::try_from(v)?),
        None => None,
    };
    let separators = match kwargs.get::<Option<Vec<String>>>("separators")? {
        Some(s) if s.len() == 2 => Some((s[0].clone(), s[1].clone())),
        Some(_) => return Err(invalid("tojson: separators must be a pair of strings")),
        None => None,
    };
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let style = JsonStyle {
        indent,
        separators,
        sort_keys,
        ensure_ascii,
    };
    Ok(Value::from(dumps(&to_json(value)?, &style)))
}

/// `value | string`: Python's `str(value)`.
pub fn string(value: &Value) -> Result<Value, Error> {
    Ok(Value::from(python_text(value)?))
}

/// `value | trim(chars=None)`: Python's `str(value).strip(chars)` (Jinja2 stringifies first, so a
/// list trims to its `repr`).
pub fn trim(value: &Value, chars: Option<String>) -> Result<Value, Error> {
    let text = python_text(value)?;
    let trimmed = match chars {
        Some(chars) => text.trim_matches(|c| chars.contains(c)),
        None => text.trim(),
    };
    Ok(Value::from(trimmed))
}

/// `value is iterable` as Jinja2 decides it (`iter(value)` succeeds): false for none, booleans
/// and numbers, which minijinja would iterate as empty.
pub fn is_iterable(value: &Value) -> bool {
    match value.kind() {
        ValueKind::None | ValueKind::Bool | ValueKind::Number | ValueKind::Invalid => false,
        ValueKind::Undefined | ValueKind::String | ValueKind::Bytes => true,
        _ => value.try_iter().is_ok(),
    }
}

/// `value is sequence` as Jinja2 decides it (has a length and item access): strings, lists and
/// dicts (and undefined) are sequences.
pub fn is_sequence(value: &Value) -> bool {
    matches!(
        value.kind(),
        ValueKind::Undefined
            | ValueKind::String
            | ValueKind::Bytes
            | ValueKind::Seq
            | ValueKind::Map
    )
}

/// Prints `{{ value }}` as Python's `str(value)` would (undefined prints nothing).
pub fn format_python(out: &mut Output, _state: &State, value: &Value) -> Result<(), Error> {
    let text = python_text(value)?;
    out.write_str(&text)
        .map_err(|e| Error::new(ErrorKind::WriteFailure, e.to_string()))
}

fn python_text(value: &Value) -> Result<String, Error> {
    Ok(match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        ValueKind::None | ValueKind::Bool | ValueKind::Number | ValueKind::Seq | ValueKind::Map => {
            py_str(&to_json(value)?)
        }
        _ => value.to_string(),
    })
}

fn to_json(value: &Value) -> Result<serde_json::Value, Error> {
    if value.is_undefined() {
        return Err(invalid("cannot convert an undefined value to JSON"));
    }
    serde_json::to_value(value).map_err(|e| invalid(&format!("cannot convert to JSON: {e}")))
}

fn invalid(message: &str) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.to_string())
}

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// Formats `unix_secs` (UTC) with the common `strftime` codes: `%Y %y %m %d %e %j %H %I %M %S
/// %p %b %B %a %A %%`; other codes are copied through unchanged.
pub fn strftime(format: &str, unix_secs: i64) -> String {
    let days = unix_secs.div_euclid(86_400);
    let secs = unix_secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let (hour, minute, second) = (secs / 3600, secs / 60 % 60, secs % 60);
    let weekday = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let yday = days - days_from_civil(year, 1, 1) + 1;
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(code) = chars.next() else {
            out.push('%');
            break;
        };
        let text = match code {
            'Y' => year.to_string(),
            'y' => format!("{:02}", year.rem_euclid(100)),
            'm' => format!("{month:02}"),
            'd' => format!("{day:02}"),
            'e' => format!("{day:>2}"),
            'j' => format!("{yday:03}"),
            'H' => format!("{hour:02}"),
            'I' => format!("{:02}", (hour + 11) % 12 + 1),
            'M' => format!("{minute:02}"),
            'S' => format!("{second:02}"),
            'p' => (if hour < 12 { "AM" } else { "PM" }).to_string(),
            'b' => MONTHS[month as usize - 1][..3].to_string(),
            'B' => MONTHS[month as usize - 1].to_string(),
            'a' => DAYS[weekday][..3].to_string(),
            'A' => DAYS[weekday].to_string(),
            '%' => "%".to_string(),
            other => format!("%{other}"),
        };
        out.push_str(&text);
    }
    out
}

/// Days since 1970-01-01 to (year, month 1..=12, day 1..=31), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Rewrites `{% generation %}` / `{% endgeneration %}` (transformers' assistant-mask
/// extension, which minijinja lacks) into `{% if true %}` / `{% endif %}`, keeping any `-`/`+`
/// whitespace control and the line numbers.
pub fn rewrite_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            return out;
        };
        let inner = &tag[2..end];
        let body = inner
            .trim_start_matches(['-', '+'])
            .trim_end_matches(['-', '+'])
            .trim();
        let replacement = match body {
            "generation" => Some("if true"),
            "endgeneration" => Some("endif"),
            _ => None,
        };
        match replacement {
            Some(r) => {
                let lead = &inner[..inner.len() - inner.trim_start_matches(['-', '+']).len()];
                let trail = &inner[inner.trim_end_matches(['-', '+']).len()..];
                out.push_str(&format!("{{%{lead} {r} {trail}%}}"));
            }
            None => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strftime_formats_known_dates() {
        // 2024-07-26 13:05:09 UTC, a Friday.
        let t = 1_722_000_000 - 1_722_000_000 % 86_400 + 13 * 3600 + 5 * 60 + 9;
        assert_eq!(strftime("%d %b %Y", t), "26 Jul 2024");
        assert_eq!(
            strftime("%A %B %e, %H:%M:%S %p %j %y %%", t),
            "Friday July 26, 13:05:09 PM 208 24 %"
        );
        assert_eq!(strftime("%Y-%m-%d %a", 0), "1970-01-01 Thu");
        assert_eq!(strftime("%Y-%m-%d", 951_782_400), "2000-02-29");
    }

    #[test]
    fn generation_tags_become_if_blocks() {
        let src = "a{%- generation -%}b{% endgeneration %}{% if x %}c{% endif %}";
        let want = "a{%- if true -%}b{% endif %}{% if x %}c{% endif %}";
        assert_eq!(rewrite_generation_tags(src), want);
        assert_eq!(
            rewrite_generation_tags("{% unterminated"),
            "{% unterminated"
        );
    }
}
