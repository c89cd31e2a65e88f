//! Capability transfer through the main thread's IPC buffer: the slot a
//! reply or send carries a capability from ([`set_send_cap`]) and a call
//! that receives one ([`call_for_cap`]). For the main thread only — a
//! helper thread has an IPC buffer of its own.

use abi::ipc_buffer::{RECV_SLOT_OFFSET, SEND_CAP_OFFSET};
use abi::{CapSlot, Error, MsgInfo, MAIN_IPC_BUFFER_ADDR};

use crate::syscall::{self, Words};

/// Writes a word of the main thread's IPC buffer.
fn set_field(offset: u64, value: u64) {
    let field = (MAIN_IPC_BUFFER_ADDR + offset) as *mut u64;
    // SAFETY: root maps the main thread's IPC buffer page writable for the
    // whole run (`interfaces::child`), and the runtime lends it to nobody; the
    // kernel reads these fields during the main thread's own system calls
    // only, and a volatile write keeps the store where it is written.
    unsafe { field.write_volatile(value) };
}

/// Makes the main thread's next message that names a capability
/// (`MsgInfo` with `caps` = 1: a reply, say) carry `cap`.
pub fn set_send_cap(cap: CapSlot) {
    set_field(SEND_CAP_OFFSET, cap);
}

/// Makes the main thread's receives (and the replies to its calls) put a
/// capability a message carries into `slot` (`abi::caddr::NULL_SLOT`:
/// accept none).
pub fn set_recv_slot(slot: CapSlot) {
    set_field(RECV_SLOT_OFFSET, slot);
}

/// Calls endpoint `ep` with `info` and `words`, receiving a capability the
/// reply carries into the empty slot `slot`; returns the reply. The
/// receive slot is cleared again afterwards, so a later call cannot fill a
/// slot by surprise.
pub fn call_for_cap(
    ep: CapSlot,
    info: MsgInfo,
    words: Words,
    slot: CapSlot,
) -> Result<(MsgInfo, Words), Error> {
    set_recv_slot(slot);
    let result = syscall::call(ep, info, words);
    set_recv_slot(abi::caddr::NULL_SLOT);
    result
}
