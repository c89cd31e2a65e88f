//! Fault messages: what the kernel sends to a thread's fault endpoint when
//! the thread faults. The message's badge is the fault-endpoint capability's
//! badge (so the handler knows which thread faulted); the label says what
//! kind of fault; the words say where. The handler replies (empty message)
//! to resume the thread, which retries the faulting instruction, or does not
//! reply and stops/deletes the thread. Exits are reported the same way
//! ([`LABEL_EXIT`]).

/// Labels from here up are the kernel's (fault, exception, exit and
/// notification messages): a protocol between components keeps its labels
/// below, and a server never replies to one of these (a fault's sender
/// then stays stopped).
pub const KERNEL_LABELS: u64 = 0xffff_ffff_0000;
const _: () = assert!(LABEL_PAGE_FAULT >= KERNEL_LABELS && LABEL_EXCEPTION >= KERNEL_LABELS);
const _: () = assert!(LABEL_EXIT >= KERNEL_LABELS && crate::LABEL_NOTIFICATION >= KERNEL_LABELS);

/// Labels of fault messages (top of the label space, away from protocols).
pub const LABEL_PAGE_FAULT: u64 = 0xffff_ffff_0001;
/// Any other CPU exception (invalid opcode, #GP, divide error, ...).
pub const LABEL_EXCEPTION: u64 = 0xffff_ffff_0002;
/// The thread called `ThreadExit`: word 0 is its exit code. Not a fault,
/// but reported the same way so a parent learns of it; the thread is gone
/// and must not be replied to (a reply finds no caller).
pub const LABEL_EXIT: u64 = 0xffff_ffff_0003;

/// Word indices in a fault message (all in registers: 4 words).
pub const WORD_ADDRESS: usize = 0; // page faults: the faulting address (CR2)
pub const WORD_IP: usize = 1; // instruction pointer of the faulting instruction
pub const WORD_CODE: usize = 2; // page faults: the CPU error code; exceptions: the vector
pub const WORD_DETAIL: usize = 3; // exceptions: the CPU error code; page faults: 0
