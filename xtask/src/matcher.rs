//! Matching a scenario test's serial output, one line at a time, against its
//! `expect` and `forbid` patterns (Genode's `run_genode_until` and
//! `compare_output_to` in one).
//!
//! - `expect` patterns must match in order: each one is searched for after
//!   the end of the previous one's match — later on the same line, or on a
//!   later line. A pattern never spans lines.
//! - A `forbid` pattern matching anywhere fails the test at once; on a line
//!   that matches both, the forbidden match wins.

use crate::testspec::Pattern;

/// A forbidden pattern that matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    pub pattern: String,
    pub line: String,
}

/// The matching state of one test run.
#[derive(Debug)]
pub struct Matcher<'a> {
    expect: &'a [Pattern],
    forbid: &'a [Pattern],
    /// Index of the next expected pattern.
    next: usize,
}

impl<'a> Matcher<'a> {
    pub fn new(expect: &'a [Pattern], forbid: &'a [Pattern]) -> Self {
        Matcher {
            expect,
            forbid,
            next: 0,
        }
    }

    /// Feeds one line of output (without its line ending).
    pub fn feed(&mut self, line: &str) -> Result<(), Forbidden> {
        if let Some(p) = self.forbid.iter().find(|p| p.regex.is_match(line)) {
            return Err(Forbidden {
                pattern: p.source.clone(),
                line: line.to_string(),
            });
        }
        let mut pos = 0;
        while let Some(p) = self.expect.get(self.next) {
            match p.regex.find_at(line, pos) {
                Some(m) => {
                    self.next += 1;
                    pos = m.end();
                }
                None => break,
            }
        }
        Ok(())
    }

    /// The expected pattern still awaited, if any.
    pub fn awaited(&self) -> Option<&'a Pattern> {
        self.expect.get(self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    fn patterns(sources: &[&str]) -> Vec<Pattern> {
        sources
            .iter()
            .map(|s| Pattern {
                source: s.to_string(),
                regex: Regex::new(s).unwrap(),
            })
            .collect()
    }

    const LOG: &str = "\
Pecan 0.1.0 booting
memory: 255 MiB free
timer: tick 1
timer: tick 2 tick 3
selftest: all passed
";

    fn run(expect: &[&str], forbid: &[&str]) -> (Result<(), Forbidden>, Option<String>) {
        let (expect, forbid) = (patterns(expect), patterns(forbid));
        let mut m = Matcher::new(&expect, &forbid);
        for line in LOG.lines() {
            if let Err(f) = m.feed(line) {
                return (Err(f), m.awaited().map(|p| p.source.clone()));
            }
        }
        (Ok(()), m.awaited().map(|p| p.source.clone()))
    }

    #[test]
    fn ordered_matching() {
        let (r, awaited) = run(
            &["booting", r"tick \d", "tick 2", "tick 3", "all passed"],
            &[],
        );
        assert_eq!(r, Ok(()));
        assert_eq!(awaited, None);
        // Two patterns on one line, in order.
        let (_, awaited) = run(&["tick 2", "tick 3"], &[]);
        assert_eq!(awaited, None);
        // The same text cannot satisfy two patterns.
        let (_, awaited) = run(&["tick 3", "tick 3"], &[]);
        assert_eq!(awaited.as_deref(), Some("tick 3"));
    }

    #[test]
    fn out_of_order_fails() {
        let (r, awaited) = run(&["all passed", "booting"], &[]);
        assert_eq!(r, Ok(()));
        assert_eq!(awaited.as_deref(), Some("booting"));
        // On one line too: "tick 3" comes after "tick 2".
        let (_, awaited) = run(&["tick 3", "tick 2"], &[]);
        assert_eq!(awaited.as_deref(), Some("tick 2"));
    }

    #[test]
    fn forbidden_match() {
        let (r, awaited) = run(&["booting", "all passed"], &["(?i)TIMER: TICK 2"]);
        assert_eq!(
            r,
            Err(Forbidden {
                pattern: "(?i)TIMER: TICK 2".into(),
                line: "timer: tick 2 tick 3".into()
            })
        );
        assert_eq!(awaited.as_deref(), Some("all passed"));
        let (r, _) = run(&["booting"], &["(?i)panic"]);
        assert_eq!(r, Ok(()));
    }

    #[test]
    fn empty_expect_is_done() {
        let m = Matcher::new(&[], &[]);
        assert!(m.awaited().is_none());
    }
}
