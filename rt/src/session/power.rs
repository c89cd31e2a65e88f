//! The Power session: asks init for an orderly power-off of the whole
//! system (docs/architecture.md, "Orderly power-off"). Served by init
//! itself, like `Rom` and `Reconfig`: a component gets it only with a
//! `Power` route to `parent` and `Power` in the scenario's
//! `parent_provides` — the config decides who may switch the system off.
//! The ACPI power-button service (`components/drivers/power`) is its
//! client: QEMU's `system_powerdown`, which `cargo xtask run` sends on
//! Ctrl-C, presses the button.
//!
//! | opcode | label | words | reply |
//! |--------|-------|-------|-------|
//! | [`OFF`] | `OFF` | — | [`OK`]: the power-off has begun (or was under way already) |
//!
//! Init answers first and then stops every component in order: first
//! the ones that provide no session (applications: their sessions are
//! closed at their providers, so a file system syncs its cache), then,
//! round by round, each service whose sessions are all closed, and any
//! left at the end; nothing is restarted. Then the run ends as at a
//! scenario's end, and the machine powers off.

use abi::Error;

use super::{Interface, Session};

/// The Power interface.
pub struct Power;

impl Interface for Power {
    const NAME: &'static str = "Power";
}

/// Powers the system off in order.
pub const OFF: u64 = 1;
/// The reply: the power-off has begun.
pub const OK: u64 = 0;
/// The reply to an unknown opcode.
pub const UNKNOWN: u64 = 0xe0;

impl Session<Power> {
    /// Asks init to power the system off in order; returns once init has
    /// begun (this component is stopped with the others).
    pub fn off(&self) -> Result<(), Error> {
        let (reply, _) = self.call(OFF, [0; 4])?;
        match reply.label() {
            OK => Ok(()),
            _ => Err(Error::InvalidArgument),
        }
    }
}
