//! The `syscall` entry (`syscall_entry.s`): the lean general path and the
//! IPC fast path for `Call` and `ReplyRecv`, in assembly.
//!
//! # The general path
//!
//! `syscall_entry` stores into the calling thread's frame (found through
//! `PerCpu::current`: the frame is the first thing in a `Thread`) only what
//! the Rust code may read or change: the argument and result registers
//! `rax, rdi, rsi, rdx, r10, r8, r9` and the user `rip` (rcx) and `rflags`
//! (r11). The user `rsp` waits in `PerCpu::scratch`; the callee-saved
//! registers stay in the CPU (the Rust code preserves them).
//! `syscall_from_user` returns the caller's new `rax` — the entry reloads
//! the other result registers from the frame and `sysretq`s — or [`SWITCH`]
//! when the caller stops running: then the entry completes the frame
//! (callee-saved registers, `rsp`) and calls `syscall_continue`.
//!
//! **Invariant: every thread that is not running has a complete frame**, so
//! the kernel never reads or writes the *running caller's* callee-saved
//! registers or `rsp` (`ThreadRegisters` on oneself is refused). **A running
//! thread's frame has `vector` = [`VECTOR_SYSCALL`]** (`return_to_user`
//! writes it when it resumes a thread with `iretq`; interrupts overwrite it
//! with their vector), so a frame the syscall path completes is marked for
//! `sysretq` without a store.
//!
//! # One CPU or several
//!
//! The entry and both fast paths are assembled three times (`SE_BODY`):
//! `syscall_entry` for a machine with one CPU online; for several,
//! `syscall_fast_*_reader`, the fast paths without the big kernel lock,
//! entered through this CPU's gate (`smp.rs`, "Same-CPU IPC without the
//! lock"), and `syscall_entry_locked_body`, which opens the gates and
//! releases the lock before each `sysretq`, behind `syscall_entry_locked`,
//! which tries the reader first for `Call` and `ReplyRecv`, else takes
//! the lock in a few instructions (and handles a caller that another CPU
//! destroyed, stopped or moved while it entered or ran). The boot picks
//! one for `LSTAR`, so one CPU pays nothing. The fast path's run-queue
//! check reads this CPU's queue GS-relative (`PerCpu::run_queue`).
//!
//! With the fast path off (kernel option `pecan.fastpath=off`, to compare
//! it with the general path: `percpu::disable_fast_path`) the boot picks
//! `syscall_entry_general` or `syscall_entry_locked_general` instead: the
//! same entries without the dispatch to the fast paths (the lock is taken
//! by the same code, `SE_TAKE_LOCK`, assembled once for each locked
//! entry). Nothing on the fast path tests for the option.
//!
//! # The fast path
//!
//! `Call` and `ReplyRecv` go to `syscall_fast_call` and
//! `syscall_fast_reply_recv` first: a straight run of checks on the
//! registers and the objects, each with a jump to the general path when it
//! fails (`syscall_slow_*` restores the registers first, so the general
//! path starts as if the fast path had not run), then the effects, then a
//! direct switch to the partner. The message stays in the registers the
//! whole time — `rsi, rdx, r10, r8, r9` arrive as they left, `rdi` becomes
//! the badge (0 for a reply) and `rax` 0 — so only the caller's `rip,
//! rflags, rsp` and callee-saved registers are stored and only the
//! partner's are loaded. The caller's result registers are not stored:
//! whoever ends its wait writes them (a message all seven, an abort `rax`),
//! so reading them with `ThreadRegisters` while it waits gives stale values
//! (docs/abi.md says so).
//!
//! `Call` is taken fast when all of these hold (else the general path does
//! the same the slow way, in `ipc::send`):
//! - the message is register-only without capabilities (`info & 0xffff`
//!   ≤ 4);
//! - `rdi` is an own-space slot address below the caller's capability
//!   table's size (a table capability's `extra` is its number of slots; slot
//!   0, the header, reads as empty: `TableHeader::NOT_A_CAPABILITY`), and
//!   the slot holds an endpoint capability with `WRITE`;
//! - the endpoint's queue holds receivers (state `Recv`, so it is not
//!   empty), and the first has no unanswered caller (the slow path would
//!   abort that call);
//! - that receiver has an address space, waits in a system call (its
//!   frame's `vector` is [`VECTOR_SYSCALL`]: not one written by
//!   `ThreadRegisters` or pushed by an interrupt, which need `iretq`), is on
//!   this CPU, and no runnable thread has a higher priority than it;
//! - no FPU state is live (`fpu.rs`): the caller, the one thread that could
//!   be live, has not used x87/SSE/AVX registers in this turn, so they hold
//!   the clean state with CR0.TS set and the receiver finds them so. The
//!   check costs nothing: `Thread::fpu_live` follows `Thread::cpu`, and the
//!   CPU check compares both fields of caller and receiver as one 64-bit
//!   word (the receiver's `fpu_live` is 0: it is not running). If the
//!   caller is live (and on the same CPU, with XSAVEOPT), the out-of-line
//!   `SE_RELEASE_FPU` does `fpu::release` in 15 instructions — `xsaveopt`
//!   into the caller's area, `xrstor` of the clean image, CR0.TS set, both
//!   marks cleared — and the fast path goes on.
//!
//! Effects: the receiver leaves the queue (the endpoint goes idle if it was
//! the last), caller and receiver are linked (`caller`/`reply_from`, an
//! ordinary reply), the caller is `BlockedReply`, the receiver `Running`
//! and this CPU's current thread (`PerCpu::current`, `TSS.rsp0`, CR3 only
//! when the address space differs).
//!
//! `ReplyRecv` is taken fast when the message is short, the server has a
//! caller that waits for an ordinary (not a fault) reply, the slot holds an
//! endpoint capability with `READ` whose queue holds no senders, the
//! server's bound notification (if any) has no bits set, and the caller
//! passes the same partner checks. Effects: the link is dissolved, the
//! server is appended to the endpoint's receivers (`BlockedRecv`), the
//! caller runs with the message.
//!
//! Per direction the fast path executes one `syscall`, one `sysretq`, two
//! `swapgs`, one CR3 read and, between address spaces only, one CR3 write;
//! in all 78 instructions for `Call`, 86 for `ReplyRecv`, `syscall`
//! included (docs/kernel.md has the measured costs). A caller that used its
//! vector registers in this turn adds one `xsaveopt`, one `xrstor`, one
//! CR0 read and one CR0 write (18 instructions in all).
//!
//! # What the assembly relies on
//!
//! Every offset and value it uses is a `const` operand computed here from
//! the Rust types (`core::mem::offset_of!`, enum discriminants), never a
//! literal. The layouts are `repr(C)` (`Thread`, `TrapFrame`, `Endpoint`,
//! `Notification`, `RunQueue`, `PerCpu`, `Tss`, `kcore::cap::Slot` and
//! `Capability`); the enums have pinned encodings (`State` and
//! `EndpointState` `repr(u8)`, `Queue` and `ObjectType` `repr(u64)`, all
//! with explicit discriminants); `Option<ThreadRef>` is a nullable pointer
//! (Rust guarantees it for `repr(transparent)` wrappers of `NonNull`); and
//! the compile-time checks below pin what Rust does not guarantee: that
//! `Option<Capability>` is a `Capability` with `None` encoded as a `kind`
//! no object type has, and the word layout of `Queue`.

