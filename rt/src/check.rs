//! Named checks for test components, in the format the scenario tests
//! match:
//!
//! ```text
//! NAME[N]: check <check>: ok
//! NAME[N]: check <check>: FAILED (<detail>)
//! NAME[N]: C checks, F failed
//! ```
//!
//! `NAME` is the component's name ([`crate::component`]), `N` the instance
//! (its start argument), so that two instances of one component can be
//! told apart in one log.

use core::fmt;

use crate::println;

/// A running count of checks.
pub struct Checks {
    instance: u64,
    checks: u32,
    failed: u32,
}

impl Checks {
    /// No checks yet, for instance `instance` of this component.
    pub fn new(instance: u64) -> Checks {
        Checks {
            instance,
            checks: 0,
            failed: 0,
        }
    }

    /// The instance number.
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// Records check `name`: `ok`, or failed with `detail`.
    pub fn expect(&mut self, name: &str, ok: bool, detail: fmt::Arguments) {
        self.checks += 1;
        let who = crate::component().name;
        if ok {
            println!("{who}[{}]: check {name}: ok", self.instance);
        } else {
            self.failed += 1;
            println!("{who}[{}]: check {name}: FAILED ({detail})", self.instance);
        }
    }

    /// Prints the summary line; returns the number of failed checks (the
    /// usual exit code).
    pub fn finish(&self) -> i32 {
        println!(
            "{}[{}]: {} checks, {} failed",
            crate::component().name,
            self.instance,
            self.checks,
            self.failed
        );
        self.failed as i32
    }
}
