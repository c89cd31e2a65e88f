//! Dynamic reconfiguration (docs/architecture.md, "Dynamic
//! reconfiguration"; the client side is `rt::session::reconfig`): a
//! component with a `Reconfig` session (routed to `parent`, listed in
//! `parent_provides`) names a boot module holding a config update; init
//! checks it exactly as it checked its first config ROM and applies the
//! difference by component name:
//!
//! - only in the running config: stopped — its thread suspended, its
//!   sessions closed at their providers (and those it provided gone with
//!   its endpoint); its block is revoked only once those closes ended (a
//!   driver's device is reset before its DMA memory goes back), then kept
//!   for a child to come (`init: stopped NAME: its sessions closed, its
//!   memory returned`). Meanwhile its id stays taken;
//! - in both with the same record (`Component::to_spec`: binary, quotas,
//!   priority, CPU and CPU set, restart policy, services, routes by name,
//!   config):
//!   kept running, untouched — its sessions too; its record is the
//!   update's from then on;
//! - in both with a different record: stopped, then started with the new
//!   record;
//! - only in the update: started, at the lowest free `Kid::id`.
//!
//! A stopped child waiting out a restart back-off waits no more (init's
//! loop calls `BackOff::forget_gone` after an update: its id may be a
//! new child's); opens parked for it are decided again at once
//! (`Sessions::unpark`), those a stopped client had parked are dropped
//! (`Sessions::finished`).
//!
//! `KILL name` ([`Init::kill`]) kills a component whose entry is
//! `killable` exactly as if it had faulted: the same path as a fault
//! message from the kernel (`Init::finished`: its sessions closed, its
//! block revoked, its restart policy applied), for tests of what happens
//! when a component dies under load.
//!
//! A module that is missing or not a valid config ROM is refused with the
//! reason in init's log and changes nothing. Not yet: a child that cannot
//! be started for lack of memory is reported and left out (root sizes
//! init's memory for the config and `config.update` together, so the
//! scenario's own update always fits); an update that removes the
//! component asking for it stops it before the answer, which then goes
//! nowhere.

use rt::interfaces::session;
use rt::println;
use rt::session::reconfig;
use rt::syscall;
use ucore::config::Rom;

use crate::sessions::reply;
use crate::Init;

impl<'a> Init<'a> {
    /// Answers request `label`, `words` on the Reconfig session with
    /// badge `badge`; the running config is replaced by the update when
    /// it is applied.
    pub fn on_reconfig(&mut self, badge: u64, label: u64, words: &[u64; 4]) {
        self.serve_reconfig(badge, label, words);
        // A child it stopped no longer waits for its restart (its id may
        // be a new child's now).
        self.backoff.forget_gone(&self.kids);
    }

    fn serve_reconfig(&mut self, badge: u64, label: u64, words: &[u64; 4]) {
        let asker = badge & !(session::PARENT_SESSION | session::RECONFIG_SESSION);
        let asker = crate::name_of_id(&self.kids, asker.wrapping_sub(1) as usize).unwrap_or("?");
        if label == reconfig::KILL {
            let (bytes, len) = session::unpack(words);
            let name = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
            return self.kill(asker, name);
        }
        if label != reconfig::APPLY {
            return reply(reconfig::UNKNOWN, [label, 0, 0, 0], None);
        }
        let (bytes, len) = session::unpack(words);
        let module = core::str::from_utf8(&bytes[..len]).unwrap_or("?");
        let Some(entry) = self.builder.image.find(module) else {
            println!("init: {asker} asks for config update {module:?}: no such module; refused");
            return reply(reconfig::NOT_FOUND, [0; 4], None);
        };
        let update = match Rom::parse(entry.data) {
            Ok(update) => update,
            Err(e) => {
                println!(
                    "init: config update {module:?} from {asker} refused: {e}; nothing changed"
                );
                return reply(reconfig::MALFORMED, [0; 4], None);
            }
        };
        println!(
            "init: {asker} asks for config update {module:?} ({} components)",
            update.component_count()
        );
        let counts = self.apply_update(&update);
        self.rom = update;
        println!(
            "init: config update {module:?} applied: {} started, {} stopped, {} kept",
            counts[0], counts[1], counts[2]
        );
        reply(reconfig::OK, [counts[0], counts[1], counts[2], 0], None);
    }

