//! fuzzer: a hostile component that makes a million random system calls
//! and checks that every one comes back with success or a documented
//! error (`abi::Error`), while the `pinger` keeps answering `pingclient`.
//!
//! # Argument word
//!
//! ```text
//!  63          48  47   46                                   0
//! +--------------+-----+--------------------------------------+
//! | calls / 1000 |trace|                 seed                  |
//! +--------------+-----+--------------------------------------+
//! ```
//! seed 0 means [`DEFAULT_SEED`], calls 0 means [`DEFAULT_CALLS`]. With the
//! trace bit, the last 1000 calls are printed before they are made, which
//! names the call that brings a kernel down (see "Replaying"). The first
//! line is `fuzzer: seed S, N calls`.
//!
//! # What it calls
//!
//! Numbers: mostly the 33 system calls of `abi::Sys`, uniformly; one in 16
//! calls an unknown number (just above the range, or any u64). Arguments:
//! three calls in four get arguments shaped like the call's parameters
//! (slots for slots — three times in five one where the set-up below put
//! an object of the type the call expects —, message-info words for
//! message infos, ...), the rest
//! random words of any class; each argument of a shaped call is still
//! replaced by a word of any class one time in eight. The classes:
//! small slot numbers (0..24: empty slots, its own untyped and service
//! endpoint, and the objects below), two-level capability addresses,
//! indices past the end of the capability space, random u64s, kernel
//! addresses (direct map at `0xffff_8000_0000_0000`, kernel image at
//! `0xffff_ffff_8000_0000`), non-canonical addresses, unmapped, misaligned
//! and page-boundary-crossing user addresses, its own stack, data, code
//! and IPC buffer, valid and malformed message-info words, rights words,
//! object types and size bits, map attributes, priorities.
//!
//! To reach deep kernel paths it keeps real objects in slots 8..21: before
//! the first call and every [`SETUP_EVERY`] calls it revokes its untyped
//! memory (deleting everything made from it, which resets the untyped's
//! watermark) and retypes two endpoints, two notifications, two threads, a
//! capability table, an address space, four frames and a child untyped,
//! copies capabilities into the table, maps frames into the address space
//! (code, data, stack), configures one thread in them with endpoint 8 as its
//! fault handler and starts it (it executes the zeroed code page, faults,
//! and its fault message waits on endpoint 8 for a random `NbRecv` and
//! `Reply`; set-up itself receives it once and saves it as a reply
//! capability in slot 22, for random `ReplyTo`s), and binds a notification
//! to the other thread. Random calls
//! then hit these objects, the empty slots around them and each other. It
//! also writes random slot addresses into its IPC buffer's send-capability
//! and receive-slot fields now and then.
//!
//! # What it avoids, and why
//!
//! Only what would end or block the fuzzer itself:
//!
//! - `ThreadExit` is made a `Null`;
//! - `Recv` and `ReplyRecv` become `NbRecv`, `Wait` becomes `Poll`: nothing
//!   else sends to or signals its objects, so they would wait forever;
//! - `Send` and `Call` become `NbSend` unless the endpoint argument is
//!   exactly its own service-endpoint slot, where the pinger receives and
//!   answers. On that endpoint the label is kept below the kernel's fault
//!   labels (`ping::KERNEL_LABELS`), which the pinger never answers;
//! - `CapDelete` of its own slots 1 (untyped) and 2 (service endpoint)
//!   deletes slot 21 instead: without them it could neither make objects
//!   nor tell the pinger it is done. (`CapRevoke` of both is allowed: it
//!   deletes only what was made or derived from them; but only one random
//!   revoke of the untyped in [`REVOKE_ALL_ONE_IN`] goes through, the
//!   others revoke the child untyped, so that objects live long enough
//!   between set-ups to be hit.)
//!
//! It holds no capability to its own thread, capability space or address
//! space (`interfaces::child`), so no call can change its own memory except its
//! IPC buffer, which it only touches with volatile accesses. `DebugWrite`
//! of readable memory gets a length of 0, above the limit, or one that
//! crosses into the unmapped page above the stack, so the console does not
//! fill with noise — unless the kernel wrongly writes a partial buffer.
//!
//! # Checks
//!
//! Every result must be 0 or a code of `abi::Error`; an unknown number must
//! give `UnknownSyscall` and a known one must not; `Null` must succeed; and
//! calls whose arguments the documentation rejects (an unknown rights bit,
//! a malformed message info, a Retype count of 0 or above 256, a map
//! attribute with W+X or unknown bits, an unaligned or non-user map
//! address, a misaligned IPC buffer, a priority above its own, a non-user
//! start address, a register mode other than 0 and 1, a slot index past
//! its capability space) must fail. A violation prints
//! `fuzzer: VIOLATION call I: NAME(NR) args [...] -> rax R: why`.
//!
//! # Output
//!
//! Every [`PROGRESS_EVERY`] calls: `fuzzer: N calls, E errors, V
//! violations, rng state S`; at the end `fuzzer: N calls done, V
//! violations`, a histogram of results, successes per call, then it calls
//! the pinger with `FUZZER_DONE` and exits with 0 (1 if there was a
//! violation or the pinger did not acknowledge).
//!
//! # Replaying
//!
//! The argument sequence depends only on the seed (results never feed the
//! generator), so `pecan.start=pinger+serve,pingclient,fuzzer:S` replays a run;
//! the kernel's state can still differ slightly, since the pinger's and
//! pingclient's calls interleave with timer preemption. When the kernel
//! dies, the last progress line bounds the call; rerun with the calls field
//! set just past it and the trace bit, e.g. `fuzzer:0x0190800000001234`
//! for seed 0x1234, 400 000 calls, traced.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use core::sync::atomic::{AtomicU64, Ordering};

