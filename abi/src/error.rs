//! Error codes returned in `rax`. 0 means success. A bad argument is always
//! an error value to the caller (or, for an unreadable user pointer in a
//! place the kernel must read, an error too) — never a kernel panic.

use core::fmt;

macro_rules! errors {
    ($($(#[$doc:meta])* $name:ident = $value:expr => $text:expr,)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u64)]
        pub enum Error {
            $($(#[$doc])* $name = $value,)*
        }

        impl Error {
            pub const ALL: &'static [Error] = &[$(Error::$name,)*];

            /// Decodes a non-zero `rax`; `None` for 0 (success) or an
            /// unknown code.
            pub const fn from_raw(raw: u64) -> Option<Error> {
                match raw {
                    $($value => Some(Error::$name),)*
                    _ => None,
                }
            }

            pub const fn text(self) -> &'static str {
                match self {
                    $(Error::$name => $text,)*
                }
            }
        }
    };
}

errors! {
    /// `rax` held no known system-call number.
    UnknownSyscall = 1 => "unknown system call",
    /// A capability slot index is outside the caller's capability space.
    InvalidSlot = 2 => "capability slot out of range",
    /// The named slot holds no capability.
    EmptySlot = 3 => "capability slot is empty",
    /// The destination slot is already in use.
    SlotOccupied = 4 => "destination slot is occupied",
    /// The capability names an object of the wrong type for this call.
    WrongObjectType = 5 => "wrong object type",
    /// The capability lacks a right the call needs.
    MissingRights = 6 => "capability lacks the required rights",
    /// An argument is out of range or malformed.
    InvalidArgument = 7 => "invalid argument",
    /// A user pointer/length does not name readable (or writable) user memory.
    BadAddress = 8 => "bad user address",
    /// The untyped memory cannot hold the requested objects.
    OutOfMemory = 9 => "not enough untyped memory",
    /// A non-blocking operation would have had to wait.
    WouldBlock = 10 => "operation would block",
    /// A virtual address is already mapped.
    AlreadyMapped = 11 => "address already mapped",
    /// Nothing is mapped there (or the frame is not mapped).
    NotMapped = 12 => "not mapped",
    /// `Reply` without a caller waiting for a reply.
    NoCaller = 13 => "no caller to reply to",
    /// The object is in a state that does not allow the operation (e.g.
    /// starting an unconfigured thread, retyping untyped memory in use).
    InvalidState = 14 => "object in the wrong state",
    /// The partner of an IPC was deleted or its endpoint revoked while waiting.
    Aborted = 15 => "operation aborted",
    /// The machine lacks what the call needs (e.g. a virtual CPU on a
    /// CPU without AMD SVM).
    Unsupported = 16 => "not supported by this machine",
}

impl Error {
    pub const fn raw(self) -> u64 {
        self as u64
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.text())
    }
}

impl core::error::Error for Error {}

/// Turns a raw `rax` into a `Result`; an unknown non-zero code becomes
/// `InvalidArgument` rather than a silent success.
pub const fn result_from_raw(raw: u64) -> Result<(), Error> {
    if raw == 0 {
        return Ok(());
    }
    match Error::from_raw(raw) {
        Some(e) => Err(e),
        None => Err(Error::InvalidArgument),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for e in Error::ALL {
            assert_ne!(e.raw(), 0);
            assert_eq!(Error::from_raw(e.raw()), Some(*e));
            assert_eq!(result_from_raw(e.raw()), Err(*e));
        }
        assert_eq!(result_from_raw(0), Ok(()));
        assert_eq!(result_from_raw(9999), Err(Error::InvalidArgument));
    }
}
