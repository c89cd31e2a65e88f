//! Helper threads: started in the test's own address space and capability
//! space, each on its own stack (helper `h` at [`stack_top`]) with, when it
//! needs one, its own IPC buffer ([`ipc_buffer`]); reporting through
//! [`REC`] and their exit code.
//!
//! A helper's fault endpoint is the main thread's fault endpoint badged
//! `h + 1`, so [`wait_exit`] knows whose exit (or fault) arrived.

use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::fault::{LABEL_EXCEPTION, LABEL_EXIT, LABEL_PAGE_FAULT};
use rt::abi::map::{MapAttr, WRITABLE};
use rt::abi::{CapSlot, ObjectType, Rights, Sys, MAIN_IPC_BUFFER_ADDR};
use rt::syscall;

use crate::{
    sys, sys2, Test, CSPACE, HELPERS, IPC_VA, STACKS_VA, STACK_PAGES, STACK_STRIDE, VSPACE,
};

/// Values helpers report (what each index means is up to the check).
pub static REC: [AtomicU64; 16] = [const { AtomicU64::new(0) }; 16];

/// Reads `REC[i]`.
pub fn rec(i: usize) -> u64 {
    REC[i].load(Ordering::SeqCst)
}

/// Sets `REC[i]`.
pub fn set_rec(i: usize, v: u64) {
    REC[i].store(v, Ordering::SeqCst);
}

/// Clears every `REC` entry.
pub fn clear_rec() {
    for r in &REC {
        r.store(0, Ordering::SeqCst);
    }
}

/// The top of helper `h`'s stack (16-byte aligned).
pub fn stack_top(h: usize) -> u64 {
    STACKS_VA + h as u64 * STACK_STRIDE + STACK_PAGES * 4096
}

/// Helper `h`'s IPC buffer.
pub fn ipc_buffer(h: usize) -> u64 {
    IPC_VA + h as u64 * 0x2000
}

/// The main thread's IPC buffer.
pub const MAIN_BUFFER: u64 = MAIN_IPC_BUFFER_ADDR;

/// Reads word `i` (in `u64`s) of the IPC buffer at `buffer`.
pub fn buf_read(buffer: u64, i: usize) -> u64 {
    // SAFETY: `buffer` is an IPC buffer page mapped writable for the whole
    // run (the main one by root, the helpers' by `prepare`); `i` < 512
    // keeps the access inside it. Volatile: the kernel writes it too.
    unsafe { ((buffer + 8 * i as u64) as *const u64).read_volatile() }
}

/// Writes word `i` of the IPC buffer at `buffer`.
pub fn buf_write(buffer: u64, i: usize, value: u64) {
    debug_assert!(i < 512);
    // SAFETY: as in `buf_read`.
    unsafe { ((buffer + 8 * i as u64) as *mut u64).write_volatile(value) }
}

/// Index of the send-capability field of the IPC buffer, in words.
pub const SEND_CAP: usize = (rt::abi::ipc_buffer::SEND_CAP_OFFSET / 8) as usize;
/// Index of the receive-slot field, in words.
pub const RECV_SLOT: usize = (rt::abi::ipc_buffer::RECV_SLOT_OFFSET / 8) as usize;

/// Maps a fresh frame at `vaddr` (writable) in the own address space.
pub fn map_new_frame(t: &mut Test, vaddr: u64) -> CapSlot {
    let frame = t.make(ObjectType::Frame4K, 0);
    let attr = MapAttr::from_raw(WRITABLE).expect("valid").raw();
    t.setup("map", sys(Sys::Map, [VSPACE, frame, vaddr, attr, 0, 0]));
    frame
}

/// Makes the fault endpoint and maps the helpers' stacks and IPC buffers.
pub fn prepare(t: &mut Test) {
    t.fault_ep = t.make(ObjectType::Endpoint, 0);
    for h in 0..HELPERS {
        t.fault_caps[h] = t.mint(t.fault_ep, Rights::WRITE, h as u64 + 1);
        for page in 0..STACK_PAGES {
            map_new_frame(t, stack_top(h) - (page + 1) * 4096);
        }
        t.buffer_frames[h] = map_new_frame(t, ipc_buffer(h));
    }
}