use protocols::ping;
use rt::abi::ipc_buffer::{RECV_SLOT_OFFSET, SEND_CAP_OFFSET};
use rt::abi::map::{MapAttr, CACHE_SHIFT, EXECUTABLE, WRITABLE};
use rt::abi::{caddr, Error, MsgInfo, ObjectType, Rights, Sys};
use rt::interfaces::child::{self, SERVICE_ENDPOINT, UNTYPED};
use rt::println;
use rt::syscall::{self, RawResult};

rt::entry!(main);

/// Seed used when the argument's seed field is 0.
pub const DEFAULT_SEED: u64 = 0x2545_f491_4f6c;
/// Calls made when the argument's count field is 0.
pub const DEFAULT_CALLS: u64 = 1_000_000;
/// Progress line interval.
pub const PROGRESS_EVERY: u64 = 100_000;
/// Objects are made afresh this often.
pub const SETUP_EVERY: u64 = 10_000;
/// A random revoke of the whole untyped memory (which deletes every object
/// until the next set-up) goes through one time in this many; the others
/// revoke the child untyped.
const REVOKE_ALL_ONE_IN: u64 = 16;
/// Calls printed before they are made when tracing.
const TRACED_CALLS: u64 = 1000;
/// Violations printed in full.
const VIOLATIONS_PRINTED: u64 = 20;

const SEED_MASK: u64 = (1 << 47) - 1;
const TRACE_BIT: u64 = 1 << 47;
const COUNT_SHIFT: u32 = 48;

// Slots of the objects made in each set-up round.
const EP0: u32 = 8;
const EP1: u32 = 9;
const NTFN0: u32 = 10;
const NTFN1: u32 = 11;
const THREAD0: u32 = 12;
const THREAD1: u32 = 13;
const TABLE: u32 = 14;
const VSPACE: u32 = 15;
const FRAME0: u32 = 16;
const CHILD_UNTYPED: u32 = 20;
/// Free for random retypes and copies; `CapDelete` of slots 1 and 2 goes here.
const SPARE: u32 = 21;
/// Where set-up saves the fault of thread 0 as a reply capability.
const REPLY: u32 = 22;
/// Small slot numbers are drawn below this.
const SMALL_SLOTS: u64 = 24;
/// Where in the table (slot [`TABLE`]) the set-up puts a virtual CPU and
/// a guest space with the frame [`FRAME0`] + 3 at guest-physical 0.
const VCPU_IN_TABLE: u64 = 10;
const GSPACE_IN_TABLE: u64 = 11;
/// log2 of the slots of the table made in set-up.
const TABLE_BITS: u64 = 4;

// Addresses in the address space made in set-up.
const CODE_VA: u64 = 0x40_0000;
const DATA_VA: u64 = 0x40_1000;
const STACK_VA: u64 = 0x7f_f000;
/// First address above user space.
const USER_END: u64 = 0x0000_8000_0000_0000;

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, passes BigCrush, and
/// every seed gives a full-period sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0; the bias of the modulo is irrelevant here).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability 1/n.
    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }

    fn pick(&mut self, values: &[u64]) -> u64 {
        values[self.below(values.len() as u64) as usize]
    }
}

/// What a parameter of a system call is, for shaped arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    None,
    /// A slot, preferably one holding an object of this kind.
    Slot(Obj),
    Ptr,
    Len,
    Info,
    Word,
    Rights,
    Badge,
    Type,
    Bits,
    Count,
    VAddr,
    Attr,
    Prio,
    Cpu,
    /// A CPU set (`abi::cpu`): 0 (the caller's), small sets, junk.
    CpuSet,
    Flag,
    Port,
}

/// The kinds of objects the set-up makes, for slot arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Obj {
    Any,
    Endpoint,
    Notification,
    Thread,
    Table,
    VSpace,
    Frame,
    Untyped,
    /// The saved reply (empty after an answer: also a destination).
    Reply,
    /// The virtual CPU and the guest space of the set-up (table slots
    /// [`VCPU_IN_TABLE`], [`GSPACE_IN_TABLE`]; empty without SVM).
    Vcpu,
    GuestSpace,
    /// Slots that are usually empty: destinations.
    Free,
}

