//! A progress bar for long measurements (`needle`, `bench`): how many cases are done, how
//! long it has run, and what runs now. On a terminal only (indicatif hides it otherwise);
//! result lines go through [`Progress::line`] so they print above the bar.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// Cases done out of a known total, with the running one's name.
pub struct Progress(ProgressBar);

impl Progress {
    /// A bar of `total` cases titled `what`, ticking while a case runs.
    pub fn new(total: usize, what: &str) -> Progress {
        let bar = ProgressBar::new(total as u64);
        let style = ProgressStyle::with_template(
            "{spinner} {prefix} [{bar:24}] {pos}/{len} cases, {elapsed} {wide_msg}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(what.to_string());
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress(bar)
    }

    /// Names the case that starts now.
    pub fn start(&self, case: impl Into<String>) {
        self.0.set_message(case.into());
    }

    /// Prints a result line above the bar and counts one case done.
    pub fn line(&self, text: &str) {
        self.0.suspend(|| eprintln!("{text}"));
        self.0.inc(1);
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
