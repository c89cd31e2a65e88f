//! System calls: decode, then perform.
//!
//! [`decode`] reads the caller's registers, checks every argument and
//! returns an [`Invocation`] or an error — with no side effects, so a bad
//! call changes nothing. [`perform`] then acts and cannot fail on argument
//! grounds. (seL4's `decodeX`/`invokeX` split.) Results go back in the
//! caller's saved registers per the convention in the `abi` crate.

use abi::{Error, Sys};

use crate::arch::trap::TrapFrame;
use crate::thread::{self, ThreadRef};
use crate::uaccess::UserSlice;

/// Most bytes one `DebugWrite` may print.
pub const DEBUG_WRITE_MAX: u64 = 4096;

/// A checked system call, ready to perform.
#[derive(Debug)]
pub enum Invocation {
    Null,
    DebugWrite(UserSlice),
    Yield,
    ThreadExit(u64),
}

/// What happens to the calling thread after the call.
enum Outcome {
    /// Return to the caller with `rax` = 0 (and any results written).
    Resume,
    /// The caller gave up the CPU but stays runnable.
    Yield,
    /// The caller is gone.
    Exited,
}

pub fn decode(frame: &TrapFrame) -> Result<Invocation, Error> {
    let sys = Sys::from_raw(frame.rax).ok_or(Error::UnknownSyscall)?;
    match sys {
        Sys::Null => Ok(Invocation::Null),
        Sys::DebugWrite => {
            if frame.rsi > DEBUG_WRITE_MAX {
                return Err(Error::InvalidArgument);
            }
            Ok(Invocation::DebugWrite(UserSlice::new(
                frame.rdi, frame.rsi,
            )?))
        }
        Sys::Yield => Ok(Invocation::Yield),
        Sys::ThreadExit => Ok(Invocation::ThreadExit(frame.rdi)),
        // Not implemented yet: reported as unknown rather than silently
        // accepted.
        _ => Err(Error::UnknownSyscall),
    }
}

fn perform(invocation: Invocation, caller: ThreadRef) -> Result<Outcome, Error> {
    // SAFETY: interrupts are disabled; caller is this CPU's current thread.
    let thread = unsafe { caller.get() };
    match invocation {
        Invocation::Null => Ok(Outcome::Resume),
        Invocation::DebugWrite(slice) => {
            let mut buffer = [0u8; DEBUG_WRITE_MAX as usize];
            let bytes = &mut buffer[..slice.len() as usize];
            slice.copy_in(thread.address_space, bytes)?;
            crate::console::write_bytes(bytes);
            Ok(Outcome::Resume)
        }
        Invocation::Yield => Ok(Outcome::Yield),
        Invocation::ThreadExit(code) => {
            crate::kprintln!(
                "kernel: thread '{}' (id {}) exited with code {code}",
                thread.name(),
                thread.id
            );
            thread::kill(caller);
            Ok(Outcome::Exited)
        }
    }
}

/// Entry from `syscall_entry` on this CPU's kernel stack; `frame` is the
/// caller's saved context (inside its Thread).
#[unsafe(no_mangle)]
extern "C" fn syscall_from_user(frame: &mut TrapFrame) -> ! {
    let Some(caller) = thread::current() else {
        panic!("system call with no current thread");
    };
    let result = decode(frame).and_then(|invocation| perform(invocation, caller));
    match result {
        Ok(Outcome::Resume) => {
            frame.rax = 0;
            thread::resume(caller)
        }
        Ok(Outcome::Yield) => {
            frame.rax = 0;
            thread::requeue(caller);
            thread::schedule()
        }
        Ok(Outcome::Exited) => thread::schedule(),
        Err(e) => {
            frame.rax = e.raw();
            thread::resume(caller)
        }
    }
}