/// The parameters of every call (`abi::Sys`).
fn shape(sys: Sys) -> [Kind; 6] {
    use Kind::*;
    let any = Slot(Obj::Any);
    let ep = Slot(Obj::Endpoint);
    let ntfn = Slot(Obj::Notification);
    let thread = Slot(Obj::Thread);
    let frame = Slot(Obj::Frame);
    let vspace = Slot(Obj::VSpace);
    let free = Slot(Obj::Free);
    let ipc = [ep, Info, Word, Word, Word, Word];
    match sys {
        Sys::Null | Sys::Yield | Sys::CpuSet => [None; 6],
        Sys::DebugWrite => [Ptr, Len, None, None, None, None],
        Sys::ThreadExit => [Word, None, None, None, None, None],
        Sys::Send | Sys::NbSend | Sys::Recv | Sys::NbRecv | Sys::Call | Sys::ReplyRecv => ipc,
        Sys::Reply => [Word, Info, Word, Word, Word, Word],
        Sys::Signal | Sys::Wait | Sys::Poll => [ntfn, None, None, None, None, None],
        Sys::CapDelete | Sys::CapRevoke | Sys::IrqAck | Sys::Usage => {
            [any, None, None, None, None, None]
        }
        Sys::Unmap => [frame, None, None, None, None, None],
        Sys::ThreadSuspend | Sys::ThreadResume => [thread, None, None, None, None, None],
        Sys::CapCopy => [any, free, None, None, None, None],
        Sys::IrqBind => [any, ntfn, None, None, None, None],
        Sys::BindNotification => [thread, ntfn, None, None, None, None],
        Sys::CapMint => [any, free, Rights, Badge, None, None],
        Sys::Retype => [Slot(Obj::Untyped), Type, Bits, free, Count, None],
        Sys::Map => [vspace, frame, VAddr, Attr, None, None],
        Sys::ThreadConfigure => [thread, Slot(Obj::Table), vspace, VAddr, ep, None],
        Sys::ThreadSetSchedParams => [thread, Prio, Cpu, CpuSet, None, None],
        Sys::ThreadStart => [thread, VAddr, VAddr, Word, None, None],
        Sys::ThreadRegisters => [thread, Flag, None, None, None, None],
        Sys::IoPort => [any, Port, Flag, Count, Word, None],
        Sys::SaveReply => [Slot(Obj::Reply), None, None, None, None, None],
        Sys::ReplyTo => [Slot(Obj::Reply), Info, Word, Word, Word, Word],
        // The fuzzer holds no device control capability: both are refused
        // at their first argument, whatever it is.
        Sys::MsiAlloc => [any, free, Cpu, None, None, None],
        Sys::PhysAddress => [any, any, None, None, None, None],
        Sys::TraceMark => [Word, Word, Word, Word, None, None],
        Sys::TraceName => [thread, Word, Word, Word, Word, None],
        Sys::ThreadCpuTime => [thread, None, None, None, None, None],
        // Mostly refused at a slot; when both name a VCPU and a guest
        // space the fuzzer made, a run of whatever state its IPC buffer
        // holds (an INVALID exit, or a guest that faults at once).
        Sys::VcpuRun => [
            Slot(Obj::Vcpu),
            Slot(Obj::GuestSpace),
            Bits,
            None,
            None,
            None,
        ],
    }
}

/// Memory of the fuzzer's own, for pointer arguments.
/// The fuzzer's own CPU set (`CpuSet`, read at start).
static OWN_CPUS: AtomicU64 = AtomicU64::new(0);

static DATA: [AtomicU64; 64] = [const { AtomicU64::new(0x6675_7a7a) }; 64];

/// Addresses of the fuzzer's own memory (readable) and others (not).
struct Places {
    stack: u64,
    data: u64,
    code: u64,
}

struct Fuzzer {
    rng: Rng,
    places: Places,
}

impl Fuzzer {
    /// A small slot, a two-level address, an index past the space, or junk.
    fn slot(&mut self) -> u64 {
        let r = &mut self.rng;
        match r.below(20) {
            0..=13 => r.below(SMALL_SLOTS),
            14 | 15 => caddr::in_table(
                r.below(SMALL_SLOTS) as u32,
                r.below(1 << (TABLE_BITS + 1)) as u32,
            ),
            16 => caddr::in_table(r.next() as u32, r.below(SMALL_SLOTS) as u32),
            17 => r.below(2 << child::CSPACE_BITS),
            18 => r.pick(&[u32::MAX as u64, 1 << child::CSPACE_BITS, u64::MAX, 1 << 32]),
            _ => r.next(),
        }
    }

    /// A slot, three times in five one where set-up put an object of kind
    /// `obj` (in its own space or in the table it made).
    fn typed_slot(&mut self, obj: Obj) -> u64 {
        let r = &mut self.rng;
        if obj == Obj::Any || r.below(5) >= 3 {
            return self.slot();
        }
        let table = |i: u64| caddr::in_table(TABLE, i as u32);
        let own = |i: u32| caddr::own(i);
        match obj {
            Obj::Endpoint => match r.below(6) {
                0 => own(SERVICE_ENDPOINT),
                1 => own(SPARE),
                2 => table(r.pick(&[1, 3, 4, 5, 6])),
                3 => own(EP0),
                _ => own(EP1),
            },
            Obj::Notification => match r.below(4) {
                0 => table(2),
                1 => own(NTFN0),
                _ => own(NTFN1),
            },
            Obj::Thread => own(THREAD0 + r.below(2) as u32),
            Obj::Table => own(TABLE),
            Obj::VSpace => own(VSPACE),
            Obj::Frame => match r.below(4) {
                0 => table(8 + r.below(2)),
                _ => own(FRAME0 + r.below(4) as u32),
            },
            Obj::Untyped => own(if r.one_in(2) { UNTYPED } else { CHILD_UNTYPED }),
            Obj::Reply => own(REPLY),
            Obj::Vcpu => table(VCPU_IN_TABLE),
            Obj::GuestSpace => table(GSPACE_IN_TABLE),
            Obj::Free | Obj::Any => match r.below(3) {
                0 => table(r.below(1 << TABLE_BITS)),
                _ => own(SPARE + r.below(SMALL_SLOTS - u64::from(SPARE)) as u32),
            },
        }
    }