/// How to start a helper.
pub struct Spawn {
    pub entry: extern "C" fn(u64) -> !,
    pub arg: u64,
    pub ipc_buffer: bool,
    pub priority: u8,
}

impl Spawn {
    /// A helper at the children's priority with an IPC buffer.
    pub fn new(entry: extern "C" fn(u64) -> !, arg: u64) -> Spawn {
        Spawn {
            entry,
            arg,
            ipc_buffer: true,
            priority: rt::interfaces::child::PRIORITY,
        }
    }
}

/// Makes, configures and starts helper `h`; returns its thread capability.
pub fn spawn(t: &mut Test, h: usize, s: Spawn) -> CapSlot {
    let thread = t.make(ObjectType::Thread, 0);
    let buffer = if s.ipc_buffer { ipc_buffer(h) } else { 0 };
    let configure = sys(
        Sys::ThreadConfigure,
        [thread, CSPACE, VSPACE, buffer, t.fault_caps[h], 0],
    );
    t.setup("configure helper", configure);
    let sched = sys(
        Sys::ThreadSetSchedParams,
        [thread, u64::from(s.priority), 0, 0, 0, 0],
    );
    t.setup("helper priority", sched);
    // SysV: at function entry rsp + 8 is 16-byte aligned (as after a call).
    let rsp = stack_top(h) - 8;
    let start = sys(
        Sys::ThreadStart,
        [thread, s.entry as *const () as u64, rsp, s.arg, 0, 0],
    );
    t.setup("start helper", start);
    thread
}

/// What arrived on the fault endpoint.
pub enum Report {
    /// The helper exited with this code.
    Exit(u64),
    /// The helper faulted: label, words.
    Fault(u64, [u64; 4]),
}

/// Receives the next message on the fault endpoint, which must come from
/// helper `h`; `None` (after a failed check) for anything else.
pub fn next_report(t: &mut Test, h: usize) -> Option<Report> {
    let (badge, info, words) = match syscall::recv(t.fault_ep) {
        Ok(m) => m,
        Err(e) => {
            t.setup::<()>("receive on the fault endpoint", Err(e.raw()));
            return None;
        }
    };
    if badge != h as u64 + 1 {
        t.holds(
            Sys::Recv,
            "fault-endpoint-badge",
            false,
            "the helper's badge",
            badge,
        );
        return None;
    }
    match info.label() {
        LABEL_EXIT => Some(Report::Exit(words[0])),
        LABEL_PAGE_FAULT | LABEL_EXCEPTION => Some(Report::Fault(info.label(), words)),
        other => {
            t.holds(
                Sys::Recv,
                "fault-endpoint-label",
                false,
                "an exit or fault label",
                other,
            );
            None
        }
    }
}

/// Waits for helper `h` to exit; returns its exit code. A fault instead
/// is a failed check (the helper is then left stopped).
pub fn wait_exit(t: &mut Test, h: usize) -> Option<u64> {
    match next_report(t, h)? {
        Report::Exit(code) => Some(code),
        Report::Fault(label, w) => {
            rt::println!(
                "test-syscalls: helper {h} faulted: label {label:#x} address {:#x} ip {:#x} code {:#x}",
                w[0],
                w[1],
                w[2]
            );
            t.holds(Sys::ThreadExit, "helper-exit", false, "an exit", label);
            None
        }
    }
}

/// Yields `n` times (lets helpers of the same priority run).
pub fn yields(n: u32) {
    for _ in 0..n {
        let _ = syscall::yield_now();
    }
}

/// Deletes a capability, as a set-up step.
pub fn delete(t: &mut Test, slot: CapSlot) {
    t.setup("delete", sys2(Sys::CapDelete, slot, 0));
}

/// Ends a helper thread with `code` (a helper must not return).
pub fn exit(code: u64) -> ! {
    syscall::thread_exit(code as i32)
}