use core::mem::{offset_of, size_of};

use abi::{ObjectType, Rights, Sys, REGISTER_MESSAGE_WORDS};
use kcore::cap::{Capability, Slot};

use super::gdt::{CpuTables, Tss};
use super::trap::{TrapFrame, VECTOR_SYSCALL};
use super::{fpu, percpu};
use crate::object::{Endpoint, EndpointState, Notification};
use crate::thread::{self, Queue, State, Thread, ThreadRef, UserContext};

// The fast path compares `cpu` and `fpu_live` as one 64-bit word.
const _: () = assert!(offset_of!(Thread, fpu_live) == offset_of!(Thread, cpu) + 4);

/// Size of a thread's saved context; `TSS.rsp0` is the running thread's
/// address plus this.
const CTX: usize = size_of::<UserContext>();
const _: () = assert!(offset_of!(Thread, context) == 0);
const _: () = assert!(CTX == size_of::<TrapFrame>());

/// A frame field's offset in the `Thread`.
macro_rules! frame {
    ($field:ident) => {
        offset_of!(Thread, context) + offset_of!(TrapFrame, $field)
    };
}

/// Offsets inside a capability slot (`Option<Capability>` is laid out as a
/// `Capability`: checked below).
const SLOT_CAP: usize = offset_of!(Slot, cap);
const CAP_KIND: usize = SLOT_CAP + offset_of!(Capability, kind);
const CAP_OBJECT: usize = SLOT_CAP + offset_of!(Capability, object);
const CAP_RIGHTS: usize = SLOT_CAP + offset_of!(Capability, rights);
const CAP_BADGE: usize = SLOT_CAP + offset_of!(Capability, badge);
const CAP_EXTRA: usize = SLOT_CAP + offset_of!(Capability, extra);
const _: () = assert!(size_of::<Rights>() == 1);
const _: () = assert!(size_of::<ObjectType>() == 8);
const _: () = assert!(1 << abi::object::SLOT_BYTES_BITS >= size_of::<Slot>());