    /// A readable address of the fuzzer's own memory.
    fn own_address(&mut self) -> u64 {
        let p = &self.places;
        let (stack, data, code) = (p.stack, p.data, p.code);
        let r = &mut self.rng;
        match r.below(5) {
            0 => stack.wrapping_sub(r.below(256)),
            1 => data + r.below(64 * 8),
            2 => code + r.below(64),
            3 => rt::abi::MAIN_IPC_BUFFER_ADDR + r.below(4096),
            _ => child_stack_top() - 8 * (1 + r.below(8)),
        }
    }

    /// An address that is not readable user memory.
    fn bad_address(&mut self) -> u64 {
        let r = &mut self.rng;
        match r.below(8) {
            0 => 0xffff_8000_0000_0000 + (r.next() & 0x0000_3fff_ffff_fff8),
            1 => 0xffff_ffff_8000_0000 + (r.next() & 0x7fff_fff8),
            2 => USER_END + (r.next() & 0x0000_7fff_ffff_f000),
            // Non-canonical: bit 47 set, bit 63 clear.
            3 => (r.next() | (1 << 47)) & !(1 << 63),
            4 => r.pick(&[
                0,
                8,
                0x1000,
                0xfff,
                USER_END - 8,
                USER_END - 0x1000,
                0x1000_0000,
            ]),
            5 => 0x1000_0000 + (r.below(1 << 20) << 12),
            // Below the 64 KiB stack.
            6 => child_stack_top() - 0x2_0000 - (r.below(16) << 12),
            _ => r.next(),
        }
    }

    fn pointer(&mut self) -> u64 {
        let misalign = if self.rng.one_in(4) {
            1 + self.rng.below(7)
        } else {
            0
        };
        let base = if self.rng.one_in(2) {
            self.own_address()
        } else {
            self.bad_address()
        };
        base.wrapping_add(misalign)
    }

    fn info(&mut self) -> u64 {
        let r = &mut self.rng;
        if r.one_in(3) {
            return match r.below(3) {
                0 => r.next(),
                1 => (r.next() << 16) | r.below(256) << 8 | r.below(256),
                _ => (r.below(8) << 16) | (r.below(4) << 8) | (60 + r.below(10)),
            };
        }
        let label = match r.below(6) {
            0 => ping::PING,
            1 => ping::FUZZER_DONE,
            2 => r.pick(&[
                rt::abi::fault::LABEL_PAGE_FAULT,
                rt::abi::fault::LABEL_EXCEPTION,
                rt::abi::fault::LABEL_EXIT,
                rt::abi::LABEL_NOTIFICATION,
            ]),
            3 => r.below(16),
            _ => r.next() & rt::abi::msg::MAX_LABEL,
        };
        let length = if r.one_in(2) { r.below(5) } else { r.below(65) } as usize;
        let caps = usize::from(r.one_in(4));
        MsgInfo::new(label, length, caps).map_or(0, |m| m.0)
    }

    fn vaddr(&mut self) -> u64 {
        let r = &mut self.rng;
        match r.below(12) {
            0..=3 => r.pick(&[
                CODE_VA,
                DATA_VA,
                STACK_VA,
                STACK_VA + 0x1000,
                DATA_VA + 0x1000,
            ]),
            4 | 5 => r.below(1 << 35) << 12,
            6 => (r.below(1 << 35) << 12) + 1 + r.below(0xfff),
            7 => USER_END - 0x1000 * (1 + r.below(4)),
            8 => {
                if r.one_in(2) {
                    0x20_0000 + (r.below(64) << 12)
                } else {
                    // The unmappable lowest 64 KiB (abi::map::USER_MAP_START).
                    r.below(17) << 12
                }
            }
            9 => child_stack_top() - 0x1000,
            10 => r.pick(&[
                USER_END,
                0xffff_8000_0000_0000,
                0xffff_ffff_8000_0000,
                0x0001_0000_0000_0000,
            ]),
            _ => r.next(),
        }
    }

    /// An argument shaped like `kind`, or (one time in eight) of any class.
    fn arg(&mut self, kind: Kind) -> u64 {
        if kind != Kind::None && self.rng.one_in(8) {
            return self.any();
        }
        let r = &mut self.rng;
        match kind {
            Kind::None => {
                if r.one_in(2) {
                    0
                } else {
                    r.next()
                }
            }
            Kind::Slot(obj) => self.typed_slot(obj),
            Kind::Ptr => self.pointer(),
            Kind::Len => r.pick(&[0, 1, 7, 8, 64, 4095, 4096, 4097, 1 << 32, u64::MAX]),
            Kind::Info => self.info(),
            Kind::Word => match r.below(3) {
                0 => r.below(16),
                _ => r.next(),
            },
            Kind::Rights => match r.below(8) {
                0 => r.pick(&[8, 0xff, u64::MAX, 1 << 63]),
                _ => r.below(8),
            },
            Kind::Badge => match r.below(4) {
                0 => 0,
                1 => r.below(16),
                2 => r.pick(&[u64::MAX, 1 << 63, 0xffff_ffff]),
                _ => r.next(),
            },
            Kind::Type => match r.below(8) {
                0 => r.next(),
                _ => r.below(14),
            },
            Kind::Bits => match r.below(8) {
                0 => r.next(),
                1 => r.pick(&[0, 11, 12, 16, 17, 20, 21, 26, 27, 47, 48, 63, 64, 65]),
                _ => r.below(24),
            },
            Kind::Count => match r.below(8) {
                0 => r.pick(&[0, 255, 256, 257, u64::MAX, 1 << 32]),
                _ => 1 + r.below(4),
            },
            Kind::VAddr => self.vaddr(),
            Kind::Attr => match r.below(6) {
                0 => r.next(),
                1 => WRITABLE | EXECUTABLE,
                2 => r.below(8) << CACHE_SHIFT | r.below(4),
                _ => r.below(4) | r.below(4) << CACHE_SHIFT,
            },
            Kind::Prio => match r.below(4) {
                0 => r.next(),
                1 => r.below(256),
                _ => r.below(u64::from(child::PRIORITY) + 1),
            },
            Kind::CpuSet => match r.below(4) {
                0 => r.next(),
                1 => 0,
                _ => r.below(16),
            },
            Kind::Cpu | Kind::Flag => match r.below(4) {
                0 => r.next(),
                _ => r.below(3),
            },
            Kind::Port => match r.below(2) {
                0 => r.pick(&[0x3f8, 0xf4, 0x70, 0xcf8, 0xffff, 0x1_0000]),
                _ => r.next(),
            },
        }
    }

