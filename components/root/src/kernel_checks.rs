//! Root's smoke checks of the kernel's object and IPC system calls, run at
//! boot before anything else is started (the thorough per-call tests are
//! the `test-syscalls` component's).
//!
//! Everything is made from one 1 MiB untyped carved from the boot untyped
//! memory into slot [`SCRATCH_UNTYPED`], in slots from [`FIRST`] on (well
//! above what root's own allocator hands out), and at the end that untyped
//! is revoked, which must destroy every object made from it — a second
//! thread included — and leave the slots empty.
//!
//! Prints `root: kernel check <name>: ok` or `FAILED (...)` per check and
//! the call round trip: `root: ipc call+reply round trip min=N median=N
//! ticks (same address space, 0 words)`.

use alloc::vec;

use rt::abi::bootinfo::{slot, BootInfo};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{Error, MsgInfo, ObjectType, Rights};
use rt::println;
use rt::syscall::{self, rdtsc};

/// Slots used here (root's capability space has 4096).
const SCRATCH_UNTYPED: u64 = 3000;
const FIRST: u64 = 3001;
const EP: u64 = FIRST;
const EP_BADGED: u64 = FIRST + 1;
const NOTIFICATION: u64 = FIRST + 2;
const THREAD: u64 = FIRST + 3;
const FRAMES: u64 = FIRST + 4; // 4 frames: stack (2), IPC buffer, scratch
const FRAME_COUNT: u64 = 4;
const SPARE: u64 = FIRST + 10;

/// Where the second thread's stack and IPC buffer are mapped.
const AREA: u64 = 0x0000_0040_0000_0000;
const STACK_TOP: u64 = AREA + 2 * 4096;
const SERVER_IPC_BUFFER: u64 = AREA + 2 * 4096;
const SCRATCH: u64 = AREA + 3 * 4096;
const BADGE: u64 = 0x42;

struct Checks {
    failed: usize,
}

impl Checks {
    fn check<T: core::fmt::Debug>(
        &mut self,
        name: &str,
        got: Result<T, Error>,
        want: Result<(), Error>,
    ) {
        let ok = match (&got, want) {
            (Ok(_), Ok(())) => true,
            (Err(g), Err(w)) => *g == w,
            _ => false,
        };
        if ok {
            println!("root: kernel check {name}: ok");
        } else {
            println!("root: kernel check {name}: FAILED (got {got:?}, want {want:?})");
            self.failed += 1;
        }
    }

    fn expect(&mut self, name: &str, ok: bool, detail: core::fmt::Arguments) {
        if ok {
            println!("root: kernel check {name}: ok");
        } else {
            println!("root: kernel check {name}: FAILED ({detail})");
            self.failed += 1;
        }
    }
}

/// The echo server run by the second thread: answers every call with word
/// 0 + 1, the caller's badge in word 1 and the received length; words 4..
/// (which arrived in this thread's IPC buffer) go back incremented by one.
extern "C" fn echo_server(endpoint: u64) -> ! {
    let mut received = syscall::recv(endpoint);
    loop {
        received = match received {
            Ok((badge, info, w)) => {
                // SAFETY: this thread's IPC buffer, mapped for it alone.
                let buffer =
                    unsafe { &mut *(SERVER_IPC_BUFFER as *mut rt::abi::ipc_buffer::IpcBuffer) };
                for word in buffer.words.iter_mut().take(info.length()).skip(4) {
                    *word = word.wrapping_add(1);
                }
                let reply = MsgInfo::new(info.label(), info.length(), 0).unwrap_or_default();
                syscall::reply_recv(endpoint, reply, [w[0].wrapping_add(1), badge, w[2], w[3]])
            }
            Err(_) => syscall::recv(endpoint),
        }
    }
}

fn rw() -> MapAttr {
    MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    }
}

