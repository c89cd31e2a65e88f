//! Root as its children's fault handler: what a message on its endpoint
//! means and which children it still waits for.
//!
//! Each child's fault endpoint is root's endpoint minted with the child's
//! index as badge, so a message's badge names the child and its label the
//! event (`abi::fault`): an exit (word 0 = the code), a page fault (words
//! address, instruction pointer and error code) or another exception
//! (vector, instruction pointer and error code). A faulted child waits for a reply that never comes: root stops
//! it ([`Handled::stop`]). Exited and faulted children are *finished*; root
//! is done when no child that is not a server is left running
//! ([`Supervisor::waiting`]). Whether a child is a server is declared where
//! it is started (root: the `+serve` marker, `crate::start`; init: the
//! scenario's `shared_endpoint` and `provides`), never read from its name.

use alloc::vec::Vec;
use core::fmt;

use abi::fault::{
    LABEL_EXCEPTION, LABEL_EXIT, LABEL_PAGE_FAULT, WORD_ADDRESS, WORD_CODE, WORD_DETAIL, WORD_IP,
};
use abi::REGISTER_MESSAGE_WORDS;

/// What a message on root's endpoint reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The thread called `ThreadExit(code)`; it is gone.
    Exited { code: i64 },
    /// A page fault at `address`, by the instruction at `ip`; `code` is
    /// the CPU's error code (present, write, user, fetch bits).
    PageFault { address: u64, ip: u64, code: u64 },
    /// Another CPU exception, with the CPU's error code (0 where the
    /// exception has none).
    Exception { vector: u64, ip: u64, error: u64 },
    /// No fault or exit: a label root does not know.
    Other { label: u64 },
}

impl Event {
    /// Decodes a message by its label and register words.
    pub fn decode(label: u64, words: [u64; REGISTER_MESSAGE_WORDS]) -> Event {
        match label {
            // The code was passed sign-extended from an `i32`.
            LABEL_EXIT => Event::Exited {
                code: words[0] as i64,
            },
            LABEL_PAGE_FAULT => Event::PageFault {
                address: words[WORD_ADDRESS],
                ip: words[WORD_IP],
                code: words[WORD_CODE],
            },
            LABEL_EXCEPTION => Event::Exception {
                vector: words[WORD_CODE],
                ip: words[WORD_IP],
                error: words[WORD_DETAIL],
            },
            label => Event::Other { label },
        }
    }

    /// Whether the child waits in a fault (and must be stopped).
    pub fn is_fault(&self) -> bool {
        matches!(self, Event::PageFault { .. } | Event::Exception { .. })
    }
}

/// One started child.
#[derive(Clone, Debug)]
pub struct Child<'a, T> {
    /// 1-based position in the start list; the badge of its fault endpoint.
    pub index: usize,
    pub name: &'a str,
    /// Servers are not waited for.
    pub server: bool,
    /// Exited or faulted.
    pub finished: bool,
    /// What the caller keeps per child (root: its capability slots).
    pub caps: T,
}

/// The started children.
#[derive(Clone, Debug)]
pub struct Supervisor<'a, T> {
    children: Vec<Child<'a, T>>,
}

impl<T> Default for Supervisor<'_, T> {
    fn default() -> Self {
        Supervisor {
            children: Vec::new(),
        }
    }
}

/// What a message meant, for the log and for the caller's action.
#[derive(Debug)]
pub struct Handled<'s, 'a, T> {
    pub badge: u64,
    pub event: Event,
    /// The child the badge names, if any.
    pub child: Option<&'s Child<'a, T>>,
    /// Whether this message finished the child (it was running before).
    pub finished_now: bool,
}

impl<T> Handled<'_, '_, T> {
    /// Whether the caller must stop the child (`ThreadSuspend`): it faulted
    /// and waits for a reply.
    pub fn stop(&self) -> bool {
        self.finished_now && self.event.is_fault()
    }
}