    /// A word of any class.
    fn any(&mut self) -> u64 {
        match self.rng.below(10) {
            0 => self.slot(),
            1 => self.pointer(),
            2 => self.info(),
            3 => self.vaddr(),
            4 => self.rng.below(8),
            5 => self.rng.pick(&[0, 1, u64::MAX, 1 << 63, 0xffff_ffff]),
            6 => self.rng.below(12),
            7 => self.own_address(),
            _ => self.rng.next(),
        }
    }

    /// A system-call number: mostly real ones, some unknown.
    fn number(&mut self) -> u64 {
        let count = Sys::ALL.len() as u64;
        let r = &mut self.rng;
        match r.below(32) {
            0 => count + r.below(64),
            1 => r.next(),
            _ => r.below(count),
        }
    }
}

/// The top of the fuzzer's stack (`abi::MAIN_STACK_TOP`).
fn child_stack_top() -> u64 {
    rt::abi::MAIN_STACK_TOP
}

/// One call as made, after the blocking forms were replaced.
#[derive(Clone, Copy)]
struct CallRecord {
    index: u64,
    number: u64,
    args: [u64; 6],
}

impl core::fmt::Display for CallRecord {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let name = Sys::from_raw(self.number).map_or("unknown", Sys::name);
        let a = self.args;
        write!(
            f,
            "call {}: {name}({}) args [{:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x}]",
            self.index, self.number, a[0], a[1], a[2], a[3], a[4], a[5]
        )
    }
}

/// Makes the blocking and self-destroying forms harmless (see the module
/// doc); `revoke_all` allows a revoke of the whole untyped memory.
fn defuse(number: u64, args: &mut [u64; 6], revoke_all: bool) -> u64 {
    let Some(sys) = Sys::from_raw(number) else {
        return number;
    };
    let service = caddr::own(SERVICE_ENDPOINT);
    match sys {
        Sys::ThreadExit => Sys::Null as u64,
        Sys::Recv | Sys::ReplyRecv => Sys::NbRecv as u64,
        Sys::Wait => Sys::Poll as u64,
        Sys::Send | Sys::Call if args[0] == service => {
            let info = MsgInfo(args[1]);
            if info.label() >= ping::KERNEL_LABELS {
                // Clear the label's top bit: below the kernel's labels.
                args[1] &= !(1 << 63);
            }
            number
        }
        Sys::Send | Sys::Call => Sys::NbSend as u64,
        Sys::CapDelete if matches!(caddr::split(args[0]), (0, UNTYPED | SERVICE_ENDPOINT)) => {
            args[0] = caddr::own(SPARE);
            number
        }
        Sys::CapRevoke if args[0] == caddr::own(UNTYPED) && !revoke_all => {
            args[0] = caddr::own(CHILD_UNTYPED);
            number
        }
        _ => number,
    }
}

