//! Restart back-offs waited with a Timer session of init's own at the
//! scenario's Timer provider: a one-shot timeout per waiting child on the
//! session's notification, which is bound to init's thread, so init's
//! `Recv` returns when one ends (label `LABEL_NOTIFICATION`, the bits as
//! badge) while it goes on serving its other children. Without a Timer
//! provider, while it is not running, or when it is the child restarting,
//! init restarts at once.
//!
//! The provider is found by name (the first component providing `Timer`
//! in the boot config), the waiting children by their `Kid::id`, so a
//! config update that moves components around changes nothing here.
//!
//! Fragile: the session is opened with a direct call to the provider's
//! endpoint, not through a proxy thread (`proxy`), so a Timer provider
//! that never answers an open stops init.

use alloc::vec::Vec;

use rt::abi::caddr::own;
use rt::abi::MsgInfo;
use rt::interfaces::{child, session};
use rt::resources::Resources;
use rt::session::timer::{Timeout, Timer, TimerService};
use rt::session::{Interface, Session};
use rt::{println, syscall, transfer};
use ucore::config::Rom;

use crate::Kid;

/// See the module doc.
pub struct BackOff<'a> {
    /// The name of the first component providing `Timer`.
    provider: Option<&'a str>,
    timer: Option<Timer>,
    /// Init's slots for the session and its notification, once taken.
    slots: Option<(u32, u32)>,
    /// Waiting children: their id, their timeout, when it was set (µs).
    pending: Vec<(usize, Timeout, u64)>,
}

impl<'a> BackOff<'a> {
    pub fn new(rom: &Rom<'a>) -> Self {
        BackOff {
            provider: rom
                .components()
                .find(|c| c.provides_service(TimerService::NAME))
                .map(|c| c.name),
            timer: None,
            slots: None,
            pending: Vec::new(),
        }
    }

    /// Whether a child waits for its restart.
    pub fn waiting(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether child `id` waits out its back-off (init restarts it when
    /// its timeout fires).
    pub fn is_waiting(&self, id: usize) -> bool {
        self.pending.iter().any(|&(p, _, _)| p == id)
    }

    /// Forgets the back-offs of children that a config update stopped
    /// (or replaced by a running one at the same id): their timeouts
    /// fire for nobody.
    pub fn forget_gone(&mut self, kids: &[Kid<'_>]) {
        self.pending
            .retain(|&(id, _, _)| kids.iter().any(|k| k.id == id && k.caps.is_none()));
    }

    /// Forgets every back-off: nothing restarts any more (init stops
    /// the system, `crate::power`); the timeouts fire for nobody.
    pub fn forget_all(&mut self) {
        self.pending.clear();
    }

    /// Whether `kid` is the Timer provider.
    pub fn is_provider(&self, kid: &Kid<'_>) -> bool {
        self.provider == Some(kid.component.name)
    }

    /// Starts the back-off of child `id`: `true` when init now waits for
    /// it, `false` when it must restart at once.
    pub fn wait(
        &mut self,
        kids: &[Kid<'_>],
        res: &mut Resources,
        id: usize,
        delay_ms: u32,
    ) -> bool {
        let Some(name) = kids.iter().find(|k| k.id == id).map(|k| k.component.name) else {
            return false;
        };
        let Some(p) = self.provider.filter(|&p| p != name) else {
            return false;
        };
        let Some(ep) = kids
            .iter()
            .find(|k| k.component.name == p && k.caps.is_some())
            .and_then(|k| k.service)
        else {
            return false;
        };
        if self.timer.is_none() {
            match self.open(ep, res) {
                Ok(timer) => {
                    println!("init: own Timer session at {p}, for restart back-offs");
                    self.timer = Some(timer);
                }
                Err(why) => {
                    println!("init: no Timer session of its own at {p}: {why}");
                    self.provider = None;
                    return false;
                }
            }
        }
        let Some(timer) = &self.timer else {
            return false;
        };
        let set = timer
            .now()
            .and_then(|now| Ok((now, timer.oneshot(u64::from(delay_ms) * 1000)?)));
        match set {
            Ok((now, t)) => {
                self.pending.push((id, t, now));
                true
            }
            Err(e) => {
                println!("init: cannot wait the back-off of {name}: {e}");
                false
            }
        }
    }

    /// Opens a Timer session at the provider's endpoint `ep` (with init's
    /// own label) and binds its notification to init's thread.
    fn open(&mut self, ep: u32, res: &mut Resources) -> Result<Timer, &'static str> {
        let (session, notification) = match self.slots {
            Some(slots) => slots,
            None => {
                let slots = (
                    res.slot().map_err(|_| "no slot")?,
                    res.slot().map_err(|_| "no slot")?,
                );
                self.slots = Some(slots);
                slots
            }
        };
        let info = MsgInfo::new(session::OPEN_SESSION, 4, 0).unwrap_or_default();
        let opened = transfer::call_for_cap(own(ep), info, session::pack("init"), own(session));
        match opened {
            Ok((answer, _)) if answer.label() == session::OK && answer.caps() == 1 => {}
            _ => return Err("the provider refused"),
        }
        let timer = Timer::with_session(Session::from_cap(own(session)), notification)
            .map_err(|_| "no notification from the provider")?;
        syscall::bind_notification(own(child::OWN_THREAD), own(notification))
            .map_err(|_| "BindNotification failed")?;
        Ok(timer)
    }

    /// The children whose back-off ended with the notification bits
    /// `bits`: their ids and how long they waited (µs).
    pub fn fired(&mut self, bits: u64) -> Vec<(usize, u64)> {
        let now = self.timer.as_ref().and_then(|t| t.now().ok()).unwrap_or(0);
        let mut done = Vec::new();
        self.pending.retain(|&(id, t, set)| {
            let fired = bits & t.bit() != 0;
            if fired {
                done.push((id, now.saturating_sub(set)));
            }
            !fired
        });
        done
    }

    /// The Timer provider stopped: its sessions are gone. Init lets go of
    /// its own (unbinds and deletes the notification and the session
    /// capability, so a restarted provider can be asked again) and hands
    /// back every child that was waiting.
    pub fn timer_gone(&mut self) -> Vec<usize> {
        if self.timer.take().is_some() {
            let _ = syscall::bind_notification(own(child::OWN_THREAD), own(0));
        }
        if let Some((session, notification)) = self.slots {
            for slot in [session, notification] {
                // SAFETY: endpoint and notification capabilities; nothing
                // is mapped through them.
                let _ = unsafe { syscall::cap_delete(own(slot)) };
            }
        }
        self.pending.drain(..).map(|(id, _, _)| id).collect()
    }
}