/// Runs the checks; returns how many failed.
pub fn run(info: &BootInfo) -> usize {
    let mut c = Checks { failed: 0 };
    let Some(source) = info
        .untyped()
        .iter()
        .position(|u| u.device == 0 && u.size_bits >= 21)
    else {
        println!("root: kernel check setup: FAILED (no untyped of 2 MiB)");
        return 1;
    };
    let source = u64::from(slot::UNTYPED_FIRST) + source as u64;
    c.check(
        "retype-untyped",
        syscall::retype(source, ObjectType::Untyped, 20, SCRATCH_UNTYPED, 1),
        Ok(()),
    );
    let u = SCRATCH_UNTYPED;
    c.check(
        "retype-endpoint",
        syscall::retype(u, ObjectType::Endpoint, 0, EP, 1),
        Ok(()),
    );
    c.check(
        "retype-notification",
        syscall::retype(u, ObjectType::Notification, 0, NOTIFICATION, 1),
        Ok(()),
    );
    c.check(
        "retype-thread",
        syscall::retype(u, ObjectType::Thread, 0, THREAD, 1),
        Ok(()),
    );
    c.check(
        "retype-frames",
        syscall::retype(u, ObjectType::Frame4K, 0, FRAMES, FRAME_COUNT),
        Ok(()),
    );
    c.check(
        "retype-into-occupied-slot",
        syscall::retype(u, ObjectType::Endpoint, 0, EP, 1),
        Err(Error::SlotOccupied),
    );
    c.check(
        "retype-too-big",
        syscall::retype(u, ObjectType::Untyped, 21, SPARE, 1),
        Err(Error::OutOfMemory),
    );
    c.check(
        "mint-badged-endpoint",
        syscall::cap_mint(EP, EP_BADGED, Rights::WRITE, BADGE),
        Ok(()),
    );
    c.check(
        "mint-more-rights",
        syscall::cap_mint(EP_BADGED, SPARE, Rights::ALL, 0),
        Err(Error::MissingRights),
    );

    // Memory for the second thread, mapped into root's own space.
    for i in 0..FRAME_COUNT {
        // SAFETY: AREA is far from root's image, stack and heap; nothing of
        // root's lives there.
        let r = unsafe { syscall::map(slot::VSPACE.into(), FRAMES + i, AREA + i * 4096, rw()) };
        c.check("map-frame", r, Ok(()));
    }
    // SAFETY: as above; mapping the same capability twice must fail.
    let again = unsafe { syscall::map(slot::VSPACE.into(), FRAMES, AREA + 0x10_0000, rw()) };
    c.check("map-same-cap-twice", again, Err(Error::InvalidState));
    c.check("copy-frame", syscall::cap_copy(FRAMES + 3, SPARE), Ok(()));
    // SAFETY: SCRATCH is already mapped: the kernel must refuse.
    let taken = unsafe { syscall::map(slot::VSPACE.into(), SPARE, SCRATCH, rw()) };
    c.check("map-over-mapping", taken, Err(Error::AlreadyMapped));
    // SAFETY: a kernel address: the kernel must refuse.
    let kernel = unsafe { syscall::map(slot::VSPACE.into(), SPARE, 0xffff_8000_0000_0000, rw()) };
    c.check("map-kernel-address", kernel, Err(Error::InvalidArgument));
    // SAFETY: SCRATCH was just mapped writable and is used only here.
    let value = unsafe {
        core::ptr::write_volatile(SCRATCH as *mut u64, 0x1234_5678);
        core::ptr::read_volatile(SCRATCH as *const u64)
    };
    c.expect(
        "frame-read-write",
        value == 0x1234_5678,
        format_args!("read {value:#x}"),
    );

    // The second thread: an echo server on EP.
    c.check(
        "thread-configure",
        syscall::thread_configure(
            THREAD,
            slot::CSPACE.into(),
            slot::VSPACE.into(),
            SERVER_IPC_BUFFER,
            0,
        ),
        Ok(()),
    );
    c.check(
        "thread-priority-above-own",
        syscall::thread_set_sched_params(THREAD, 255, 0),
        Err(Error::InvalidArgument),
    );
    c.check(
        "thread-priority",
        syscall::thread_set_sched_params(THREAD, rt::abi::child::ROOT_PRIORITY, 0),
        Ok(()),
    );
    // SAFETY: the new thread runs echo_server on its own stack (mapped
    // above) and touches nothing else of root's; rsp is as after a call.
    let started = unsafe {
        syscall::thread_start(THREAD, echo_server as *const () as u64, STACK_TOP - 8, EP)
    };
    c.check("thread-start", started, Ok(()));

    let reply = syscall::call(
        EP_BADGED,
        MsgInfo::new(7, 1, 0).unwrap_or_default(),
        [41, 0, 0, 0],
    );
    c.expect(
        "call-reply",
        matches!(reply, Ok((info, w)) if w[0] == 42 && w[1] == BADGE && info.label() == 7),
        format_args!("{reply:?}"),
    );
    // A long message: words 4..64 through the IPC buffers.
    // SAFETY: root's IPC buffer page is mapped by the kernel for root and
    // used by no one else.
    let buffer =
        unsafe { &mut *(rt::abi::MAIN_IPC_BUFFER_ADDR as *mut rt::abi::ipc_buffer::IpcBuffer) };
    for (i, w) in buffer.words.iter_mut().enumerate() {
        *w = 1000 + i as u64;
    }
    let reply = syscall::call(EP, MsgInfo::new(8, 64, 0).unwrap_or_default(), [1, 0, 0, 0]);
    let echoed = buffer.words[4..]
        .iter()
        .enumerate()
        .all(|(i, w)| *w == 1005 + i as u64);
    c.expect(
        "call-64-words",
        matches!(reply, Ok((info, _)) if info.length() == 64) && echoed,
        format_args!("{reply:?}, words[4..8] = {:?}", &buffer.words[4..8]),
    );
    c.check(
        "nb-recv-nobody-sends",
        syscall::nb_recv(EP),
        Err(Error::WouldBlock),
    );
    c.check(
        "reply-without-caller",
        syscall::reply(MsgInfo::default(), [0; 4]),
        Err(Error::NoCaller),
    );
    c.check(
        "send-needs-write",
        syscall::cap_mint(EP, SPARE + 1, Rights::READ, 0)
            .and_then(|()| syscall::send(SPARE + 1, MsgInfo::default(), [0; 4])),
        Err(Error::MissingRights),
    );

    // Notifications.
    c.check("signal", syscall::signal(NOTIFICATION), Ok(()));
    c.check("signal-twice", syscall::signal(NOTIFICATION), Ok(()));
    c.expect(
        "poll",
        syscall::poll(NOTIFICATION) == Ok(1),
        format_args!("word"),
    );
    c.expect(
        "poll-empty",
        syscall::poll(NOTIFICATION) == Ok(0),
        format_args!("word"),
    );
    c.check(
        "wait-on-endpoint",
        syscall::wait(EP),
        Err(Error::WrongObjectType),
    );

    measure_call(&mut c);
    irq_check(&mut c, info);

    // Revoking the untyped destroys everything made from it, the running
    // server thread included.
    // SAFETY: the revoked frames are mapped only at AREA, which root no
    // longer uses after this.
    c.check(
        "revoke-untyped",
        unsafe { syscall::cap_revoke(SCRATCH_UNTYPED) },
        Ok(()),
    );
    c.check(
        "endpoint-gone-after-revoke",
        syscall::call(EP, MsgInfo::default(), [0; 4]),
        Err(Error::EmptySlot),
    );
    c.check(
        "retype-again-after-revoke",
        syscall::retype(SCRATCH_UNTYPED, ObjectType::Untyped, 20, SPARE + 2, 1),
        Ok(()),
    );
    // SAFETY: an untyped capability maps nothing.
    let _ = unsafe { syscall::cap_revoke(SCRATCH_UNTYPED) };
    // SAFETY: as above.
    let _ = unsafe { syscall::cap_delete(SCRATCH_UNTYPED) };
    c.failed
}