/// Why a result breaks the documented contract, if it does.
fn violation(number: u64, args: &[u64; 6], rax: u64) -> Option<&'static str> {
    if rax != 0 && Error::from_raw(rax).is_none() {
        return Some("result is not an abi::Error code");
    }
    let Some(sys) = Sys::from_raw(number) else {
        return (rax != Error::UnknownSyscall as u64)
            .then_some("unknown number did not give UnknownSyscall");
    };
    if rax == Error::UnknownSyscall as u64 {
        return Some("a documented call gave UnknownSyscall");
    }
    if rax != 0 {
        return None;
    }
    // Succeeded: it must not have been one the documentation rejects.
    let own_index_too_big = |slot: u64| {
        let (table, index) = caddr::split(slot);
        table == 0 && u64::from(index) >= 1 << child::CSPACE_BITS
    };
    let user = |addr: u64| addr < USER_END;
    match sys {
        Sys::Null => None,
        Sys::DebugWrite if args[1] > syscall::DEBUG_WRITE_MAX as u64 => {
            Some("DebugWrite accepted a length above 4096")
        }
        Sys::Send | Sys::NbSend | Sys::Call | Sys::ReplyTo
            if MsgInfo(args[1]).validate().is_err() =>
        {
            Some("a malformed message info was accepted")
        }
        Sys::CapMint if Rights::from_raw(args[2]).is_none() => {
            Some("unknown rights bits were accepted")
        }
        Sys::Retype if args[4] == 0 || args[4] > 256 => {
            Some("Retype accepted a count outside 1..=256")
        }
        Sys::Retype
            if ObjectType::from_raw(args[1])
                .and_then(|t| t.object_bits(args[2]))
                .is_none() =>
        {
            Some("Retype made an object of an unknown type or size")
        }
        // Into a guest space (the set-up's, or a copy of it a random call
        // made): a guest-physical address, W+X allowed. Only slot VSPACE
        // surely holds an address space (nothing random is put there).
        Sys::Map if args[0] != caddr::own(VSPACE) && guest_map_allowed(args) => None,
        Sys::Map if MapAttr::from_raw(args[3]).is_none() => {
            Some("Map accepted a bad attribute word (W+X or unknown bits)")
        }
        Sys::Map if !args[2].is_multiple_of(4096) || !user(args[2]) => {
            Some("Map accepted an unaligned or non-user address")
        }
        // Every frame is at least a page: the lowest 64 KiB and the last
        // page of the lower half are never mappable.
        Sys::Map if !rt::abi::map::user_mappable(args[2], 4096) => {
            Some("Map accepted an address in the lowest 64 KiB or the last user page")
        }
        Sys::VcpuRun if args[2] & !rt::abi::vcpu::load::ALL != 0 => {
            Some("VcpuRun accepted unknown flag bits")
        }
        Sys::ThreadConfigure if !args[3].is_multiple_of(1024) || !user(args[3]) => {
            Some("ThreadConfigure accepted a misaligned or non-user IPC buffer")
        }
        Sys::ThreadSetSchedParams if args[1] > u64::from(child::PRIORITY) => {
            Some("a priority above the caller's own was accepted")
        }
        Sys::ThreadSetSchedParams if args[3] & !OWN_CPUS.load(Ordering::Relaxed) != 0 => {
            Some("a CPU set beyond the caller's own was accepted")
        }
        Sys::ThreadSetSchedParams
            if args[3] != 0 && (args[2] >= 64 || args[3] & (1 << args[2]) == 0) =>
        {
            Some("a CPU set without the thread's CPU was accepted")
        }
        Sys::ThreadStart if !user(args[1]) || !user(args[2]) => {
            Some("ThreadStart accepted a non-user rip or rsp")
        }
        Sys::ThreadRegisters if args[1] > 1 => {
            Some("ThreadRegisters accepted a mode other than 0 and 1")
        }
        Sys::IoPort if !matches!(args[3], 1 | 2 | 4) => {
            Some("IoPort accepted a width other than 1, 2, 4")
        }
        Sys::Reply | Sys::Yield => None,
        _ if matches!(shape(sys)[0], Kind::Slot(_)) && own_index_too_big(args[0]) => {
            Some("a slot index past the capability space was accepted")
        }
        _ => None,
    }
}

/// Whether a successful `Map` with `args` keeps the rules of a mapping
/// into a guest space (docs/abi.md): a known attribute word (W+X
/// allowed), a page-aligned guest-physical address below
/// `GUEST_PHYS_END`.
fn guest_map_allowed(args: &[u64; 6]) -> bool {
    MapAttr::from_raw_guest(args[3]).is_some()
        && args[2].is_multiple_of(4096)
        && args[2] < rt::abi::vcpu::GUEST_PHYS_END
}

/// Counts of results.
struct Stats {
    /// Index 0: success; 1..=16: `abi::Error` codes; 17: anything else.
    by_result: [u64; 18],
    /// Successes per system call.
    ok_by_call: [u64; Sys::ALL.len()],
    errors: u64,
    violations: u64,
}

fn main(arg: u64) -> i32 {
    let seed = match arg & SEED_MASK {
        0 => DEFAULT_SEED,
        s => s,
    };
    let calls = match arg >> COUNT_SHIFT {
        0 => DEFAULT_CALLS,
        k => k * 1000,
    };
    let trace = arg & TRACE_BIT != 0;
    OWN_CPUS.store(syscall::cpu_set().bits(), Ordering::Relaxed);
    println!(
        "fuzzer: seed {seed} ({seed:#x}), {calls} calls{}",
        if trace { ", tracing the last 1000" } else { "" }
    );
    let stack_marker = 0u64;
    let mut fuzzer = Fuzzer {
        rng: Rng(seed),
        places: Places {
            stack: &raw const stack_marker as u64,
            data: DATA.as_ptr() as u64,
            code: main as *const () as u64,
        },
    };
    let mut stats = Stats {
        by_result: [0; 18],
        ok_by_call: [0; Sys::ALL.len()],
        errors: 0,
        violations: 0,
    };
    for index in 0..calls {
        if index.is_multiple_of(SETUP_EVERY) {
            set_up(&mut fuzzer.rng, &mut stats, index);
        }
        if fuzzer.rng.one_in(64) {
            poke_ipc_buffer(&mut fuzzer);
        }
        let mut number = fuzzer.number();
        let shaped = fuzzer.rng.below(4) != 0;
        let kinds = match Sys::from_raw(number) {
            Some(sys) if shaped => shape(sys),
            _ => [Kind::Word; 6],
        };
        let mut args = [0u64; 6];
        for (a, kind) in args.iter_mut().zip(kinds) {
            *a = if shaped {
                fuzzer.arg(kind)
            } else {
                fuzzer.any()
            };
        }
        if number == Sys::DebugWrite as u64 {
            args[..2].copy_from_slice(&debug_write_args(&mut fuzzer));
        }
        let revoke_all = fuzzer.rng.one_in(REVOKE_ALL_ONE_IN);
        number = defuse(number, &mut args, revoke_all);
        let record = CallRecord {
            index,
            number,
            args,
        };
        if trace && index + TRACED_CALLS >= calls {
            println!("fuzzer: {record}");
        }
        // SAFETY: see the module doc: the fuzzer holds no capability to its
        // own thread, capability space or address space, so no call can
        // change its memory or registers beyond the result registers and
        // its IPC buffer, which it treats as foreign (volatile) memory; the
        // calls that would end or block it were replaced by `defuse`.
        let (rax, _): RawResult = unsafe { syscall::raw_number(number, args) };
        account(&mut stats, &record, rax);
        if (index + 1).is_multiple_of(PROGRESS_EVERY) {
            println!(
                "fuzzer: {} calls, {} errors, {} violations, rng state {:#x}",
                index + 1,
                stats.errors,
                stats.violations,
                fuzzer.rng.0
            );
        }
    }
    println!(
        "fuzzer: {calls} calls done, {} violations",
        stats.violations
    );
    print_stats(&stats);
    let acknowledged = tell_pinger();
    i32::from(stats.violations > 0 || !acknowledged)
}

