//! Matching a scenario test's serial output, one line at a time, against its
//! `expect` and `forbid` patterns (Genode's `run_genode_until` and
//! `compare_output_to` in one).
//!
//! - `expect` steps must match in order: each one is searched for after
//!   the end of the previous one's match — later on the same line, or on a
//!   later line. A pattern never spans lines. A step of several patterns
//!   (an any-order group, for output of concurrent threads) is done when
//!   each of its patterns has matched once, in whatever order; on one line
//!   the leftmost match counts first.
//! - A `forbid` pattern matching anywhere fails the test at once; on a line
//!   that matches both, the forbidden match wins.

use crate::testspec::{Pattern, Step};

/// A forbidden pattern that matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forbidden {
    pub pattern: String,
    pub line: String,
}

/// The matching state of one test run.
#[derive(Debug)]
pub struct Matcher<'a> {
    expect: &'a [Step],
    forbid: &'a [Pattern],
    /// Index of the current step.
    next: usize,
    /// Which patterns of the current step have matched.
    matched: Vec<bool>,
}

impl<'a> Matcher<'a> {
    pub fn new(expect: &'a [Step], forbid: &'a [Pattern]) -> Self {
        Matcher {
            expect,
            forbid,
            next: 0,
            matched: vec![false; expect.first().map_or(0, Vec::len)],
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
        while let Some(step) = self.expect.get(self.next) {
            // The leftmost match of a pattern of this step still awaited.
            let hit = step
                .iter()
                .zip(&self.matched)
                .enumerate()
                .filter(|(_, (_, done))| !**done)
                .filter_map(|(i, (p, _))| {
                    p.regex.find_at(line, pos).map(|m| (m.start(), m.end(), i))
                })
                .min();
            let Some((_, end, i)) = hit else { break };
            pos = end;
            if let Some(done) = self.matched.get_mut(i) {
                *done = true;
            }
            if self.matched.iter().all(|&done| done) {
                self.next += 1;
                self.matched = vec![false; self.expect.get(self.next).map_or(0, Vec::len)];
            }
        }
        Ok(())
    }

    /// An expected pattern still awaited (the first one of the current
    /// step not yet matched), if any.
    pub fn awaited(&self) -> Option<&'a Pattern> {
        let step = self.expect.get(self.next)?;
        step.iter()
            .zip(&self.matched)
            .find(|(_, done)| !**done)
            .map(|(p, _)| p)
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
        let steps: Vec<Step> = patterns(expect).into_iter().map(|p| vec![p]).collect();
        run_steps(&steps, forbid)
    }

    fn run_steps(expect: &[Step], forbid: &[&str]) -> (Result<(), Forbidden>, Option<String>) {
        let forbid = patterns(forbid);
        let mut m = Matcher::new(expect, &forbid);
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
    fn any_order_groups() {
        let group = |sources: &[&str]| patterns(sources);
        // "tick 3" before "tick 1" in the group: any order.
        let steps = vec![
            group(&["booting"]),
            group(&["tick 3", "memory", "tick 1"]),
            group(&["all passed"]),
        ];
        assert_eq!(run_steps(&steps, &[]), (Ok(()), None));
        // The group must be complete before the next step counts.
        let steps = vec![group(&["tick 1", "nowhere"]), group(&["all passed"])];
        assert_eq!(run_steps(&steps, &[]).1.as_deref(), Some("nowhere"));
        // Group members never match before the previous step did.
        let steps = vec![group(&["tick 2"]), group(&["booting", "tick 3"])];
        assert_eq!(run_steps(&steps, &[]).1.as_deref(), Some("booting"));
        // Two members on one line, and the next step later on it.
        let steps = vec![group(&["tick 3", "tick 2"]), group(&["tick"])];
        assert_eq!(run_steps(&steps, &[]).1.as_deref(), Some("tick"));
        let steps = vec![group(&[r"tick \d", "tick 2"]), group(&["tick 3"])];
        assert_eq!(run_steps(&steps, &[]).1, None);
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