const IRQ_NOTIFICATION: u64 = FIRST + 20;
/// The PIT's channel-0 registers and the divisor for about 1 kHz.
const PIT_COMMAND: u16 = 0x43;
const PIT_CHANNEL0: u16 = 0x40;
const PIT_DIVISOR: u16 = 1193;
const IRQ_ROUNDS: usize = 5;

/// A user-level driver's interrupt path: the PIT's interrupt (ISA IRQ 0,
/// which the MADT may route to GSI 0 or, as on QEMU, GSI 2: both are bound,
/// with different badges) is bound to a notification; the PIT is started
/// through the I/O-port capability; each interrupt wakes `Wait` and is
/// acknowledged with `IrqAck`. Deleting the notification at the end (by
/// the revoke) masks the lines again.
fn irq_check(c: &mut Checks, info: &BootInfo) {
    if info.irq_count < 3 {
        c.expect(
            "irq-lines",
            false,
            format_args!("only {} IRQ lines", info.irq_count),
        );
        return;
    }
    let line = |gsi: u32| u64::from(slot::IRQ_FIRST + gsi);
    c.check(
        "irq-notification",
        syscall::retype(
            SCRATCH_UNTYPED,
            ObjectType::Notification,
            0,
            IRQ_NOTIFICATION,
            1,
        ),
        Ok(()),
    );
    for (gsi, badge) in [(0u32, 1u64), (2, 4)] {
        let minted = IRQ_NOTIFICATION + 1 + u64::from(gsi);
        let r = syscall::cap_mint(IRQ_NOTIFICATION, minted, Rights::WRITE, badge)
            .and_then(|()| syscall::irq_bind(line(gsi), minted));
        c.check("irq-bind", r, Ok(()));
    }
    c.check(
        "irq-ack-unbound-line",
        syscall::irq_ack(line(1)),
        Err(Error::InvalidState),
    );
    c.check(
        "irq-bind-not-an-irq",
        syscall::irq_bind(EP, IRQ_NOTIFICATION),
        Err(Error::WrongObjectType),
    );
    let ports: u64 = slot::IO_PORTS.into();
    // SAFETY: programs PIT channel 0 (which the kernel does not use: its
    // tick is the local APIC timer) as a rate generator.
    let started = unsafe {
        syscall::io_port_write(ports, PIT_COMMAND, 1, 0x34)
            .and_then(|()| {
                syscall::io_port_write(ports, PIT_CHANNEL0, 1, u32::from(PIT_DIVISOR & 0xff))
            })
            .and_then(|()| {
                syscall::io_port_write(ports, PIT_CHANNEL0, 1, u32::from(PIT_DIVISOR >> 8))
            })
    };
    c.check("io-port-write", started, Ok(()));
    c.check(
        "io-port-bad-width",
        syscall::io_port_read(ports, 0x40, 3),
        Err(Error::InvalidArgument),
    );
    let mut badges = 0;
    for _ in 0..IRQ_ROUNDS {
        match syscall::wait(IRQ_NOTIFICATION) {
            Ok(bits) => {
                badges |= bits;
                for (gsi, badge) in [(0u32, 1u64), (2, 4)] {
                    if bits & badge != 0 {
                        let _ = syscall::irq_ack(line(gsi));
                    }
                }
            }
            Err(e) => {
                c.expect("irq-wait", false, format_args!("{e:?}"));
                break;
            }
        }
    }
    // SAFETY: stops channel 0 (one-shot mode, no count written).
    let _ = unsafe { syscall::io_port_write(ports, PIT_COMMAND, 1, 0x30) };
    let gsi = if badges & 4 != 0 { 2 } else { 0 };
    c.expect(
        "irq-delivered-to-user",
        badges != 0,
        format_args!("no interrupt badge seen"),
    );
    println!("root: irq: {IRQ_ROUNDS} PIT interrupts received on GSI {gsi} through a notification");
}

const WARM_UP: usize = 100;
const SAMPLES: usize = 1000;

/// Call+reply round trips to the echo server (same address space, 0
/// words), sel4bench style: warm-up, then rdtsc around each call, rdtsc
/// overhead subtracted.
fn measure_call(c: &mut Checks) {
    for _ in 0..WARM_UP {
        if let Err(e) = syscall::call(EP, MsgInfo::default(), [0; 4]) {
            c.expect("ipc-warm-up", false, format_args!("{e:?}"));
            return;
        }
    }
    let mut overhead = u64::MAX;
    for _ in 0..SAMPLES {
        let t0 = rdtsc();
        let t1 = rdtsc();
        overhead = overhead.min(t1.wrapping_sub(t0));
    }
    let mut samples = vec![0u64; SAMPLES];
    for s in samples.iter_mut() {
        let t0 = rdtsc();
        let _ = syscall::call(EP, MsgInfo::default(), [0; 4]);
        let t1 = rdtsc();
        *s = t1.wrapping_sub(t0).saturating_sub(overhead);
    }
    samples.sort_unstable();
    println!(
        "root: ipc call+reply round trip min={} median={} ticks (same address space, 0 words)",
        samples[0],
        samples[SAMPLES / 2]
    );
}
