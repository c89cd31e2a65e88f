//! The provider's side of a session whose bulk data moves through packet
//! streams in one 2 MiB frame made from the session's donation (Block,
//! Nic): the frame and the client's notification made from the donated
//! untyped memory, the frame mapped, a signal context on the provider's
//! thread-bound notification that runs the provider's handler when the
//! client signals, and the capabilities the session's `STREAM` request
//! hands out (`rt::shared`'s `CAP_FRAME`, `CAP_SERVER_NOTIFY`,
//! `CAP_CLIENT_NOTIFY`).
//!
//! Donated slots (an interface using it has `CAPS` = 4): 0 the frame, 1
//! the client's notification, 2 its read-only copy (the client's), 3 the
//! provider's notification's badged write copy (the client's).
//!
//! Invariant: while a [`StreamFrame`] exists the frame is mapped at its
//! address and its context registered; dropping it (the session closed)
//! unregisters the context and unmaps the frame. The objects themselves
//! go when the client revokes its donation.

use abi::caddr::own;
use abi::CapSlot;

use crate::shared;
use crate::stream::{Notifications, Region, Sink, Taken};

const SLOT_FRAME: u32 = 0;
const SLOT_CLIENT_NOTIFY: u32 = 1;
const SLOT_CLIENT_READ: u32 = 2;
const SLOT_SERVER_WRITE: u32 = 3;

/// Bytes of the frame.
pub const FRAME_BYTES: usize = shared::FRAME_BYTES;

/// Why [`StreamFrame::open`] failed.
pub type ServeError = &'static str;

/// A session's stream frame, as its provider holds it (module doc).
pub struct StreamFrame<T: 'static> {
    donated: crate::session::Donated,
    va: u64,
    context: crate::signal::SignalContext,
    signals: alloc::rc::Rc<core::cell::RefCell<crate::signal::Signals<T>>>,
}

impl<T: 'static> StreamFrame<T> {
    /// Makes the frame and the client's notification from `donated`,
    /// maps the frame at `va` and registers `on_signal` on `signals`
    /// (whose notification is bound to the provider's thread). Returns
    /// the notifications of the provider's stream ends (the peer's to
    /// signal, its own to wait on).
    ///
    /// # Safety
    ///
    /// `[va, va + FRAME_BYTES)` is a 2 MiB aligned region nothing else of
    /// the provider uses while the `StreamFrame` exists.
    pub unsafe fn open(
        donated: crate::session::Donated,
        signals: &alloc::rc::Rc<core::cell::RefCell<crate::signal::Signals<T>>>,
        va: u64,
        on_signal: impl FnMut(&mut T) + 'static,
    ) -> Result<(StreamFrame<T>, Notifications), ServeError> {
        use abi::map::{Cache, MapAttr};
        use abi::{ObjectType, Rights};
        let frame = donated.slot(SLOT_FRAME);
        let notify = donated.slot(SLOT_CLIENT_NOTIFY);
        let syscall_failed = |what| move |_| what;
        crate::syscall::retype(donated.untyped(), ObjectType::Frame2M, 0, frame, 1)
            .map_err(syscall_failed("the donation holds no 2 MiB frame"))?;
        crate::syscall::retype(donated.untyped(), ObjectType::Notification, 0, notify, 1)
            .map_err(syscall_failed("the donation holds no notification"))?;
        crate::syscall::cap_mint(notify, donated.slot(SLOT_CLIENT_READ), Rights::READ, 0)
            .map_err(syscall_failed("minting the client's notification failed"))?;
        // The parent wakes the client through it when this provider stops
        // (`interfaces::session`, "The provider's death").
        donated.set_wake(notify).map_err(syscall_failed(
            "copying the client's notification to the wake slot failed",
        ))?;
        let rw = MapAttr {
            writable: true,
            executable: false,
            cache: Cache::WriteBack,
        };
        // SAFETY: the caller gives the region to this frame alone.
        unsafe { crate::syscall::map(own(interfaces::child::OWN_VSPACE), frame, va, rw) }
            .map_err(syscall_failed("mapping the stream frame failed"))?;
        let context = signals
            .borrow_mut()
            .register(donated.slot(SLOT_SERVER_WRITE), on_signal)
            .map_err(|_| "no signal context left");
        let context = match context {
            Ok(c) => c,
            Err(e) => {
                // SAFETY: nothing uses the mapping yet.
                let _ = unsafe { crate::syscall::unmap(frame) };
                return Err(e);
            }
        };
        let notifications = Notifications {
            peer: notify,
            own: signals.borrow().notification(),
        };
        let made = StreamFrame {
            donated,
            va,
            context,
            signals: signals.clone(),
        };
        Ok((made, notifications))
    }

    /// The stream region of `len` bytes at byte `offset` of the frame
    /// (64-byte aligned, inside it): `None` otherwise.
    ///
    /// # Safety
    ///
    /// No other region made by this call overlaps it while both exist
    /// (each stream of the session has its own part of the frame), and it
    /// does not outlive the `StreamFrame`.
    pub unsafe fn region(&self, offset: usize, len: usize) -> Option<Region> {
        let end = offset.checked_add(len)?;
        if end > FRAME_BYTES {
            return None;
        }
        // SAFETY: the frame is mapped at `va` while `self` exists; the
        // caller keeps the parts apart and within its life.
        unsafe { Region::new((self.va as usize + offset) as *mut u8, len) }.ok()
    }

    /// The frame (the provider's capability: to learn its bus address,
    /// say).
    pub fn frame(&self) -> CapSlot {
        self.donated.slot(SLOT_FRAME)
    }

    /// The capability the session's `STREAM` request `which` hands out.
    pub fn stream_cap(&self, which: u64) -> Option<CapSlot> {
        let i = match which {
            shared::CAP_FRAME => SLOT_FRAME,
            shared::CAP_SERVER_NOTIFY => SLOT_SERVER_WRITE,
            shared::CAP_CLIENT_NOTIFY => SLOT_CLIENT_READ,
            _ => return None,
        };
        Some(self.donated.slot(i))
    }

    /// The reply to a `STREAM` request `which`: label `ok` with the
    /// capability in it, or `refused`.
    pub fn stream_reply(
        &self,
        which: u64,
        ok: u64,
        refused: u64,
    ) -> (abi::MsgInfo, crate::syscall::Words) {
        match self.stream_cap(which) {
            Some(cap) => {
                crate::transfer::set_send_cap(cap);
                (abi::MsgInfo::new(ok, 0, 1).unwrap_or_default(), [0; 4])
            }
            None => crate::server::answer(refused, [0; 4]),
        }
    }
}