    /// `KILL name` from `asker`: kills a running, killable component as
    /// if it had faulted, or refuses with the reason.
    fn kill(&mut self, asker: &str, name: &str) {
        let kid = self.kids.iter().find(|k| k.component.name == name);
        let running = |id: usize| {
            self.children
                .children()
                .iter()
                .any(|c| c.index == id + 1 && !c.finished)
        };
        let refusal = match kid {
            None => Some((reconfig::NOT_FOUND, "no such component")),
            Some(k) if !k.component.killable => Some((
                reconfig::NOT_KILLABLE,
                "not killable (its entry lacks killable = true)",
            )),
            Some(k) if k.caps.is_none() || !running(k.id) => {
                Some((reconfig::NOT_RUNNING, "not running"))
            }
            Some(_) => None,
        };
        if let Some((label, why)) = refusal {
            println!("init: kill {name} from {asker} refused: {why}");
            return reply(label, [0; 4], None);
        }
        let Some((id, caps)) = kid.and_then(|k| Some((k.id, k.caps?))) else {
            return;
        };
        // Stopped now, as a fault stops it: its memory goes back only
        // once its sessions are closed at their providers, and until then
        // a killed driver must not go on driving its device. (Threads it
        // made itself run on until its block is revoked.)
        if let Err(e) = syscall::thread_suspend(rt::abi::caddr::own(caps.thread)) {
            println!("init: kill {name}: ThreadSuspend failed: {e}");
        }
        println!("init: killed {name} (asked by {asker})");
        // The answer first: init's reply capability is the asker's only
        // until init calls out, and a restart may open a Timer session.
        reply(reconfig::OK, [0; 4], None);
        if let Some(child) = self.children.child_mut(id + 1) {
            child.finished = true;
        }
        // From here on exactly what a fault message makes init do.
        self.finished(id + 1);
    }

    /// Applies `update` (see the module doc); children started, stopped,
    /// kept.
    fn apply_update(&mut self, update: &Rom<'a>) -> [u64; 3] {
        let (mut stopped, mut kept) = (0, 0);
        let mut i = 0;
        while let Some(kid) = self.kids.get_mut(i) {
            let name = kid.component.name;
            match update.find(name) {
                Some(new) if new.to_spec() == kid.component.to_spec() => {
                    kid.component = new;
                    kept += 1;
                    i += 1;
                }
                new => {
                    let why = match new {
                        Some(_) => "its record changed",
                        None => "removed from the config",
                    };
                    println!("init: stopped {name} ({why})");
                    self.stop_kid(i);
                    stopped += 1;
                }
            }
        }
        let mut started = 0;
        for c in update.components() {
            if self.kids.iter().any(|k| k.component.name == c.name) {
                continue;
            }
            let taken = |id: usize| {
                self.kids.iter().any(|k| k.id == id) || self.departing.iter().any(|k| k.id == id)
            };
            let id = (0..).find(|&id| !taken(id));
            let Some(id) = id.filter(|&id| id < ucore::config::MAX_COMPONENTS) else {
                println!("init: cannot start {}: no free child slot range", c.name);
                continue;
            };
            self.launch(c, id);
            started += 1;
        }
        [started, stopped, kept]
    }

    /// Stops `kids[i]` for good: suspends it and closes its sessions;
    /// its memory goes back (its block kept for a child to come) once
    /// the closes ended — at once if none is outstanding, else when
    /// [`Init::closed`] finds it among the departing.
    fn stop_kid(&mut self, i: usize) {
        let id = self.kids[i].id;
        if let Some(caps) = self.kids[i].caps {
            // It must not go on (a driver driving its device) while its
            // sessions close.
            let _ = syscall::thread_suspend(rt::abi::caddr::own(caps.thread));
        }
        let pending = self.sessions.finished(&self.kids, &mut self.pool.res, id);
        let mut kid = self.kids.remove(i);
        self.children.remove(id + 1);
        match pending {
            true => self.departing.push(kid),
            false => self.forget(&mut kid),
        }
    }
}
