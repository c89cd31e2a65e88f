//! A frame and a pair of notifications that a server shares with a
//! client: the memory and the wake-ups of a bulk channel (`bench-server`
//! for `bench`, `test-stream-sink-server` for `test-stream-source`).
//!
//! The server makes a 2 MiB frame ([`FRAME_BYTES`]) and two notifications
//! from its own untyped memory and maps the frame ([`Served::make`]). It
//! answers each setup request — word 0 says which capability — with one
//! capability in the reply (capabilities travel only in replies from a
//! server, `interfaces::child`):
//!
//! | word 0 | capability |
//! |--------|------------|
//! | [`CAP_FRAME`] | the frame, all rights |
//! | [`CAP_SERVER_NOTIFY`] | the notification the server waits on, write-only: the client signals it |
//! | [`CAP_CLIENT_NOTIFY`] | the notification the server signals, read-only: the client waits on it |
//!
//! The client asks for all three and maps the frame ([`receive`]).

use abi::caddr::own;
use abi::map::{Cache, MapAttr};
use abi::{CapSlot, Error, MsgInfo, ObjectType, Rights};
use interfaces::child::{OWN_VSPACE, UNTYPED};

use crate::syscall;

/// Setup request word 0: the reply carries the frame.
pub const CAP_FRAME: u64 = 0;
/// Setup request word 0: the reply carries the server's notification
/// (write-only).
pub const CAP_SERVER_NOTIFY: u64 = 1;
/// Setup request word 0: the reply carries the client's notification
/// (read-only).
pub const CAP_CLIENT_NOTIFY: u64 = 2;
/// Bytes of the shared frame (one `Frame2M`).
pub const FRAME_BYTES: usize = 2 << 20;

/// Readable and writable, write-back: ordinary memory.
const RW: MapAttr = MapAttr {
    writable: true,
    executable: false,
    cache: Cache::WriteBack,
};

/// A system call's failure, naming the call.
pub type Failed = (&'static str, Error);

/// The server's side: the objects in its own slots, and the copies the
/// client gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// The frame, mapped in the server's address space.
    pub frame: CapSlot,
    /// The notification the server waits on.
    pub server_notify: CapSlot,
    /// The notification the server signals.
    pub client_notify: CapSlot,
    /// What the client gets, by [`CAP_FRAME`] and the others.
    for_client: [CapSlot; 3],
}

impl Served {
    /// Makes the frame (first, from the start of the untyped memory: it
    /// needs 2 MiB alignment) and the notifications in the own slots
    /// `first..first + 5`, and maps the frame at `va`.
    ///
    /// # Safety
    ///
    /// `[va, va + FRAME_BYTES)` is a region of the address space that
    /// nothing else of the program uses; the frame is reached only through
    /// raw pointers into it.
    pub unsafe fn make(first: u32, va: u64) -> Result<Served, Failed> {
        let [frame, server_notify, client_notify, server_write, client_read] =
            core::array::from_fn(|i| own(first + i as u32));
        for (slot, kind) in [
            (frame, ObjectType::Frame2M),
            (server_notify, ObjectType::Notification),
            (client_notify, ObjectType::Notification),
        ] {
            syscall::retype(own(UNTYPED), kind, 0, slot, 1).map_err(|e| ("Retype", e))?;
        }
        syscall::cap_mint(server_notify, server_write, Rights::WRITE, 0)
            .map_err(|e| ("CapMint", e))?;
        syscall::cap_mint(client_notify, client_read, Rights::READ, 0)
            .map_err(|e| ("CapMint", e))?;
        // SAFETY: the caller gives the region to this frame alone.
        unsafe { syscall::map(own(OWN_VSPACE), frame, va, RW) }.map_err(|e| ("Map", e))?;
        Ok(Served {
            frame,
            server_notify,
            client_notify,
            for_client: [frame, server_write, client_read],
        })
    }

    /// The objects in `kept`, made ([`Self::make`]) on the first call.
    ///
    /// # Safety
    ///
    /// As for [`Self::make`].
    pub unsafe fn once(kept: &mut Option<Served>, first: u32, va: u64) -> Result<Served, Failed> {
        if let Some(served) = *kept {
            return Ok(served);
        }
        // SAFETY: the caller's promise, passed on.
        Ok(*kept.insert(unsafe { Self::make(first, va) }?))
    }

    /// The reply to setup request `which`, labelled `ok`, carrying its
    /// capability; `None` for an unknown `which`.
    pub fn reply(&self, which: u64, ok: u64) -> Option<MsgInfo> {
        let cap = *self.for_client.get(usize::try_from(which).ok()?)?;
        crate::transfer::set_send_cap(cap);
        MsgInfo::new(ok, 0, 1)
    }
}

/// The client's side: the notifications (the frame is mapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// The server's notification: signal it.
    pub server_notify: CapSlot,
    /// The client's notification: wait on it.
    pub client_notify: CapSlot,
}

/// Why [`receive`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiveError {
    /// A system call failed.
    Syscall(Failed),
    /// The server answered setup request `which` with `label` or without
    /// a capability.
    Refused {
        /// Word 0 of the request.
        which: u64,
        /// The reply's label.
        label: u64,
    },
}

impl core::fmt::Display for ReceiveError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            ReceiveError::Syscall((what, e)) => write!(f, "{what} failed: {e}"),
            ReceiveError::Refused { which, label } => write!(
                f,
                "the server answered setup request {which} with label {label:#x}"
            ),
        }
    }
}

/// Asks the server behind endpoint `ep` for the three capabilities (each a
/// `Call` labelled `setup`, answered with label `ok`) into the empty own
/// slots `slots` (frame, server's notification, client's notification) and
/// maps the frame at `va`.
///
/// # Safety
///
/// As for [`Served::make`]: `[va, va + FRAME_BYTES)` is the frame's alone.
pub unsafe fn receive(
    ep: CapSlot,
    setup: u64,
    ok: u64,
    slots: [CapSlot; 3],
    va: u64,
) -> Result<Received, ReceiveError> {
    for (slot, which) in slots
        .into_iter()
        .zip([CAP_FRAME, CAP_SERVER_NOTIFY, CAP_CLIENT_NOTIFY])
    {
        let info = MsgInfo::new(setup, 1, 0).unwrap_or_default();
        let (reply, _) = crate::transfer::call_for_cap(ep, info, [which, 0, 0, 0], slot)
            .map_err(|e| ReceiveError::Syscall(("Call (setup)", e)))?;
        if reply.label() != ok || reply.caps() != 1 {
            return Err(ReceiveError::Refused {
                which,
                label: reply.label(),
            });
        }
    }
    // SAFETY: the caller gives the region to this frame alone.
    unsafe { syscall::map(own(OWN_VSPACE), slots[0], va, RW) }
        .map_err(|e| ReceiveError::Syscall(("Map", e)))?;
    Ok(Received {
        server_notify: slots[1],
        client_notify: slots[2],
    })
}
