//! Reading the TOML files xtask consumes (scenarios, scenario tests) so that
//! every error names the file and the line: `tests/timer.toml:3:1: unknown
//! field ...`. toml's errors carry a byte span; this module turns spans into
//! line and column numbers.

use std::ops::Range;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use serde::de::DeserializeOwned;

use crate::util::display_path;

/// Reads and deserializes `path`; errors name the file and line.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<(T, String)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", display_path(path)))?;
    let value = parse(path, &text)?;
    Ok((value, text))
}

/// Deserializes `text` (the contents of `path`); errors name the file and
/// line.
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => error_at(path, text, span, e.message()),
        None => anyhow!("{}: {}", display_path(path), e.message()),
    })
}

/// An error about the bytes `span` of `text`, the contents of `path`:
/// `path:line:column: message`.
pub fn error_at(path: &Path, text: &str, span: Range<usize>, message: &str) -> anyhow::Error {
    let (line, column) = line_column(text, span.start);
    anyhow!("{}:{line}:{column}: {message}", display_path(path))
}

/// The dotted key path a toml error is about (`component.restart.max`),
/// if it has one. toml keeps the path private and shows it only when the
/// error is displayed without its input, so that is how it is read here
/// (a test below notices if a toml update changes this).
pub fn key_path(e: &toml::de::Error) -> Option<String> {
    let mut bare = e.clone();
    bare.set_input(None);
    bare.to_string()
        .lines()
        .find_map(|l| l.strip_prefix("in `")?.strip_suffix('`'))
        .map(str::to_string)
}

/// The 1-based line and column of byte `offset` in `text` (one scan of
/// the text: for many offsets of one text, build a [`LineIndex`]).
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    LineIndex::new(text).line_column(offset)
}

/// Where the lines of a text start, for many line/column look-ups in
/// O(log lines) each: reporting all errors of a large file stays linear.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        let newlines = text
            .bytes()
            .enumerate()
            .filter(|&(_, b)| b == b'\n')
            .map(|(i, _)| i + 1);
        LineIndex {
            text,
            starts: std::iter::once(0).chain(newlines).collect(),
        }
    }

    /// The 1-based line and column of byte `offset` (clamped to the text).
    pub fn line_column(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        // The number of line starts at or before `offset`: at least 1.
        let line = self.starts.partition_point(|&start| start <= offset);
        let line_start = self.starts[line - 1];
        let column = String::from_utf8_lossy(&self.text.as_bytes()[line_start..offset])
            .chars()
            .count()
            + 1;
        (line, column)
    }

    /// [`error_at`] with this index.
    pub fn error_at(&self, path: &Path, span: Range<usize>, message: &str) -> anyhow::Error {
        let (line, column) = self.line_column(span.start);
        anyhow!("{}:{line}:{column}: {message}", display_path(path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column() {
        let text = "a = 1\nbb = 2\n";
        assert_eq!(line_column(text, 0), (1, 1));
        assert_eq!(line_column(text, 6), (2, 1));
        assert_eq!(line_column(text, 8), (2, 3));
        assert_eq!(line_column(text, 1000), (3, 1));
        let index = LineIndex::new("é\n\nxyz");
        assert_eq!(index.line_column(0), (1, 1));
        assert_eq!(index.line_column(2), (1, 2));
        assert_eq!(index.line_column(3), (2, 1));
        assert_eq!(index.line_column(4), (3, 1));
        assert_eq!(index.line_column(6), (3, 3));
        assert_eq!(LineIndex::new("").line_column(5), (1, 1));
    }

    #[test]
    fn key_paths() {
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Inner {
            max: u32,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Outer {
            top: Option<u32>,
            inner: Option<Inner>,
        }
        let e = toml::from_str::<Outer>("[inner]\nmax = -1\n").unwrap_err();
        assert_eq!(key_path(&e).as_deref(), Some("inner.max"));
        let e = toml::from_str::<Outer>("top = 'x'\n").unwrap_err();
        assert_eq!(key_path(&e).as_deref(), Some("top"));
        let e = toml::from_str::<Outer>("top = \n").unwrap_err();
        assert_eq!(key_path(&e), None);
    }
}
