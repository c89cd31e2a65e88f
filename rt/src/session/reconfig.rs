//! The Reconfig session: tells init to apply a config update at run time
//! (docs/architecture.md, "Dynamic reconfiguration"). Served by init
//! itself, like `Rom`: a component gets it only with a `Reconfig` route to
//! `parent` and `Reconfig` in the scenario's `parent_provides` — the config
//! decides who may reconfigure the system.
//!
//! | opcode | label | words | reply |
//! |--------|-------|-------|-------|
//! | [`APPLY`] | `APPLY` | the boot module holding the update (`interfaces::session::pack`; xtask packs a scenario's `update` as `interfaces::init::UPDATE_ENTRY`) | [`OK`], words 0..3: children started, stopped, kept; or [`NOT_FOUND`], [`MALFORMED`] (nothing changed) |
//! | [`KILL`] | `KILL` | a component's name (`pack`, at most 32 bytes) | [`OK`]: killed; or [`NOT_FOUND`] (no such component), [`NOT_KILLABLE`] (its entry lacks `killable = true`), [`NOT_RUNNING`] (it has finished or waits for its restart) |
//!
//! Init checks the module exactly as it checks its first config ROM
//! (`ucore::config::Rom::parse`) and applies the difference by component
//! name: a component only in the update is started, one only in the
//! running config is stopped (its sessions closed, its memory returned),
//! one in both with the same record keeps running untouched, sessions and
//! all; one whose record changed is stopped and started with the new one.
//!
//! `KILL` is for tests of what happens when a component dies under load:
//! init kills the component exactly as if it had faulted — its sessions
//! are closed, the ones it provides die with its endpoint, its memory is
//! returned and its restart policy applies — and logs `init: killed NAME
//! (asked by CLIENT)`. Only a component whose scenario entry says
//! `killable = true` can be killed (xtask refuses the key when no
//! component has a Reconfig session); any other request is refused,
//! logged (`init: kill NAME from CLIENT refused: ...`) and answered with an
//! error.

use abi::Error;
use interfaces::session::pack;

use super::{Interface, Session};

/// The Reconfig interface.
pub struct Reconfig;

impl Interface for Reconfig {
    const NAME: &'static str = "Reconfig";
}

/// Applies the update in the named boot module.
pub const APPLY: u64 = 1;
/// The reply: applied.
pub const OK: u64 = 0;
/// The reply: no boot module of that name.
pub const NOT_FOUND: u64 = 0xe1;
/// The reply: the module is not a valid config ROM; nothing changed.
pub const MALFORMED: u64 = 0xe2;
/// The reply to an unknown opcode.
pub const UNKNOWN: u64 = 0xe0;
/// Kills the named component as if it had faulted (see the module doc).
pub const KILL: u64 = 2;
/// The reply: the component's entry does not allow it to be killed.
pub const NOT_KILLABLE: u64 = 0xe3;
/// The reply: the component is not running (finished, or waiting for its
/// restart).
pub const NOT_RUNNING: u64 = 0xe4;

/// What an applied update did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applied {
    /// Children started (new or changed).
    pub started: u64,
    /// Children stopped (removed or changed).
    pub stopped: u64,
    /// Children kept running.
    pub kept: u64,
}

/// Why an update was not applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconfigError {
    /// No boot module of that name.
    NotFound,
    /// Not a valid config ROM (init logs why); nothing changed.
    Malformed,
    /// `kill`: no component of that name (or a name longer than the 32
    /// bytes a request carries).
    NoSuchComponent,
    /// `kill`: its scenario entry lacks `killable = true`.
    NotKillable,
    /// `kill`: it has finished or waits for its restart.
    NotRunning,
    /// Init answered with this label.
    Refused(u64),
    /// The call failed.
    Ipc(Error),
}

impl core::fmt::Display for ReconfigError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ReconfigError::NotFound => f.write_str("refused: no such boot module"),
            ReconfigError::Malformed => {
                f.write_str("refused: not a valid config ROM (nothing changed)")
            }
            ReconfigError::NoSuchComponent => f.write_str("refused: no such component"),
            ReconfigError::NotKillable => {
                f.write_str("refused: not killable (its entry lacks killable = true)")
            }
            ReconfigError::NotRunning => f.write_str("refused: not running"),
            ReconfigError::Refused(label) => write!(f, "refused (label {label:#x})"),
            ReconfigError::Ipc(e) => write!(f, "the call failed: {e}"),
        }
    }
}

impl Session<Reconfig> {
    /// Tells init to apply the config update in boot module `module`.
    pub fn apply(&self, module: &str) -> Result<Applied, ReconfigError> {
        let (reply, words) = self.call(APPLY, pack(module)).map_err(ReconfigError::Ipc)?;
        match reply.label() {
            OK => Ok(Applied {
                started: words[0],
                stopped: words[1],
                kept: words[2],
            }),
            NOT_FOUND => Err(ReconfigError::NotFound),
            MALFORMED => Err(ReconfigError::Malformed),
            other => Err(ReconfigError::Refused(other)),
        }
    }

    /// Tells init to kill component `name` as if it had faulted (its
    /// restart policy applies); refused unless its entry is `killable`.
    pub fn kill(&self, name: &str) -> Result<(), ReconfigError> {
        if name.len() > interfaces::session::NAME_BYTES {
            return Err(ReconfigError::NoSuchComponent);
        }
        let (reply, _) = self.call(KILL, pack(name)).map_err(ReconfigError::Ipc)?;
        match reply.label() {
            OK => Ok(()),
            NOT_FOUND => Err(ReconfigError::NoSuchComponent),
            NOT_KILLABLE => Err(ReconfigError::NotKillable),
            NOT_RUNNING => Err(ReconfigError::NotRunning),
            other => Err(ReconfigError::Refused(other)),
        }
    }
}