/// Counts one result and reports it if it breaks the contract.
fn account(stats: &mut Stats, record: &CallRecord, rax: u64) {
    let slot = if rax < 17 { rax as usize } else { 17 };
    stats.by_result[slot] += 1;
    if rax == 0 {
        if let Some(count) = stats.ok_by_call.get_mut(record.number as usize) {
            *count += 1;
        }
    } else {
        stats.errors += 1;
    }
    if let Some(why) = violation(record.number, &record.args, rax) {
        stats.violations += 1;
        if stats.violations <= VIOLATIONS_PRINTED {
            println!("fuzzer: VIOLATION {record} -> rax {rax:#x}: {why}");
        }
    }
}

/// `DebugWrite` arguments that print nothing unless the kernel is wrong.
fn debug_write_args(fuzzer: &mut Fuzzer) -> [u64; 2] {
    let r = &mut fuzzer.rng;
    match r.below(4) {
        0 => {
            // Readable, crossing into the unmapped guard page above the stack.
            let back = 1 + r.below(64);
            [child_stack_top() - back, back + 1 + r.below(4000)]
        }
        1 => {
            let ptr = fuzzer.own_address();
            let len = fuzzer.rng.pick(&[0, 4097, 1 << 20, u64::MAX]);
            [ptr, len]
        }
        _ => {
            let ptr = fuzzer.bad_address();
            let len = fuzzer.rng.pick(&[1, 8, 4096, 4097, u64::MAX]);
            [ptr, len]
        }
    }
}

/// Writes a random slot address into the IPC buffer's send-capability or
/// receive-slot field.
fn poke_ipc_buffer(fuzzer: &mut Fuzzer) {
    let offset = if fuzzer.rng.one_in(2) {
        SEND_CAP_OFFSET
    } else {
        RECV_SLOT_OFFSET
    };
    let value = fuzzer.slot();
    let field = (rt::abi::MAIN_IPC_BUFFER_ADDR + offset) as *mut u64;
    // SAFETY: the IPC buffer page is mapped writable for this thread
    // (`interfaces::child`), the field is 8-byte aligned, and nothing in this
    // program holds a reference into the buffer: only the kernel reads it.
    unsafe { field.write_volatile(value) };
}

