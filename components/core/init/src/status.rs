//! Init's Status service (`rt::session::status`; docs/architecture.md,
//! "Status"): what init knows about each component — its name, state and
//! restarts, its quotas, the kernel's sampled CPU time of its main
//! thread summed over its runs ([`crate::Kid::cpu_ms_past`] holds the
//! runs before the current one), and what it uses of its quotas (the
//! kernel's `Usage` of its untyped memory and capability table) —
//! answered at once.

use alloc::vec::Vec;

use rt::abi::caddr::{in_table, own};
use rt::interfaces::session;
use rt::interfaces::{child, init};
use rt::session::status::{self, ComponentStatus, State};
use rt::syscall;

use crate::sessions::reply;
use crate::{Init, Kid};

impl<'a> Init<'a> {
    /// Answers request `label`, `words` on a Status session.
    pub fn on_status(&mut self, label: u64, words: &[u64; 4]) {
        let mut kids: Vec<&Kid<'a>> = self.kids.iter().collect();
        kids.sort_by_key(|k| k.id);
        let kid = usize::try_from(words[0]).ok().and_then(|i| kids.get(i));
        match (label, kid) {
            (status::COUNT, _) => reply(status::OK, [kids.len() as u64, 0, 0, 0], None),
            (status::NAME, Some(kid)) => reply(status::OK, session::pack(kid.component.name), None),
            (status::COMPONENT, Some(kid)) => {
                let figures = self.status_of(kid);
                reply(status::OK, status::component_words(&figures), None)
            }
            (status::USE, Some(kid)) => {
                let figures = self.status_of(kid);
                reply(status::OK, status::use_words(&figures), None)
            }
            (status::INIT, _) => {
                let (used, size) = pool_usage();
                reply(status::OK, [used, size, 0, 0], None)
            }
            (status::NAME | status::COMPONENT | status::USE, None) => {
                reply(status::NOT_FOUND, [0; 4], None)
            }
            _ => reply(status::UNKNOWN, [label, 0, 0, 0], None),
        }
    }

    /// What init reports about `kid` (its name is left empty: `NAME`
    /// carries it).
    fn status_of(&self, kid: &Kid<'a>) -> ComponentStatus {
        let state = if self.running(kid.id) {
            State::Running
        } else if self.backoff.is_waiting(kid.id) {
            State::Restarting
        } else {
            State::Stopped
        };
        // Its capabilities exist only while it runs.
        let caps = kid.caps.filter(|_| state == State::Running);
        ComponentStatus {
            ram_used: caps
                .and_then(|c| syscall::usage(in_table(c.cspace, child::UNTYPED)).ok())
                .map(|u| u.used),
            caps_used: caps
                .and_then(|c| syscall::usage(own(c.cspace)).ok())
                .map(|u| u.used),
            name: alloc::string::String::new(),
            state,
            restarts: kid.restarts,
            ram_quota: u64::from(kid.component.ram_mib) << 20,
            caps_quota: u64::from(kid.component.caps),
            cpu_ms: kid.cpu_ms_past + current_cpu_ms(kid),
        }
    }
}

/// Init's pool (`interfaces::init`: the first piece at `child::UNTYPED`,
/// the others from `init::POOL_FIRST`): bytes in use and in all, by the
/// kernel's `Usage` of each piece (empty slots past the last piece count
/// nothing).
fn pool_usage() -> (u64, u64) {
    let pieces = core::iter::once(child::UNTYPED)
        .chain(init::POOL_FIRST..init::POOL_FIRST + init::POOL_SLOTS);
    pieces
        .filter_map(|slot| syscall::usage(own(slot)).ok())
        .fold((0, 0), |(used, size), u| (used + u.used, size + u.size))
}

/// The sampled CPU time of `kid`'s current run (its main thread), ms; 0
/// when it has no thread.
pub fn current_cpu_ms(kid: &Kid<'_>) -> u64 {
    kid.caps
        .and_then(|caps| syscall::thread_cpu_time(own(caps.thread)).ok())
        .map_or(0, |t| t.millis())
}
