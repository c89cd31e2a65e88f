//! Asynchronous signal handlers on a notification: Genode's
//! `Signal_handler` on Pecan's notification words.
//!
//! A [`Signals`] owns one notification (read side) and up to 64 *signal
//! contexts*, one per bit of the notification word (the bookkeeping is
//! `ucore::signal`, host-tested). [`Signals::register`] gives a context a
//! bit and a handler and mints, for the signaller, a write-only capability
//! badged with that bit (a [`SignalContext`]): a `Signal` on it sets the
//! bit. [`Signals::dispatch`] runs the handler of every set bit of a word,
//! lowest bit first; the word comes from [`Signals::wait_and_dispatch`]
//! (the thread blocks on the notification), [`Signals::poll_and_dispatch`]
//! (it does not), or from a server loop that has the notification bound to
//! its thread, so one `Recv` returns either an RPC or the signal word
//! (label `abi::LABEL_NOTIFICATION`; see
//! `session::Provider::serve_with_signals`): one thread, an "entrypoint",
//! serves both without polling.
//!
//! Semantics (the notification's): signals coalesce. Several signals on a
//! context before its handler runs run the handler once; a handler runs at
//! least once after every signal. A handler that needs counts keeps them
//! in shared memory (as the packet stream does with its indices). A bit set
//! by no registered context (a revoked one's late signal) is ignored and
//! counted ([`Signals::stray`]).
//!
//! Handlers get `&mut T`, the state the caller passes to `dispatch`: a
//! server's session table, a client's main state; this keeps handlers
//! plain closures without shared ownership.
//!
//! A component that only holds a notification read-only (a server made it
//! and kept the badged write capabilities) attaches handlers to the bits
//! the server documents with [`Signals::on`].
//!
//! Invariant: `minted[b]` is the slot of the one capability this `Signals`
//! minted with badge `1 << b` while bit `b` is used by a context of
//! [`Signals::register`] (further copies derive from it, so
//! [`Signals::unregister`]'s revoke reaches them all), and `NOT_MINTED`
//! otherwise.

use alloc::boxed::Box;
use core::fmt;

use abi::{CapSlot, Error, Rights};
use ucore::signal::{ContextError, Contexts};

use crate::syscall;

pub use ucore::signal::MAX_CONTEXTS;

/// `minted` of a bit without a capability of ours (slot 0 is never a
/// capability: the null slot).
const NOT_MINTED: CapSlot = abi::caddr::NULL_SLOT;

/// Signal contexts on one notification, with their handlers.
pub struct Signals<T> {
    notification: CapSlot,
    contexts: Contexts<T>,
    /// Where each context's capability was minted.
    minted: [CapSlot; MAX_CONTEXTS],
}

/// The signaller's side of one context: a write-only capability to the
/// notification, badged with the context's bit. Give it to whoever may
/// trigger the handler (in a reply, `transfer::set_send_cap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalContext {
    /// The capability (signal it with `syscall::signal`).
    pub cap: CapSlot,
    /// The context's bit in the notification word.
    pub bit: u32,
}

impl SignalContext {
    /// Triggers the context's handler (from the holder of the capability).
    pub fn signal(&self) -> Result<(), Error> {
        syscall::signal(self.cap)
    }
}

/// Why [`Signals::register`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalError {
    /// All 64 bits have contexts.
    Full,
    /// Minting the context's capability failed (an occupied slot, a
    /// notification capability without the right to mint write copies).
    Mint(Error),
}

impl fmt::Display for SignalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignalError::Full => write!(f, "all {MAX_CONTEXTS} signal contexts are in use"),
            SignalError::Mint(e) => write!(f, "minting the context's capability failed: {e}"),
        }
    }
}

impl<T> Signals<T> {
    /// Contexts on `notification`, a notification capability of the
    /// caller's: with all rights to [`Self::register`] contexts, read-only
    /// to attach handlers with [`Self::on`].
    pub fn new(notification: CapSlot) -> Self {
        Signals {
            notification,
            contexts: Contexts::default(),
            minted: [NOT_MINTED; MAX_CONTEXTS],
        }
    }

    /// The notification (to bind it to a thread).
    pub fn notification(&self) -> CapSlot {
        self.notification
    }

    /// A new context running `handler`: the lowest free bit, its
    /// capability minted write-only into the empty slot `slot`.
    pub fn register(
        &mut self,
        slot: CapSlot,
        handler: impl FnMut(&mut T) + 'static,
    ) -> Result<SignalContext, SignalError> {
        let bit = self.contexts.free_bit().map_err(|_| SignalError::Full)?;
        syscall::cap_mint(self.notification, slot, Rights::WRITE, 1 << bit)
            .map_err(SignalError::Mint)?;
        // Cannot fail: the bit was free and is below 64.
        let _ = self.contexts.insert(bit, Box::new(handler));
        self.minted[bit as usize] = slot;
        Ok(SignalContext { cap: slot, bit })
    }

    /// Runs `handler` for bit `bit`, which somebody else's capability
    /// sets: for a notification this component only holds read-only (a
    /// server made it and badged its own write capability). Replaces the
    /// bit's handler if [`Self::on`] gave it one; `Err(InvalidArgument)`
    /// for a bit of a context [`Self::register`] made, or above 63.
    pub fn on(&mut self, bit: u32, handler: impl FnMut(&mut T) + 'static) -> Result<(), Error> {
        if bit as usize >= MAX_CONTEXTS || self.minted[bit as usize] != NOT_MINTED {
            return Err(Error::InvalidArgument);
        }
        let _ = self.contexts.remove(bit);
        self.contexts
            .insert(bit, Box::new(handler))
            .map_err(|_: ContextError| Error::InvalidArgument)
    }

    /// Removes `context`: revokes every copy of its capability (no one can
    /// signal it any more), deletes the minted one and frees its bit. A
    /// signal already in the word is ignored as stray.
    pub fn unregister(&mut self, context: SignalContext) -> Result<(), Error> {
        let bit = context.bit as usize;
        if bit >= MAX_CONTEXTS || context.cap == NOT_MINTED || self.minted[bit] != context.cap {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: a notification capability: nothing is mapped through it.
        unsafe {
            syscall::cap_revoke(context.cap)?;
            syscall::cap_delete(context.cap)?;
        }
        let _ = self.contexts.remove(context.bit);
        self.minted[bit] = NOT_MINTED;
        Ok(())
    }

    /// Runs the handler of each set bit of `word`, lowest first, with
    /// `state`; returns how many ran.
    pub fn dispatch(&mut self, word: u64, state: &mut T) -> u32 {
        self.contexts.dispatch(word, state)
    }

    /// Blocks until a signal arrives, then dispatches it.
    pub fn wait_and_dispatch(&mut self, state: &mut T) -> Result<u32, Error> {
        let word = syscall::wait(self.notification)?;
        Ok(self.dispatch(word, state))
    }

    /// Dispatches what has arrived, without blocking (0 if nothing).
    pub fn poll_and_dispatch(&mut self, state: &mut T) -> Result<u32, Error> {
        let word = syscall::poll(self.notification)?;
        Ok(self.dispatch(word, state))
    }

    /// Bits that arrived with no context registered for them.
    pub fn stray(&self) -> u64 {
        self.contexts.stray()
    }
}