/// Makes the objects random calls aim at (see the module doc). Results
/// are checked like those of random calls but need not succeed.
fn set_up(rng: &mut Rng, stats: &mut Stats, index: u64) {
    let own = |slot: u32| caddr::own(slot);
    let ep = ObjectType::Endpoint as u64;
    let ntfn = ObjectType::Notification as u64;
    let frame = ObjectType::Frame4K as u64;
    let untyped = own(UNTYPED);
    let rw = MapAttr::from_raw(WRITABLE).expect("valid attribute").raw();
    let x = MapAttr::from_raw(EXECUTABLE)
        .expect("valid attribute")
        .raw();
    let badge = rng.next();
    let prio = rng.below(u64::from(child::PRIORITY) + 1);
    // Slots a random copy filled would keep the objects from being made.
    for slot in EP0..SMALL_SLOTS as u32 {
        set_up_call(stats, index, Sys::CapDelete, [own(slot), 0, 0, 0, 0, 0]);
    }
    let rwx = MapAttr::from_raw_guest(WRITABLE | EXECUTABLE)
        .expect("valid attribute")
        .raw();
    let steps: [(Sys, [u64; 6]); 29] = [
        (Sys::CapRevoke, [untyped, 0, 0, 0, 0, 0]),
        (Sys::Retype, [untyped, ep, 0, own(EP0), 2, 0]),
        (Sys::Retype, [untyped, ntfn, 0, own(NTFN0), 2, 0]),
        (
            Sys::Retype,
            [untyped, ObjectType::Thread as u64, 0, own(THREAD0), 2, 0],
        ),
        (
            Sys::Retype,
            [
                untyped,
                ObjectType::CapTable as u64,
                TABLE_BITS,
                own(TABLE),
                1,
                0,
            ],
        ),
        (
            Sys::Retype,
            [
                untyped,
                ObjectType::AddressSpace as u64,
                14,
                own(VSPACE),
                1,
                0,
            ],
        ),
        (Sys::Retype, [untyped, frame, 0, own(FRAME0), 4, 0]),
        (
            Sys::Retype,
            [
                untyped,
                ObjectType::Untyped as u64,
                14,
                own(CHILD_UNTYPED),
                1,
                0,
            ],
        ),
        (
            Sys::CapCopy,
            [own(EP0), caddr::in_table(TABLE, 1), 0, 0, 0, 0],
        ),
        (
            Sys::CapMint,
            [
                own(NTFN0),
                caddr::in_table(TABLE, 2),
                Rights::WRITE.raw(),
                badge,
                0,
                0,
            ],
        ),
        (
            Sys::CapCopy,
            [own(SERVICE_ENDPOINT), caddr::in_table(TABLE, 3), 0, 0, 0, 0],
        ),
        (
            Sys::CapMint,
            [own(EP1), own(SPARE), Rights::WRITE.raw(), badge, 0, 0],
        ),
        (Sys::Map, [own(VSPACE), own(FRAME0), CODE_VA, x, 0, 0]),
        (Sys::Map, [own(VSPACE), own(FRAME0 + 1), DATA_VA, rw, 0, 0]),
        (Sys::Map, [own(VSPACE), own(FRAME0 + 2), STACK_VA, rw, 0, 0]),
        // A virtual CPU and a guest space with one page of RAM (zeros: the
        // guest executes `add [bx+si], al` until it leaves the page), for
        // random `VcpuRun`s with whatever state the IPC buffer holds.
        // Without SVM both are `Unsupported`.
        (
            Sys::Retype,
            [
                untyped,
                ObjectType::Vcpu as u64,
                0,
                caddr::in_table(TABLE, VCPU_IN_TABLE as u32),
                1,
                0,
            ],
        ),
        (
            Sys::Retype,
            [
                untyped,
                ObjectType::GuestSpace as u64,
                14,
                caddr::in_table(TABLE, GSPACE_IN_TABLE as u32),
                1,
                0,
            ],
        ),
        (
            Sys::Map,
            [
                caddr::in_table(TABLE, GSPACE_IN_TABLE as u32),
                own(FRAME0 + 3),
                0,
                rwx,
                0,
                0,
            ],
        ),
        (
            Sys::ThreadConfigure,
            [own(THREAD0), own(TABLE), own(VSPACE), DATA_VA, own(EP0), 0],
        ),
        // At the fuzzer's priority, so it runs (and faults) when the
        // fuzzer yields; the other thread gets a random priority.
        (
            Sys::ThreadSetSchedParams,
            [own(THREAD0), u64::from(child::PRIORITY), 0, 0, 0, 0],
        ),
        (Sys::ThreadSetSchedParams, [own(THREAD1), prio, 0, 0, 0, 0]),
        (
            Sys::ThreadStart,
            [own(THREAD0), CODE_VA, STACK_VA + 0x1000, index, 0, 0],
        ),
        (
            Sys::ThreadConfigure,
            [own(THREAD1), own(TABLE), own(VSPACE), 0, 0, 0],
        ),
        (
            Sys::BindNotification,
            [own(THREAD1), own(NTFN1), 0, 0, 0, 0],
        ),
        (
            Sys::Retype,
            [own(CHILD_UNTYPED), ep, 0, caddr::in_table(TABLE, 4), 3, 0],
        ),
        // Thread 0 runs, faults and waits on endpoint 8; its fault is
        // received and saved, so random `ReplyTo`s, deletes and revokes
        // meet a live reply capability (and a stale one once the thread is
        // gone).
        (Sys::Yield, [0; 6]),
        (Sys::NbRecv, [own(EP0), 0, 0, 0, 0, 0]),
        (Sys::SaveReply, [own(REPLY), 0, 0, 0, 0, 0]),
        (
            Sys::Retype,
            [
                own(CHILD_UNTYPED),
                frame,
                0,
                caddr::in_table(TABLE, 8),
                2,
                0,
            ],
        ),
    ];
    for (sys, args) in steps {
        set_up_call(stats, index, sys, args);
    }
}

/// One call of the set-up, counted like a random one.
fn set_up_call(stats: &mut Stats, index: u64, sys: Sys, args: [u64; 6]) {
    let record = CallRecord {
        index,
        number: sys as u64,
        args,
    };
    // SAFETY: set-up acts only on objects made from the fuzzer's untyped
    // and on its own capability slots, never on its own memory.
    let (rax, _) = unsafe { syscall::raw(sys, args) };
    account(stats, &record, rax);
}

/// Prints the result histogram and the successes per call.
fn print_stats(stats: &Stats) {
    let mut out = rt::print::DebugWriter::new();
    use core::fmt::Write;
    let _ = write!(out, "fuzzer: results: ok {}", stats.by_result[0]);
    for e in Error::ALL {
        let _ = write!(out, ", {:?} {}", e, stats.by_result[e.raw() as usize]);
    }
    let _ = writeln!(out, ", other {}", stats.by_result[17]);
    let _ = write!(out, "fuzzer: successes per call:");
    for sys in Sys::ALL {
        let _ = write!(out, " {} {}", sys.name(), stats.ok_by_call[*sys as usize]);
    }
    let _ = writeln!(out);
}

/// Calls the pinger with `FUZZER_DONE`; true if it acknowledged.
fn tell_pinger() -> bool {
    let info = MsgInfo::new(ping::FUZZER_DONE, 2, 0).expect("valid message info");
    let words = [ping::DONE_MAGIC0, ping::DONE_MAGIC1, 0, 0];
    match syscall::call(caddr::own(SERVICE_ENDPOINT), info, words) {
        Ok((reply, _)) if reply.label() == ping::DONE_ACK => {
            println!("fuzzer: the pinger acknowledged");
            true
        }
        Ok((reply, _)) => {
            println!(
                "fuzzer: FAILED: the pinger answered label {:#x} to FUZZER_DONE",
                reply.label()
            );
            false
        }
        Err(e) => {
            println!("fuzzer: FAILED: calling the pinger: {e:?}");
            false
        }
    }
}
