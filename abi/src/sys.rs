//! System-call numbers (the value in `rax`).
//!
//! Numbers are stable once published; new calls get new numbers. Decode
//! with [`Sys::from_raw`], which rejects unknown numbers.

macro_rules! syscalls {
    ($($(#[$doc:meta])* $name:ident = $value:expr,)*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u64)]
        pub enum Sys {
            $($(#[$doc])* $name = $value,)*
        }

        impl Sys {
            /// Every system call, in number order.
            pub const ALL: &'static [Sys] = &[$(Sys::$name,)*];

            pub const fn from_raw(raw: u64) -> Option<Sys> {
                match raw {
                    $($value => Some(Sys::$name),)*
                    _ => None,
                }
            }

            pub const fn name(self) -> &'static str {
                match self {
                    $(Sys::$name => stringify!($name),)*
                }
            }
        }
    };
}

syscalls! {
    /// Does nothing; measures the syscall path. No arguments, no results.
    Null = 0,
    /// Writes `len` (arg 1, at most 4096) bytes at user address arg 0 to the
    /// kernel console. A debugging aid until the LOG service exists.
    DebugWrite = 1,
    /// Gives up the rest of the timeslice.
    Yield = 2,
    /// Ends the calling thread. Arg 0: exit code (reported by the kernel).
    ThreadExit = 3,
    /// IPC: blocking send on endpoint arg 0.
    Send = 4,
    /// IPC: send if a receiver waits, else fail with `WouldBlock`.
    NbSend = 5,
    /// IPC: blocking receive on endpoint arg 0.
    Recv = 6,
    /// IPC: receive if a sender waits, else fail with `WouldBlock`.
    NbRecv = 7,
    /// IPC: send on endpoint arg 0 and wait for the reply.
    Call = 8,
    /// IPC: reply to the current caller.
    Reply = 9,
    /// IPC: reply to the current caller, then receive on endpoint arg 0.
    ReplyRecv = 10,
    /// Notification arg 0: OR the cap's badge into the word, wake a waiter.
    Signal = 11,
    /// Notification arg 0: wait until the word is non-zero, return and clear it.
    Wait = 12,
    /// Notification arg 0: return and clear the word without blocking.
    Poll = 13,
    /// Copy cap arg 0 to empty slot arg 1 (same rights, same badge).
    CapCopy = 14,
    /// Derive from cap arg 0 into empty slot arg 1 with rights arg 2 (a
    /// subset) and badge arg 3 (endpoints and notifications).
    CapMint = 15,
    /// Empty slot arg 0.
    CapDelete = 16,
    /// Delete every capability derived from the cap in slot arg 0.
    CapRevoke = 17,
    /// Create objects from untyped memory: untyped arg 0, object type arg 1,
    /// size bits arg 2 (for sized types), first destination slot arg 3,
    /// count arg 4.
    Retype = 18,
    /// Map frame arg 1 into address space arg 0 at address arg 2 with the
    /// attribute word arg 3 ([`crate::map`]); page tables come from the
    /// address space's own pool.
    Map = 19,
    /// Unmap the mapping made with frame capability arg 0.
    Unmap = 20,
    /// Configure thread arg 0: cspace arg 1, vspace arg 2, IPC buffer
    /// address arg 3, fault endpoint arg 4.
    ThreadConfigure = 21,
    /// Set thread arg 0's priority (arg 1), CPU (arg 2) and CPU set (arg 3,
    /// a [`crate::cpu::CpuSet`]; 0: the caller's own).
    ThreadSetSchedParams = 22,
    /// Start configured, inactive (new, suspended or exited) thread arg 0
    /// at instruction pointer arg 1 with stack pointer arg 2 and `rdi` =
    /// arg 3.
    ThreadStart = 23,
    /// Stop thread arg 0 until `ThreadResume`.
    ThreadSuspend = 24,
    /// Continue suspended thread arg 0.
    ThreadResume = 25,
    /// Read (arg 1 = 0) or write (arg 1 = 1) the registers of thread arg 0
    /// (not the caller) through the caller's IPC buffer.
    ThreadRegisters = 26,
    /// Bind IRQ handler cap arg 0 to notification arg 1.
    IrqBind = 27,
    /// Acknowledge the interrupt of IRQ handler cap arg 0 (unmask its
    /// line). For an MSI handler (`MsiAlloc`) nothing is masked; result 0
    /// is the index of the CPU its last interrupt arrived at, result 1 the
    /// TSC when the kernel took it.
    IrqAck = 28,
    /// I/O port cap arg 0: read (arg 2 = 0) or write (arg 2 = 1) port arg 1
    /// with width arg 3 (1, 2, 4 bytes) and value arg 4.
    IoPort = 29,
    /// Bind notification arg 1 to thread arg 0 (so `Recv` also returns
    /// notification signals).
    BindNotification = 30,
    /// Move the caller's pending reply (the call or fault it received last
    /// and has not answered) into empty slot arg 0 as a reply capability
    /// (`ObjectType::Reply`); the caller is free to receive other calls.
    SaveReply = 31,
    /// Answer through reply capability arg 0 with the message in the
    /// registers (as `Reply`: info arg 1, words in arg 2..); the capability
    /// is used up (its slot is empty after).
    ReplyTo = 32,
    /// The caller's CPU set ([`crate::cpu::CpuSet`]) in result 0: the CPUs
    /// it may place threads on. No arguments.
    CpuSet = 33,
    /// Device control cap arg 0 ([`crate::ObjectType::DeviceControl`]):
    /// make an IRQ handler for a fresh MSI vector aimed at CPU arg 2 in
    /// empty slot arg 1. Result 0: the MSI address, result 1: the MSI data
    /// to program into the device (MSI capability or MSI-X table entry).
    MsiAlloc = 34,
    /// Device control cap arg 0: the physical (bus) address of frame or
    /// untyped cap arg 1 in result 0, log2 of its size in result 1, 1 in
    /// result 2 for device memory (0 for RAM; frames always 0). For the
    /// device control capability itself: the PCI configuration window
    /// (ECAM) of the ACPI MCFG (`InvalidState` without one).
    PhysAddress = 35,
    /// Records a marker in the kernel trace (docs/profiling.md): label
    /// bytes in args 0..2 (24 bytes, little-endian, NUL-padded), a value
    /// in arg 3. Succeeds and does nothing in a kernel built without the
    /// `trace` feature.
    TraceMark = 36,
    /// Names thread arg 0 in the kernel trace: name bytes in args 1..4 (32
    /// bytes, little-endian, NUL-padded, UTF-8). The capability is checked
    /// in every kernel; only a `trace` kernel keeps the name.
    TraceName = 37,
    /// The CPU time of thread arg 0 (a capability with `READ`): result 0
    /// the timer ticks it was found running at — each tick of a CPU's
    /// timer is charged to the user thread it interrupts, so the figure is
    /// sampled, at the tick's resolution, as Linux's tick-based `utime` —
    /// and result 1 the ticks per second.
    ThreadCpuTime = 38,
    /// What is in use of the object behind slot arg 0 (any capability to
    /// it). Untyped memory: result 0 the bytes of it no longer free to
    /// retype — the watermarks of it and of every untyped split from it,
    /// less the split-off untypeds' own sizes, so objects, their
    /// alignment gaps and memory of objects deleted while others remain
    /// count — and result 1 its size. A capability table: result 0 its
    /// full slots, result 1 its slots (slot 0, the table's header, is not
    /// one). Another kind: `WrongObjectType`.
    /// Linear in the untyped's derivation subtree or the table's slots.
    Usage = 39,
    /// Runs virtual CPU arg 0 (`WRITE`) in guest space arg 1 (`WRITE`)
    /// until the next exit: flags arg 2 ([`crate::vcpu::load`]) say which
    /// parts of the state block in the caller's IPC buffer to load first;
    /// the exit's state block comes back there, result 0 the exit code,
    /// result 1 and 2 exit info 1 and 2 ([`crate::vcpu`]).
    VcpuRun = 40,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_unknown_is_rejected() {
        for (i, s) in Sys::ALL.iter().enumerate() {
            assert_eq!(*s as u64, i as u64, "numbers are dense and in order");
            assert_eq!(Sys::from_raw(*s as u64), Some(*s));
        }
        assert_eq!(Sys::from_raw(Sys::ALL.len() as u64), None);
        assert_eq!(Sys::from_raw(u64::MAX), None);
    }
}
