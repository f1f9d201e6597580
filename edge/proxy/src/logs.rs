//! Envoy's log lines: passed through to the supervisor's stderr as they come (so a container's
//! log holds them), the last [`KEPT`] kept for the error when Envoy dies.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt as _, AsyncRead, BufReader};

/// How many of Envoy's last lines are kept.
pub const KEPT: usize = 30;

/// The last lines of a stream, shared.
#[derive(Clone, Debug)]
pub struct LastLines {
    lines: Arc<Mutex<VecDeque<String>>>,
    keep: usize,
}

impl LastLines {
    /// Keeps the last `keep` lines.
    pub fn new(keep: usize) -> Self {
        Self {
            lines: Arc::new(Mutex::new(VecDeque::with_capacity(keep))),
            keep,
        }
    }

    /// Remembers a line, forgetting the oldest beyond the limit.
    pub fn push(&self, line: String) {
        let mut lines = self.lines.lock().expect("the lines lock");
        if lines.len() == self.keep {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines, oldest first.
    pub fn text(&self) -> String {
        let lines = self.lines.lock().expect("the lines lock");
        lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Reads `stream` line by line to its end, writing each to stderr and keeping it.
    pub async fn forward(self, stream: impl AsyncRead + Unpin) {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("{line}");
            self.push(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_last_lines() {
        let last = LastLines::new(2);
        last.clone().forward(&b"one\ntwo\nthree\n"[..]).await;
        assert_eq!(last.text(), "two\nthree");
    }
}
