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
    check_nesting(path, text)?;
    toml::from_str(text).map_err(|e| match e.span() {
        Some(span) => error_at(path, text, span, e.message()),
        None => anyhow!("{}: {}", display_path(path), e.message()),
    })
}

/// The deepest nesting a file may have: keys of more parts (`a.b.c`, in a
/// table header or before `=`) or values nested deeper (arrays, inline
/// tables). toml refuses deep nesting too, but with `recursion limit` and
/// no place; this check comes first and names the line.
pub const MAX_NESTING: usize = 64;

/// Refuses `text` (the contents of `path`) when a key has more than
/// [`MAX_NESTING`] parts or values nest deeper: `path:line:col: ...`.
pub fn check_nesting(path: &Path, text: &str) -> Result<()> {
    match nesting_error(text) {
        Some((offset, message)) => Err(error_at(path, text, offset..offset, &message)),
        None => Ok(()),
    }
}

/// The first place where `text` nests deeper than [`MAX_NESTING`], and
/// what is too deep. A small scanner of TOML's lexical structure: strings
/// (basic, literal, multi-line) and comments are skipped; dots are counted
/// in keys (table headers and before `=`, also inside inline tables),
/// brackets and braces in values.
fn nesting_error(text: &str) -> Option<(usize, String)> {
    #[derive(PartialEq)]
    enum Place {
        Key,
        Header,
        Value,
    }
    let bytes = text.as_bytes();
    let mut place = Place::Key;
    let mut key_parts = 1;
    // The value nesting: one entry per open '[' or '{' ('{' opens keys).
    let mut open: Vec<u8> = Vec::new();
    let mut line_start = true;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let rest = &bytes[i..];
        // Strings and comments: skipped whole.
        if rest.starts_with(b"\"\"\"") || rest.starts_with(b"'''") {
            let quote = &rest[..3];
            let end = find_closing(&bytes[i + 3..], quote, quote[0] == b'"');
            i += 3 + end.map_or(bytes.len(), |e| e + 3);
            line_start = false;
            continue;
        }
        if b == b'"' || b == b'\'' {
            let end = find_closing(&bytes[i + 1..], &[b], b == b'"');
            i += 1 + end.map_or(bytes.len(), |e| e + 1);
            line_start = false;
            continue;
        }
        if b == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        match b {
            b'\n' => {
                line_start = true;
                if open.is_empty() {
                    place = Place::Key;
                    key_parts = 1;
                }
            }
            b' ' | b'\t' | b'\r' => {}
            b'[' if line_start && open.is_empty() => {
                place = Place::Header;
                key_parts = 1;
                line_start = false;
            }
            b'.' if place != Place::Value => {
                key_parts += 1;
                if key_parts > MAX_NESTING {
                    return Some((
                        i,
                        format!("a key of more than {MAX_NESTING} parts (a.b.c...)"),
                    ));
                }
            }
            b'=' if place == Place::Key => place = Place::Value,
            b'[' | b'{' if place == Place::Value => {
                open.push(b);
                if open.len() > MAX_NESTING {
                    return Some((i, format!("values nested more than {MAX_NESTING} deep")));
                }
                if b == b'{' {
                    place = Place::Key;
                    key_parts = 1;
                }
            }
            b']' | b'}' if !open.is_empty() => {
                open.pop();
                place = Place::Value;
            }
            b',' if open.last() == Some(&b'{') => {
                place = Place::Key;
                key_parts = 1;
            }
            _ => line_start = false,
        }
        i += 1;
    }
    None
}

/// Where `quote` closes in `bytes` (a basic string: backslash escapes).
fn find_closing(bytes: &[u8], quote: &[u8], escapes: bool) -> Option<usize> {
    let mut i = 0;
    while i + quote.len() <= bytes.len() {
        if escapes && bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i..].starts_with(quote) {
            return Some(i);
        }
        if quote.len() == 1 && bytes[i] == b'\n' {
            return Some(i); // an unclosed one-line string ends at the line
        }
        i += 1;
    }
    None
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
    fn nesting() {
        let deep_key = format!("x = 1\n{} = 1\n", vec!["a"; 65].join("."));
        let (at, why) = nesting_error(&deep_key).unwrap();
        assert_eq!(line_column(&deep_key, at).0, 2);
        assert!(why.contains("more than 64 parts"), "{why}");
        assert_eq!(
            nesting_error(&format!("{} = 1\n", vec!["a"; 64].join("."))),
            None
        );
        let header = format!("[{}]\n", vec!["b"; 70].join("."));
        assert!(nesting_error(&header).is_some());
        let arrays = format!("v = {}1{}\n", "[".repeat(65), "]".repeat(65));
        assert!(nesting_error(&arrays)
            .unwrap()
            .1
            .contains("nested more than 64"));
        let tables = format!("v = {}{}\n", "{ a = ".repeat(65), "}".repeat(65));
        assert!(nesting_error(&tables).is_some());
        // Dots in values, strings and comments are no keys.
        let fine =
            "a.b = 1.5\ns = \"x.y.z\" # c.d.e\nt = '''\n[a.b]\n''' \nu = [1.0, 2.0]\n[[c.d]]\n";
        assert_eq!(nesting_error(fine), None);
        let many_dots_in_a_string = format!("s = \"{}\"\n", ".".repeat(500));
        assert_eq!(nesting_error(&many_dots_in_a_string), None);
        // Inline tables open keys again.
        assert!(nesting_error(&format!("t = {{ {} = 1 }}\n", vec!["k"; 65].join("."))).is_some());
    }

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
