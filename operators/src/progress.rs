//! Progress of long work (snapshots, replays, training), reported to whoever runs it: the
//! binary draws bars on a terminal; tests and servers pass [`NoProgress`].

/// Receives progress in items (rows, questions, examples).
pub trait Progress {
    /// A new phase of `total` items begins.
    fn start(&mut self, _what: &str, _total: u64) {}
    fn inc(&mut self, _items: u64) {}
    /// A short running status (the loss so far).
    fn say(&mut self, _status: String) {}
    /// The phase is over.
    fn finish(&mut self) {}
    /// A line for the person watching (what was found, what happens next).
    fn note(&mut self, _line: String) {}
}

/// Progress that goes nowhere.
pub struct NoProgress;
impl Progress for NoProgress {}
