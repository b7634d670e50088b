//! Stop strings: generated text passes through, except that text which could be the start of a
//! stop string is held back until it is known not to be one; a match ends the answer there
//! (the stop string itself is not part of the answer, as in the OpenAI API).

use crate::output::partial_suffix;

/// Holds back possible stop-string prefixes and reports the first match.
#[derive(Debug)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
}

/// What [`StopMatcher::push`] decided.
#[derive(Debug, PartialEq, Eq)]
pub enum StopCheck {
    /// Text that is certainly part of the answer (may be empty).
    Emit(String),
    /// A stop string matched: the answer's last text before it, and which stop string.
    Stopped(String, String),
}

impl StopMatcher {
    /// A matcher for `stops` (empty strings are ignored).
    pub fn new(stops: &[String]) -> Self {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
        }
    }

    /// Feeds the next piece of text.
    pub fn push(&mut self, text: &str) -> StopCheck {
        self.held.push_str(text);
        let first = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()).map(|p| (p, s)))
            .min();
        if let Some((pos, stop)) = first {
            let stop = stop.clone();
            let before = self.held[..pos].to_string();
            self.held.clear();
            return StopCheck::Stopped(before, stop);
        }
        let hold = self
            .stops
            .iter()
            .map(|s| partial_suffix(&self.held, s))
            .max()
            .unwrap_or(0);
        StopCheck::Emit(self.held.drain(..self.held.len() - hold).collect())
    }

    /// The text still held back when generation ends for another reason.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_string_split_across_pieces_is_found_and_cut() {
        let mut m = StopMatcher::new(&["\n\nUser:".to_string(), "END".to_string()]);
        assert_eq!(m.push("Hello"), StopCheck::Emit("Hello".into()));
        assert_eq!(m.push(" world\n"), StopCheck::Emit(" world".into()));
        assert_eq!(m.push("\nUs"), StopCheck::Emit(String::new()));
        assert_eq!(
            m.push("er: hi"),
            StopCheck::Stopped(String::new(), "\n\nUser:".into())
        );
        let mut m = StopMatcher::new(&["END".to_string()]);
        assert_eq!(m.push("aE"), StopCheck::Emit("a".into()));
        assert_eq!(m.push("x"), StopCheck::Emit("Ex".into()));
        assert_eq!(m.push("EN"), StopCheck::Emit(String::new()));
        assert_eq!(m.finish(), "EN");
    }
}
