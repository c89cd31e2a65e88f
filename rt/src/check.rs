//! Named checks, the one reporter of every component that checks something
//! (test components, root's checks of the kernel), in the one format the
//! scenario tests match:
//!
//! ```text
//! NAME[N]: check <check>: ok
//! NAME[N]: check <check>: FAILED (<detail>)
//! NAME[N]: C checks, F failed
//! ```
//!
//! `NAME` is the component's name ([`crate::component`]), `N` the instance
//! (its start argument), so that two instances of one component can be
//! told apart in one log; a component that runs once may leave the
//! instance out ([`Checks::unnumbered`]: `NAME: check ...`).

use core::fmt;

use crate::println;

/// The failed checks of a component whose lines carry what it found
/// (`test-block`, `test-platform`, `test-nic`): `NAME: <what>` when a
/// check holds, `NAME: FAILED: <what>` when it does not, and at the end
/// `NAME: N checks failed` ([`Findings::finish`]).
#[derive(Default)]
pub struct Findings {
    failed: u32,
}

impl Findings {
    /// No failures yet.
    pub fn new() -> Findings {
        Findings::default()
    }

    /// Reports `what`, found to hold (`ok`) or not.
    pub fn expect(&mut self, ok: bool, what: fmt::Arguments<'_>) {
        let name = crate::component().name;
        if ok {
            println!("{name}: {what}");
        } else {
            println!("{name}: FAILED: {what}");
            self.failed += 1;
        }
    }

    /// Failed checks so far.
    pub fn failed(&self) -> u32 {
        self.failed
    }

    /// Prints `NAME: N checks failed`; the exit code: 0 when none did.
    pub fn finish(&self) -> i32 {
        println!("{}: {} checks failed", crate::component().name, self.failed);
        i32::from(self.failed != 0)
    }
}

/// A running count of checks.
pub struct Checks {
    instance: Option<u64>,
    checks: u32,
    failed: u32,
}

/// `NAME[N]` or `NAME`: who reports.
struct Who(Option<u64>);

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = crate::component().name;
        match self.0 {
            Some(n) => write!(f, "{name}[{n}]"),
            None => write!(f, "{name}"),
        }
    }
}

impl Checks {
    /// No checks yet, for instance `instance` of this component.
    pub fn new(instance: u64) -> Checks {
        Checks {
            instance: Some(instance),
            checks: 0,
            failed: 0,
        }
    }

    /// No checks yet, for a component that runs once (lines say `NAME:`).
    pub fn unnumbered() -> Checks {
        Checks {
            instance: None,
            checks: 0,
            failed: 0,
        }
    }

    /// The instance number (0 when unnumbered).
    pub fn instance(&self) -> u64 {
        self.instance.unwrap_or(0)
    }

    /// Records check `name`: `ok`, or failed with `detail`.
    pub fn expect(&mut self, name: impl fmt::Display, ok: bool, detail: fmt::Arguments) {
        self.checks += 1;
        let who = Who(self.instance);
        if ok {
            println!("{who}: check {name}: ok");
        } else {
            self.failed += 1;
            println!("{who}: check {name}: FAILED ({detail})");
        }
    }

    /// Records check `name`: a result that must be `want` (any `Ok` value
    /// when `want` is `Ok`); the detail says what came instead.
    pub fn result<T: fmt::Debug, E: fmt::Debug + PartialEq>(
        &mut self,
        name: impl fmt::Display,
        got: Result<T, E>,
        want: Result<(), E>,
    ) {
        let ok = match (&got, &want) {
            (Ok(_), Ok(())) => true,
            (Err(g), Err(w)) => g == w,
            _ => false,
        };
        self.expect(name, ok, format_args!("got {got:?}, want {want:?}"));
    }

    /// Checks so far.
    pub fn count(&self) -> u32 {
        self.checks
    }

    /// Failed checks so far.
    pub fn failed(&self) -> u32 {
        self.failed
    }

    /// Prints the summary line; returns the number of failed checks (the
    /// usual exit code).
    pub fn finish(&self) -> i32 {
        println!(
            "{}: {} checks, {} failed",
            Who(self.instance),
            self.checks,
            self.failed
        );
        self.failed as i32
    }
}