impl<T> fmt::Display for Handled<'_, '_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(child) = self.child.filter(|_| self.finished_now) else {
            // Not a report about a running child: say what was ignored.
            let label = match self.event {
                Event::Exited { .. } => LABEL_EXIT,
                Event::PageFault { .. } => LABEL_PAGE_FAULT,
                Event::Exception { .. } => LABEL_EXCEPTION,
                Event::Other { label } => label,
            };
            return match self.child {
                Some(c) if c.finished => write!(
                    f,
                    "ignoring a message (label {label:#x}) about finished child {}",
                    c.name
                ),
                Some(c) => write!(
                    f,
                    "ignoring a message (label {label:#x}) from child {}",
                    c.name
                ),
                None => write!(
                    f,
                    "ignoring a message (label {label:#x}) with badge {} that names no child",
                    self.badge
                ),
            };
        };
        write!(f, "child {} ", child.name)?;
        match self.event {
            Event::Exited { code } => write!(f, "exited with code {code}"),
            Event::PageFault { address, ip, .. } => {
                write!(f, "faulted: page fault at {address:#x} (ip {ip:#x})")
            }
            Event::Exception { vector, ip, .. } => {
                write!(f, "faulted: exception vector {vector} at ip {ip:#x}")
            }
            // Unreachable: `Other` never finishes a child.
            Event::Other { label } => write!(f, "sent label {label:#x}"),
        }
    }
}