// `Option<Capability>` has no layout guarantee: check that it is a plain
// `Capability` (same size, so the payload starts at 0) and that `None` puts
// a value into `kind` that no object type has, by reading the bytes of both
// variants at compile time. (Reading an uninitialised byte fails the build
// too.)
const _: () = {
    assert!(size_of::<Option<Capability>>() == size_of::<Capability>());
    let none: Option<Capability> = None;
    let some = Some(Capability {
        kind: ObjectType::Endpoint,
        object: 0x1234_5000,
        rights: Rights::WRITE,
        badge: 0x77,
        extra: 9,
    });
    let n = (&raw const none).cast::<u8>();
    let s = (&raw const some).cast::<u8>();
    // SAFETY: in-bounds reads of initialised, aligned words of local values
    // (the capability fields of `some`; the niche word of `none`).
    let (none_kind, kind, object, rights, badge) = unsafe {
        (
            *n.add(CAP_KIND - SLOT_CAP).cast::<u64>(),
            *s.add(CAP_KIND - SLOT_CAP).cast::<u64>(),
            *s.add(CAP_OBJECT - SLOT_CAP).cast::<u64>(),
            *s.add(CAP_RIGHTS - SLOT_CAP),
            *s.add(CAP_BADGE - SLOT_CAP).cast::<u64>(),
        )
    };
    assert!(ObjectType::from_raw(none_kind).is_none());
    assert!(kind == ObjectType::Endpoint as u64 && object == 0x1234_5000);
    assert!(rights as u64 == Rights::WRITE.raw() && badge == 0x77);
};

// `Queue` is `repr(u64)`: a tag word, then the payload. Checked the same way.
const QUEUE_PAYLOAD: usize = 8;
const _: () = {
    let object = Queue::Object(0xabc0);
    let none = Queue::None;
    let o = (&raw const object).cast::<u64>();
    // SAFETY: in-bounds reads of the initialised tag and payload words.
    let (tag, payload, none_tag) = unsafe {
        (
            *o,
            *o.add(QUEUE_PAYLOAD / 8),
            *(&raw const none).cast::<u64>(),
        )
    };
    assert!(tag == queue_tag(Queue::Object(0)) && payload == 0xabc0);
    assert!(none_tag == queue_tag(Queue::None));
    assert!(size_of::<Option<ThreadRef>>() == size_of::<u64>());
};

/// The discriminant of a `Queue` variant.
const fn queue_tag(q: Queue) -> u64 {
    match q {
        Queue::None => 0,
        Queue::Run => 1,
        Queue::Object(_) => 2,
    }
}

/// Where `TSS.rsp0` is, from the start of the CPU's tables.
const TSS_RSP0: usize = offset_of!(CpuTables, tss) + offset_of!(Tss, rsp);

/// `syscall_from_user`'s return value meaning "the caller stops running":
/// no error code and not 0.
pub const SWITCH: u64 = u64::MAX;
const _: () = assert!(abi::Error::from_raw(SWITCH).is_none());
// The reader entry adds the call number to the gate's `reader` byte
// (smp.rs): it must be non-zero and fit the byte.
const _: () = assert!(
    Sys::Call as u64 > 0
        && (Sys::Call as u64) < 256
        && Sys::ReplyRecv as u64 > 0
        && (Sys::ReplyRecv as u64) < 256
);

