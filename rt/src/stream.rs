//! Packet streams between components (`ucore::packet_stream`, whose module
//! doc is the protocol) on Pecan notifications: each side waits on a
//! notification of its own and signals the peer's. A `Signal` before the
//! `Wait` is kept in the notification's word, which is what the protocol's
//! flag handshake relies on to lose no wake-up.

use abi::CapSlot;
pub use ucore::packet_stream::*;

use crate::syscall;

/// The [`Notify`] of a stream end: `peer` is the peer's notification
/// (write right: signal it), `own` this side's (read right: wait on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notifications {
    /// The peer's notification: signalled.
    pub peer: CapSlot,
    /// This side's notification: waited on.
    pub own: CapSlot,
}

impl Notifications {
    /// Clears signals left over from an earlier stream, so that they do
    /// not wake this side for nothing.
    pub fn drain(&self) -> Result<(), abi::Error> {
        syscall::poll(self.own).map(drop)
    }
}

impl Notify for Notifications {
    fn signal_peer(&mut self) -> Result<(), abi::Error> {
        syscall::signal(self.peer)
    }

    /// `Aborted` when the word carries the parent's
    /// `interfaces::session::PROVIDER_GONE`: the peer is a provider that
    /// stopped, and nothing will signal this side again.
    fn wait(&mut self) -> Result<(), abi::Error> {
        let word = syscall::wait(self.own)?;
        if word & interfaces::session::PROVIDER_GONE != 0 {
            return Err(abi::Error::Aborted);
        }
        Ok(())
    }
}