impl<'a, T> Supervisor<'a, T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a started child; a `server` is not waited for.
    pub fn add(&mut self, index: usize, name: &'a str, server: bool, caps: T) {
        self.children.push(Child {
            index,
            name,
            server,
            finished: false,
            caps,
        });
    }

    /// The child with badge `index`, to change its capabilities or mark it
    /// running again after a restart (`finished = false`).
    pub fn child_mut(&mut self, index: usize) -> Option<&mut Child<'a, T>> {
        self.children.iter_mut().find(|c| c.index == index)
    }

    /// Forgets the child with badge `index` (init's children removed by a
    /// config update); its record, if it had one.
    pub fn remove(&mut self, index: usize) -> Option<Child<'a, T>> {
        let position = self.children.iter().position(|c| c.index == index)?;
        Some(self.children.remove(position))
    }

    /// The started children, in start order.
    pub fn children(&self) -> &[Child<'a, T>] {
        &self.children
    }

    /// Children that are not servers and still run.
    pub fn waiting(&self) -> usize {
        self.children
            .iter()
            .filter(|c| !c.server && !c.finished)
            .count()
    }

    /// Takes a message (its badge, label and register words) into account.
    pub fn handle(
        &mut self,
        badge: u64,
        label: u64,
        words: [u64; REGISTER_MESSAGE_WORDS],
    ) -> Handled<'_, 'a, T> {
        let event = Event::decode(label, words);
        let position = self
            .children
            .iter()
            .position(|c| u64::try_from(c.index).is_ok_and(|i| i == badge));
        let mut finished_now = false;
        if let Some(c) = position.and_then(|p| self.children.get_mut(p)) {
            if !c.finished && !matches!(event, Event::Other { .. }) {
                c.finished = true;
                finished_now = true;
            }
        }
        Handled {
            badge,
            event,
            child: position.and_then(|p| self.children.get(p)),
            finished_now,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;
    use std::string::{String, ToString};

    fn text<T>(h: &Handled<'_, '_, T>) -> String {
        h.to_string()
    }

    #[test]
    fn decode_labels() {
        assert_eq!(
            Event::decode(LABEL_EXIT, [u64::MAX, 0, 0, 0]),
            Event::Exited { code: -1 }
        );
        assert_eq!(
            Event::decode(LABEL_PAGE_FAULT, [0xdead_0000, 0x20_1234, 6, 0]),
            Event::PageFault {
                address: 0xdead_0000,
                ip: 0x20_1234,
                code: 6
            }
        );
        assert_eq!(
            Event::decode(LABEL_EXCEPTION, [0, 0x20_0000, 13, 0x18]),
            Event::Exception {
                vector: 13,
                ip: 0x20_0000,
                error: 0x18
            }
        );
        assert_eq!(Event::decode(7, [0; 4]), Event::Other { label: 7 });
    }

    #[test]
    fn waits_for_non_servers_only() {
        let mut s: Supervisor<'_, u32> = Supervisor::new();
        s.add(1, "hello", false, 10);
        s.add(3, "log-server", true, 11);
        s.add(4, "hello", false, 12);
        s.add(5, "pinger", true, 13);
        assert_eq!(s.waiting(), 2);
        assert!(s.children()[1].server && s.children()[3].server);

        let h = s.handle(4, LABEL_EXIT, [0, 0, 0, 0]);
        assert_eq!(text(&h), "child hello exited with code 0");
        assert!(!h.stop());
        assert_eq!(h.child.unwrap().caps, 12);
        assert_eq!(s.waiting(), 1);

        let h = s.handle(1, LABEL_PAGE_FAULT, [0xdead_0000, 0x20_10ab, 6, 0]);
        assert_eq!(
            text(&h),
            "child hello faulted: page fault at 0xdead0000 (ip 0x2010ab)"
        );
        assert!(h.stop());
        assert_eq!(s.waiting(), 0);

        // A server's fault is reported and stops it; nobody waited for it.
        let h = s.handle(3, LABEL_EXCEPTION, [0, 0x20_0010, 6, 0]);
        assert_eq!(
            text(&h),
            "child log-server faulted: exception vector 6 at ip 0x200010"
        );
        assert!(h.stop());
        assert_eq!(s.waiting(), 0);
    }

    #[test]
    fn servers_by_flag_and_restarted_children() {
        let mut s: Supervisor<'_, u32> = Supervisor::new();
        s.add(1, "echo", true, 1);
        s.add(2, "crash", false, 2);
        // The flag decides, not the name.
        s.add(3, "echo-server", false, 3);
        s.add(4, "test-x", true, 4);
        assert_eq!(s.waiting(), 2);
        s.handle(3, LABEL_EXIT, [0; 4]);
        assert_eq!(s.waiting(), 1);
        let h = s.handle(2, LABEL_PAGE_FAULT, [0x1000, 0x20_0000, 6, 0]);
        assert!(h.stop());
        assert_eq!(s.waiting(), 0);
        let c = s.child_mut(2).unwrap();
        c.finished = false;
        c.caps = 7;
        assert_eq!(s.waiting(), 1);
        assert_eq!(
            text(&s.handle(2, LABEL_EXIT, [0; 4])),
            "child crash exited with code 0"
        );
        assert!(s.child_mut(5).is_none());
    }

    #[test]
    fn other_messages_are_ignored() {
        let mut s: Supervisor<'_, ()> = Supervisor::new();
        s.add(2, "hello", false, ());
        let h = s.handle(2, 0x42, [1, 2, 3, 4]);
        assert!(!h.finished_now && !h.stop());
        assert_eq!(text(&h), "ignoring a message (label 0x42) from child hello");
        assert_eq!(s.waiting(), 1);

        let h = s.handle(9, LABEL_EXIT, [0; 4]);
        assert!(h.child.is_none() && !h.stop());
        assert_eq!(
            text(&h),
            format!("ignoring a message (label {LABEL_EXIT:#x}) with badge 9 that names no child")
        );

        s.handle(2, LABEL_EXIT, [3, 0, 0, 0]);
        assert_eq!(s.waiting(), 0);
        // A second report about a finished child changes nothing.
        let h = s.handle(2, LABEL_PAGE_FAULT, [0; 4]);
        assert!(!h.stop() && !h.finished_now);
        assert!(text(&h).contains("about finished child hello"), "{h}");
    }
}
