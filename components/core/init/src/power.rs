//! Stopping the system in order (docs/architecture.md, "Orderly
//! power-off"; the client side is `rt::session::power`): on a `Power`
//! session's `OFF`, and at a scenario's end (no application left), init
//! stops every component so that each service sees its clients' sessions
//! closed before it stops itself — a file system syncs its cache when a
//! session closes, so nothing written is left in a cache when the machine
//! powers off.
//!
//! 1. `OFF` stops the applications (children that provide no session) as
//!    a kill does — thread suspended, sessions closed at their providers
//!    — in reverse start order, without restarts (`init: stopping NAME`).
//! 2. Then, each time no close is outstanding ([`Init::stop_step`]):
//!    every running service none of whose sessions is open any more is
//!    stopped the same way; its own sessions close, which frees the
//!    services below it for the next round. Services that hold each
//!    other's sessions (a cycle, or a session init cannot see closed) are
//!    stopped together when nothing else is left (`init: stopping N
//!    services that still serve each other`).
//! 3. With nothing running and no close outstanding, init's loop ends
//!    (`init: all children finished`) and the machine powers off.
//!
//! Nothing is restarted once stopping began ([`Init::released`] checks).
//! A scenario's natural end takes steps 2 and 3 (`init: all applications
//! finished: stopping the services in order`).

use alloc::vec::Vec;

use rt::interfaces::session;
use rt::println;
use rt::session::power;
use rt::syscall;

use crate::sessions::reply;
use crate::{serves, Init};

impl<'a> Init<'a> {
    /// Answers request `label` on the Power session with badge `badge`:
    /// `OFF` begins the power-off (answered first: the asker is stopped
    /// with the others).
    pub fn on_power(&mut self, badge: u64, label: u64) {
        let asker = badge & !(session::PARENT_SESSION | session::POWER_SESSION);
        let asker = crate::name_of_id(&self.kids, asker.wrapping_sub(1) as usize).unwrap_or("?");
        if label != power::OFF {
            return reply(power::UNKNOWN, [label, 0, 0, 0], None);
        }
        reply(power::OK, [0; 4], None);
        if self.stopping {
            println!("init: power-off asked by {asker}: under way already");
            return;
        }
        println!("init: power-off asked by {asker}: stopping every component in order");
        self.stopping = true;
        self.backoff.forget_all();
        let mut applications: Vec<usize> = self
            .kids
            .iter()
            .filter(|k| !serves(&k.component) && self.running(k.id))
            .map(|k| k.id)
            .collect();
        applications.reverse();
        for id in applications {
            self.stop_for_good(id);
        }
        self.stop_step();
    }

    /// Whether child `id` runs (started, not finished).
    pub(crate) fn running(&self, id: usize) -> bool {
        let started = self.kids.iter().any(|k| k.id == id && k.caps.is_some());
        started
            && self
                .children
                .children()
                .iter()
                .any(|c| c.index == id + 1 && !c.finished)
    }

    /// Stops running child `id` as a kill does (its sessions closed at
    /// their providers before its memory goes back), for good.
    fn stop_for_good(&mut self, id: usize) {
        let Some(kid) = self.kids.iter().find(|k| k.id == id) else {
            return;
        };
        let name = kid.component.name;
        if let Some(caps) = kid.caps {
            if let Err(e) = syscall::thread_suspend(rt::abi::caddr::own(caps.thread)) {
                println!("init: stopping {name}: ThreadSuspend failed: {e}");
            }
        }
        println!("init: stopping {name}");
        if let Some(child) = self.children.child_mut(id + 1) {
            child.finished = true;
        }
        self.finished(id + 1);
    }

    /// While stopping, with no close outstanding: stops the services
    /// whose sessions are all closed, round by round (see the module
    /// doc), until nothing runs or a close is outstanding (its end brings
    /// init back here).
    pub fn stop_step(&mut self) {
        while self.stopping && !self.sessions.closing() {
            let running: Vec<usize> = self
                .kids
                .iter()
                .filter(|k| self.running(k.id))
                .map(|k| k.id)
                .collect();
            if running.is_empty() {
                return;
            }
            let idle: Vec<usize> = running
                .iter()
                .copied()
                .filter(|&id| !self.sessions.serves_open(id))
                .collect();
            let now = if idle.is_empty() {
                println!(
                    "init: stopping {} services that still serve each other",
                    running.len()
                );
                running
            } else {
                idle
            };
            for id in now {
                self.stop_for_good(id);
            }
            // Children whose closes all ended at once: released now.
            self.closed();
        }
    }

    /// Whether init is stopping and something still runs.
    pub fn stop_pending(&self) -> bool {
        self.stopping && self.kids.iter().any(|k| self.running(k.id))
    }

    /// The scenario's applications have all finished: the services are
    /// stopped in order (steps 2 and 3 of the module doc).
    pub fn applications_finished(&mut self) {
        if self.stopping || !self.kids.iter().any(|k| self.running(k.id)) {
            return;
        }
        println!("init: all applications finished: stopping the services in order");
        self.stopping = true;
        self.stop_step();
    }
}