core::arch::global_asm!(
    include_str!("syscall_entry.s"),
    ctx = const CTX,
    f_rax = const frame!(rax),
    f_rbx = const frame!(rbx),
    f_rdx = const frame!(rdx),
    f_rcx = const frame!(rcx),
    f_r11 = const frame!(r11),
    f_rsi = const frame!(rsi),
    f_rdi = const frame!(rdi),
    f_rbp = const frame!(rbp),
    f_r8 = const frame!(r8),
    f_r9 = const frame!(r9),
    f_r10 = const frame!(r10),
    f_r12 = const frame!(r12),
    f_r13 = const frame!(r13),
    f_r14 = const frame!(r14),
    f_r15 = const frame!(r15),
    f_vector = const frame!(vector),
    f_rip = const frame!(rip),
    f_rflags = const frame!(rflags),
    f_rsp = const frame!(rsp),
    t_state = const offset_of!(Thread, state),
    t_priority = const offset_of!(Thread, priority),
    t_cpu = const offset_of!(Thread, cpu),
    t_fpu_live = const offset_of!(Thread, fpu_live),
    t_fpu = const offset_of!(Thread, fpu),
    pc_fpu_live = const percpu::OFFSET_FPU_LIVE,
    fpu_mode = sym fpu::MODE,
    mode_xsaveopt = const fpu::Mode::Xsaveopt as u8,
    fpu_clean = sym fpu::CLEAN,
    cr0_ts = const fpu::CR0_TS,
    t_next = const offset_of!(Thread, next),
    t_prev = const offset_of!(Thread, prev),
    t_queue = const offset_of!(Thread, queue),
    t_caller = const offset_of!(Thread, caller),
    t_reply_from = const offset_of!(Thread, reply_from),
    t_reply_is_fault = const offset_of!(Thread, reply_is_fault),
    t_bound_notification = const offset_of!(Thread, bound_notification),
    t_cspace_kind = const offset_of!(Thread, cspace) + CAP_KIND,
    t_cspace_object = const offset_of!(Thread, cspace) + CAP_OBJECT,
    t_cspace_extra = const offset_of!(Thread, cspace) + CAP_EXTRA,
    t_vspace_kind = const offset_of!(Thread, vspace) + CAP_KIND,
    t_vspace_object = const offset_of!(Thread, vspace) + CAP_OBJECT,
    s_kind = const CAP_KIND,
    s_object = const CAP_OBJECT,
    s_rights = const CAP_RIGHTS,
    s_badge = const CAP_BADGE,
    slot_bytes = const 1u64 << abi::object::SLOT_BYTES_BITS,
    ep_head = const offset_of!(Endpoint, queue) + offset_of!(thread::ThreadQueue, head),
    ep_tail = const offset_of!(Endpoint, queue) + offset_of!(thread::ThreadQueue, tail),
    ep_state = const offset_of!(Endpoint, state),
    ep_fast_cpu = const offset_of!(Endpoint, fast_cpu),
    n_word = const offset_of!(Notification, word),
    pc_run_queue = const percpu::OFFSET_RUN_QUEUE,
    bkl = sym crate::smp::BKL,
    bkl_serving = const crate::smp::BigLock::OFFSET_SERVING,
    bkl_next = const crate::smp::BigLock::OFFSET_NEXT,
    cpus = sym percpu::CPUS,
    percpu_stride = const percpu::STRIDE,
    online_count = sym crate::smp::ONLINE_COUNT,
    closed = const crate::smp::CLOSED,
    pc_gate = const percpu::OFFSET_GATE,
    pc_gate_closed = const percpu::OFFSET_GATE_CLOSED,
    pc_recheck = const percpu::OFFSET_RECHECK,
    pc_cpu_id = const percpu::OFFSET_CPU_ID,
    pc_endpoint_recv_here = const percpu::OFFSET_ENDPOINT_RECV_HERE,
    pc_endpoint_idle_here = const percpu::OFFSET_ENDPOINT_IDLE_HERE,
    pc_scratch2 = const percpu::OFFSET_SCRATCH2,
    rq_summary = const thread::RUN_QUEUE_SUMMARY,
    rq_nonempty = const thread::RUN_QUEUE_NONEMPTY,
    pc_kernel_stack_top = const percpu::OFFSET_KERNEL_STACK_TOP,
    pc_scratch = const percpu::OFFSET_SCRATCH,
    pc_current = const percpu::OFFSET_CURRENT,
    pc_tables = const percpu::OFFSET_TABLES,
    tss_rsp0 = const TSS_RSP0,
    syscall_vector = const VECTOR_SYSCALL,
    sys_call = const Sys::Call as u64,
    sys_reply_recv = const Sys::ReplyRecv as u64,
    switch = const SWITCH as i64,
    short_max = const REGISTER_MESSAGE_WORDS,
    direct_map = const crate::mm::DIRECT_MAP_BASE as i64,
    obj_cap_table = const ObjectType::CapTable as u64,
    obj_endpoint = const ObjectType::Endpoint as u64,
    obj_address_space = const ObjectType::AddressSpace as u64,
    right_read = const Rights::READ.raw(),
    right_write = const Rights::WRITE.raw(),
    st_running = const State::Running as u8,
    st_blocked_recv = const State::BlockedRecv as u8,
    st_blocked_reply = const State::BlockedReply as u8,
    ep_idle = const EndpointState::Idle as u8,
    ep_send = const EndpointState::Send as u8,
    ep_recv = const EndpointState::Recv as u8,
    queue_none = const queue_tag(Queue::None),
    queue_object = const queue_tag(Queue::Object(0)),
    queue_payload = const QUEUE_PAYLOAD,
    options(att_syntax)
);
