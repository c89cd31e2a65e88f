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

/// Stages the acknowledgement of `taken` on `sink`, or keeps it in
/// `backlog` (behind those already kept) when the ring is full.
pub fn ack_or_keep(
    sink: &mut Sink<Notifications>,
    backlog: &mut alloc::collections::VecDeque<Taken>,
    taken: Taken,
) {
    if !backlog.is_empty() {
        backlog.push_back(taken);
        return;
    }
    if let Err(e) = sink.ack(taken) {
        backlog.push_back(e.packet);
    }
}

/// Stages `backlog`'s acknowledgements as far as `sink`'s ring takes
/// them and publishes.
pub fn publish_backlog(
    sink: &mut Sink<Notifications>,
    backlog: &mut alloc::collections::VecDeque<Taken>,
) -> Result<(), crate::stream::Error> {
    while let Some(taken) = backlog.pop_front() {
        if let Err(e) = sink.ack(taken) {
            backlog.push_front(e.packet);
            break;
        }
    }
    sink.flush()
}
