//! Progress bars on stderr (hidden when stderr is not a terminal) and the closing figures.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use streamrag_operators::progress::Progress;

/// An indicatif bar counting rows.
pub struct Bar {
    bar: ProgressBar,
    started: Instant,
    rows: u64,
}

impl Default for Bar {
    fn default() -> Self {
        Self::new()
    }
}

impl Bar {
    pub fn new() -> Self {
        Self::counting("rows")
    }

    /// A bar counting `unit`s.
    pub fn counting(unit: &str) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(&format!("{{msg:>9}} [{{bar:40}}] {{human_pos}}/{{human_len}} {unit} {{per_sec}} eta {{eta}}"))
                .expect("valid template")
                .progress_chars("=> "),
        );
        Bar { bar, started: Instant::now(), rows: 0 }
    }

    /// Replaces the text left of the bar (e.g. the running loss).
    pub fn say(&self, msg: String) {
        self.bar.set_message(msg);
    }

    /// Rows counted so far and rows per second since the start.
    pub fn finish(&self) -> (u64, f64) {
        self.bar.finish_and_clear();
        let s = self.started.elapsed().as_secs_f64();
        (self.rows, self.rows as f64 / s.max(1e-9))
    }
}

impl Progress for Bar {
    fn start(&mut self, what: &str, total_rows: u64) {
        self.bar.set_message(what.to_string());
        self.bar.set_length(total_rows);
        self.bar.set_position(0);
        self.started = Instant::now();
        self.rows = 0;
    }
    fn inc(&mut self, rows: u64) {
        self.rows += rows;
        self.bar.inc(rows);
    }
    fn say(&mut self, status: String) {
        Bar::say(self, status);
    }
    fn finish(&mut self) {
        Bar::finish(self);
    }
    fn note(&mut self, line: String) {
        self.bar.suspend(|| eprintln!("{line}"));
    }
}
