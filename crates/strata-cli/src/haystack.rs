//! The haystack: original English prose shipped with the tool (essays written for Strata and
//! licensed with it: eleven essays, about 107 KB), the filler of `strata bench` prompts and of
//! `strata needle` documents, and a default text for `strata quality`.

/// The whole text: paragraphs separated by blank lines.
pub const TEXT: &str = include_str!("../data/haystack.txt");

/// The paragraphs of [`TEXT`], trimmed, in order.
pub fn paragraphs() -> Vec<&'static str> {
    TEXT.split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// At least `chars` characters of prose, paragraphs joined by blank lines. When the text runs
/// out it starts over, each pass beginning a few paragraphs later so that no long stretch
/// repeats verbatim at the same offset.
pub fn prose(chars: usize) -> String {
    let paras = paragraphs();
    let mut out = String::with_capacity(chars + 2048);
    let mut pass = 0;
    while out.len() < chars {
        let start = (pass * 7) % paras.len();
        for p in paras[start..].iter().chain(&paras[..start]) {
            if out.len() >= chars {
                break;
            }
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(p);
        }
        pass += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_long_prose_and_prose_grows_past_it() {
        assert!(
            TEXT.len() > 100_000 && TEXT.len() < 300_000,
            "{}",
            TEXT.len()
        );
        assert!(paragraphs().len() > 50);
        let p = prose(TEXT.len() * 2);
        assert!(p.len() >= TEXT.len() * 2);
        assert!(prose(10).len() >= 10);
    }
}