impl<T: 'static> Drop for StreamFrame<T> {
    fn drop(&mut self) {
        let _ = self.signals.borrow_mut().unregister(self.context);
        // SAFETY: the streams on the frame are gone with the session (the
        // owner drops them before or with this).
        let _ = unsafe { crate::syscall::unmap(self.donated.slot(SLOT_FRAME)) };
    }
}

/// Asks the provider behind session capability `cap` for the stream's
/// three capabilities (`STREAM` = `setup`, answered `ok`) into own slots
/// `slots` (frame, provider's notification, client's) and maps the frame
/// at `va`: the client's notifications.
///
/// # Safety
///
/// `[va, va + FRAME_BYTES)` is a 2 MiB aligned region nothing else of the
/// program uses.
pub unsafe fn receive(
    cap: CapSlot,
    setup: u64,
    ok: u64,
    slots: [u32; 3],
    va: u64,
) -> Result<Notifications, shared::ReceiveError> {
    let slots = slots.map(own);
    // SAFETY: the caller's promise, passed on.
    let got = unsafe { shared::receive(cap, setup, ok, slots, va) }?;
    Ok(Notifications {
        peer: got.server_notify,
        own: got.client_notify,
    })
}

/// A provider's sink end of a stream, with the acknowledgements the
/// client's full ring could not take yet and whether the client broke
/// the stream (Block's stream, Nic's transmit stream).
///
/// A client that does not take its acknowledgements holds up only its
/// own: they wait here, retried at every [`AckedSink::publish`].
pub struct AckedSink {
    /// The stream.
    pub sink: Sink<Notifications>,
    backlog: alloc::collections::VecDeque<Taken>,
    broken: bool,
}

impl AckedSink {
    /// `sink`, armed: the client's first batch signals.
    pub fn new(mut sink: Sink<Notifications>) -> Result<AckedSink, ServeError> {
        sink.arm(false).map_err(|_| "stream broken at start")?;
        Ok(AckedSink {
            sink,
            backlog: alloc::collections::VecDeque::new(),
            broken: false,
        })
    }

    /// Stages the acknowledgement of `taken` with `status` (its op), or
    /// keeps it for later when the client's ring is full.
    pub fn ack(&mut self, mut taken: Taken, status: u32) {
        taken.set_op(status);
        if !self.backlog.is_empty() {
            self.backlog.push_back(taken);
            return;
        }
        if let Err(e) = self.sink.ack(taken) {
            self.backlog.push_back(e.packet);
        }
    }

    /// Publishes the staged acknowledgements, the backlog first as far as
    /// the ring takes it; `Err` once the stream is broken (logged by the
    /// caller once: [`Self::broken`]).
    pub fn publish(&mut self) -> Result<(), crate::stream::Error> {
        while let Some(taken) = self.backlog.pop_front() {
            if let Err(e) = self.sink.ack(taken) {
                self.backlog.push_front(e.packet);
                break;
            }
        }
        self.sink.flush().inspect_err(|e| {
            if e.is_fatal() {
                self.broken = true;
            }
        })
    }

    /// Re-arms the stream before the provider returns to its `Recv`:
    /// `true` if packets (or, with a backlog, ring space) are there
    /// already — look again now.
    pub fn arm(&mut self) -> bool {
        let space = !self.backlog.is_empty();
        if self.broken {
            return false;
        }
        match self.sink.arm(space) {
            Ok(ready) => ready,
            // Only a broken stream fails to arm.
            Err(_) => {
                self.broken = true;
                false
            }
        }
    }

    /// Whether the stream broke (the client wrote impossible indices): its
    /// requests are not looked at any more.
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// Marks the stream broken.
    pub fn set_broken(&mut self) {
        self.broken = true;
    }
}

/// Empties the own slots `slots` a client received a stream's
/// capabilities into ([`receive`]), before a reopened session's streams
/// are received there. The old session's donation was revoked, which took
/// those capabilities (so this is a no-op) and the frame's mapping with
/// it; deleting makes sure the slots are empty either way.
///
/// # Safety
///
/// Nothing uses the old streams again.
pub unsafe fn forget_received(slots: [u32; 3]) {
    for slot in slots {
        // SAFETY: the caller's promise: the frame is not used through
        // this capability (or its mapping) any more.
        let _ = unsafe { crate::syscall::cap_delete(own(slot)) };
    }
}
