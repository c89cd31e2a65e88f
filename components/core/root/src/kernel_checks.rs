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
//! Prints `root: check <name>: ok` or `FAILED (...)` per check (`rt::check`,
//! counted with the system-call checks of `checks.rs`) and
//! the call round trip: `root: ipc call+reply round trip min=N median=N
//! ticks (same address space, 0 words)`.

use alloc::vec;
use core::sync::atomic::{AtomicU64, Ordering};

use rt::abi::bootinfo::{slot, BootInfo};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::object::io_ports_range;
use rt::abi::{Error, MsgInfo, ObjectType, Rights};
use rt::check::Checks;
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

/// The echo server run by the second thread: answers every call with word
/// 0 + 1, the caller's badge in word 1 and the received length; words 4..
/// (which arrived in this thread's IPC buffer) go back incremented by one.
extern "C" fn echo_server(endpoint: u64) -> ! {
    let mut received = syscall::recv(endpoint);
    loop {
        received = match received {
            Ok((word, info, _)) if info.label() == rt::abi::LABEL_NOTIFICATION => {
                NOTIFIED.store(word, Ordering::Relaxed);
                syscall::recv(endpoint)
            }
            Ok((_, info, w)) if info.label() == ONE_WAY_LABEL => {
                // Timestamp right after the call arrived, and one in the
                // reply right before it leaves (sel4bench's method).
                let arrived = rdtsc();
                ONE_WAY_CALL.store(arrived.wrapping_sub(w[3]), Ordering::Relaxed);
                syscall::reply_recv(endpoint, MsgInfo::default(), [0, 0, 0, rdtsc()])
            }
            Ok((badge, info, w)) => {
                // SAFETY: this thread's IPC buffer, mapped for it alone.
                let buffer =
                    unsafe { &mut *(SERVER_IPC_BUFFER as *mut rt::abi::ipc_buffer::IpcBuffer) };
                for word in buffer.words.iter_mut().take(info.length()).skip(4) {
                    *word = word.wrapping_add(1);
                }
                let reply = MsgInfo::new(info.label(), info.length(), 0).unwrap_or_default();
                let caps = info.caps() as u64;
                syscall::reply_recv(endpoint, reply, [w[0].wrapping_add(1), badge, caps, w[3]])
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

/// Runs the checks, counting them in `c`.
pub fn run(info: &BootInfo, c: &mut Checks) {
    let Some(source) = info
        .untyped()
        .iter()
        .position(|u| u.device == 0 && u.size_bits >= 21)
    else {
        c.expect("setup", false, format_args!("no untyped of 2 MiB"));
        return;
    };
    let source = u64::from(slot::UNTYPED_FIRST) + source as u64;
    c.result(
        "retype-untyped",
        syscall::retype(source, ObjectType::Untyped, 20, SCRATCH_UNTYPED, 1),
        Ok(()),
    );
    let u = SCRATCH_UNTYPED;
    c.result(
        "retype-endpoint",
        syscall::retype(u, ObjectType::Endpoint, 0, EP, 1),
        Ok(()),
    );
    c.result(
        "retype-notification",
        syscall::retype(u, ObjectType::Notification, 0, NOTIFICATION, 1),
        Ok(()),
    );
    c.result(
        "retype-thread",
        syscall::retype(u, ObjectType::Thread, 0, THREAD, 1),
        Ok(()),
    );
    c.result(
        "retype-frames",
        syscall::retype(u, ObjectType::Frame4K, 0, FRAMES, FRAME_COUNT),
        Ok(()),
    );
    c.result(
        "retype-into-occupied-slot",
        syscall::retype(u, ObjectType::Endpoint, 0, EP, 1),
        Err(Error::SlotOccupied),
    );
    c.result(
        "retype-too-big",
        syscall::retype(u, ObjectType::Untyped, 21, SPARE, 1),
        Err(Error::OutOfMemory),
    );
    c.result(
        "mint-badged-endpoint",
        syscall::cap_mint(EP, EP_BADGED, Rights::WRITE, BADGE),
        Ok(()),
    );
    c.result(
        "mint-more-rights",
        syscall::cap_mint(EP_BADGED, SPARE, Rights::ALL, 0),
        Err(Error::MissingRights),
    );

    // Memory for the second thread, mapped into root's own space.
    for i in 0..FRAME_COUNT {
        // SAFETY: AREA is far from root's image, stack and heap; nothing of
        // root's lives there.
        let r = unsafe { syscall::map(slot::VSPACE.into(), FRAMES + i, AREA + i * 4096, rw()) };
        c.result("map-frame", r, Ok(()));
    }
    // SAFETY: as above; mapping the same capability twice must fail.
    let again = unsafe { syscall::map(slot::VSPACE.into(), FRAMES, AREA + 0x10_0000, rw()) };
    c.result("map-same-cap-twice", again, Err(Error::InvalidState));
    c.result("copy-frame", syscall::cap_copy(FRAMES + 3, SPARE), Ok(()));
    // SAFETY: SCRATCH is already mapped: the kernel must refuse.
    let taken = unsafe { syscall::map(slot::VSPACE.into(), SPARE, SCRATCH, rw()) };
    c.result("map-over-mapping", taken, Err(Error::AlreadyMapped));
    // SAFETY: a kernel address: the kernel must refuse.
    let kernel = unsafe { syscall::map(slot::VSPACE.into(), SPARE, 0xffff_8000_0000_0000, rw()) };
    c.result("map-kernel-address", kernel, Err(Error::InvalidArgument));
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
    c.result(
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
    c.result(
        "thread-priority-above-own",
        syscall::thread_set_sched_params(THREAD, 255, 0),
        Err(Error::InvalidArgument),
    );
    c.result(
        "thread-priority",
        syscall::thread_set_sched_params(THREAD, rt::interfaces::child::ROOT_PRIORITY, 0),
        Ok(()),
    );
    // SAFETY: the new thread runs echo_server on its own stack (mapped
    // above) and touches nothing else of root's; rsp is as after a call.
    let started = unsafe {
        syscall::thread_start(THREAD, echo_server as *const () as u64, STACK_TOP - 8, EP)
    };
    c.result("thread-start", started, Ok(()));

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
    c.result(
        "nb-recv-nobody-sends",
        syscall::nb_recv(EP),
        Err(Error::WouldBlock),
    );
    c.result(
        "reply-without-caller",
        syscall::reply(MsgInfo::default(), [0; 4]),
        Err(Error::NoCaller),
    );
    c.result(
        "send-needs-write",
        syscall::cap_mint(EP, SPARE + 1, Rights::READ, 0)
            .and_then(|()| syscall::send(SPARE + 1, MsgInfo::default(), [0; 4])),
        Err(Error::MissingRights),
    );

    // Notifications.
    c.result("signal", syscall::signal(NOTIFICATION), Ok(()));
    c.result("signal-twice", syscall::signal(NOTIFICATION), Ok(()));
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
    c.result(
        "wait-on-endpoint",
        syscall::wait(EP),
        Err(Error::WrongObjectType),
    );

    transfer_and_bind_checks(c);
    measure_call(c);
    irq_check(c, info);
    pager_check(c);
    priority_checks(c);
    device_memory_check(c, info);
    device_control_check(c, info);

    // Revoking the untyped destroys everything made from it, the running
    // server thread included.
    // SAFETY: the revoked frames are mapped only at AREA, which root no
    // longer uses after this.
    c.result(
        "revoke-untyped",
        unsafe { syscall::cap_revoke(SCRATCH_UNTYPED) },
        Ok(()),
    );
    c.result(
        "endpoint-gone-after-revoke",
        syscall::call(EP, MsgInfo::default(), [0; 4]),
        Err(Error::EmptySlot),
    );
    c.result(
        "retype-again-after-revoke",
        syscall::retype(SCRATCH_UNTYPED, ObjectType::Untyped, 20, SPARE + 2, 1),
        Ok(()),
    );
    // SAFETY: an untyped capability maps nothing.
    let _ = unsafe { syscall::cap_revoke(SCRATCH_UNTYPED) };
    // SAFETY: as above.
    let _ = unsafe { syscall::cap_delete(SCRATCH_UNTYPED) };
}

const IRQ_NOTIFICATION: u64 = FIRST + 20;
const FAULT_EP: u64 = FIRST + 30;
const FAULT_EP_BADGED: u64 = FIRST + 31;
const WORKERS: u64 = FIRST + 40; // 3 threads
const WORKER_FRAMES: u64 = FIRST + 43; // 3 stack frames
const DONE: u64 = FIRST + 36;
const PAGER_FRAME: u64 = FIRST + 37;
/// The worker threads' stacks (one page each) and the page the pager maps.
const WORKER_AREA: u64 = AREA + 0x10_0000;
const PAGED: u64 = AREA + 0x20_0000;
const PAGED_VALUE: u64 = 0xabc;
const FAULT_BADGE: u64 = 0x77;

/// Counters of the worker threads.
static COUNTS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

fn worker_stack(i: u64) -> u64 {
    WORKER_AREA + (i + 1) * 4096 - 8
}

/// Makes and configures worker thread `i` (stack mapped, root's spaces,
/// `fault` as its fault endpoint) at `priority`; returns its slot.
fn make_worker(c: &mut Checks, i: u64, fault: u64, priority: u8) -> u64 {
    let t = WORKERS + i;
    let frame = WORKER_FRAMES + i;
    // SAFETY: WORKER_AREA is unused by root; slots from the scratch untyped.
    let r = syscall::retype(SCRATCH_UNTYPED, ObjectType::Thread, 0, t, 1)
        .and_then(|()| syscall::retype(SCRATCH_UNTYPED, ObjectType::Frame4K, 0, frame, 1))
        .and_then(|()| unsafe {
            syscall::map(slot::VSPACE.into(), frame, WORKER_AREA + i * 4096, rw())
        })
        .and_then(|()| {
            syscall::thread_configure(t, slot::CSPACE.into(), slot::VSPACE.into(), 0, fault)
        })
        .and_then(|()| syscall::thread_set_sched_params(t, priority, 0));
    c.result("worker-setup", r, Ok(()));
    t
}

/// Reads the page the pager will map; exits with the value read.
extern "C" fn paged_reader(_: u64) -> ! {
    // SAFETY: deliberately touches an unmapped page: the fault goes to the
    // pager (root), which maps it and resumes this thread.
    let value = unsafe { core::ptr::read_volatile(PAGED as *const u64) };
    syscall::thread_exit(value as i32)
}

/// A pager: a thread's page fault arrives at its fault endpoint as a
/// message; the handler maps a frame there and replies, the thread retries
/// the access and goes on; its exit arrives the same way.
fn pager_check(c: &mut Checks) {
    let r = syscall::retype(SCRATCH_UNTYPED, ObjectType::Endpoint, 0, FAULT_EP, 1)
        .and_then(|()| syscall::cap_mint(FAULT_EP, FAULT_EP_BADGED, Rights::WRITE, FAULT_BADGE));
    c.result("fault-endpoint", r, Ok(()));
    let t = make_worker(c, 2, FAULT_EP_BADGED, 150);
    // SAFETY: the worker runs paged_reader on its own stack.
    let r =
        unsafe { syscall::thread_start(t, paged_reader as *const () as u64, worker_stack(2), 0) };
    c.result("pager-start", r, Ok(()));
    let fault = syscall::recv(FAULT_EP);
    let ok = matches!(fault, Ok((badge, info, w))
        if badge == FAULT_BADGE && info.label() == rt::abi::fault::LABEL_PAGE_FAULT && w[0] == PAGED);
    c.expect("page-fault-message", ok, format_args!("{fault:?}"));
    let r = syscall::retype(SCRATCH_UNTYPED, ObjectType::Frame4K, 0, PAGER_FRAME, 1)
        // SAFETY: PAGED is unused by root; mapped for the worker (same space).
        .and_then(|()| unsafe { syscall::map(slot::VSPACE.into(), PAGER_FRAME, PAGED, rw()) })
        // SAFETY: the frame was just mapped writable at PAGED (the map
        // succeeded), and nothing else of root's uses that page.
        .map(|()| unsafe { core::ptr::write_volatile(PAGED as *mut u64, PAGED_VALUE) })
        .and_then(|()| syscall::reply(MsgInfo::default(), [0; 4]));
    c.result("pager-map-and-reply", r, Ok(()));
    let exit = syscall::recv(FAULT_EP);
    let ok = matches!(exit, Ok((badge, info, w))
        if badge == FAULT_BADGE && info.label() == rt::abi::fault::LABEL_EXIT && w[0] == PAGED_VALUE);
    c.expect("pager-resumed-thread", ok, format_args!("{exit:?}"));
}

/// Counts, and signals DONE once it has seen the other worker run while it
/// was running itself (possible only if the timer preempts), then exits.
extern "C" fn spinner(i: u64) -> ! {
    let other = &COUNTS[(i as usize + 1) % 2];
    let mine = &COUNTS[i as usize % 2];
    let seen = other.load(Ordering::Relaxed);
    loop {
        mine.fetch_add(1, Ordering::Relaxed);
        if other.load(Ordering::Relaxed) != seen {
            break;
        }
    }
    // One more step: the other worker may have read its `seen` after our
    // last step (when the timer preempted us between the add and the
    // load); without this it would wait for us forever.
    mine.fetch_add(1, Ordering::Relaxed);
    let _ = syscall::signal(DONE);
    syscall::thread_exit(0)
}

/// A lower-priority thread runs only while root waits, and a signal from
/// it makes root run again at once; two equal-priority threads that never
/// yield are interleaved by the timer.
fn priority_checks(c: &mut Checks) {
    c.result(
        "done-notification",
        syscall::retype(SCRATCH_UNTYPED, ObjectType::Notification, 0, DONE, 1),
        Ok(()),
    );
    COUNTS[0].store(0, Ordering::Relaxed);
    COUNTS[1].store(0, Ordering::Relaxed);
    let a = make_worker(c, 0, 0, 100);
    let b = make_worker(c, 1, 0, 100);
    for (t, i) in [(a, 0), (b, 1)] {
        // SAFETY: each worker runs spinner on its own stack.
        let r =
            unsafe { syscall::thread_start(t, spinner as *const () as u64, worker_stack(i), i) };
        c.result("spinner-start", r, Ok(()));
    }
    let _ = syscall::yield_now();
    let before = COUNTS[0].load(Ordering::Relaxed) + COUNTS[1].load(Ordering::Relaxed);
    c.expect(
        "lower-priority-waits",
        before == 0,
        format_args!("the workers counted {before} while root was runnable"),
    );
    let mut signals = 0;
    while signals < 2 {
        match syscall::wait(DONE) {
            Ok(bits) => signals += bits.count_ones().max(1),
            Err(e) => {
                c.expect("wait-done", false, format_args!("{e:?}"));
                return;
            }
        }
    }
    let (n0, n1) = (
        COUNTS[0].load(Ordering::Relaxed),
        COUNTS[1].load(Ordering::Relaxed),
    );
    c.expect(
        "timeslice-preemption",
        n0 > 0 && n1 > 0,
        format_args!("counts {n0} / {n1}"),
    );
}
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
    c.result(
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
        c.result("irq-bind", r, Ok(()));
    }
    c.result(
        "irq-ack-unbound-line",
        syscall::irq_ack(line(1)),
        Err(Error::InvalidState),
    );
    c.result(
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
    c.result("io-port-write", started, Ok(()));
    c.result(
        "io-port-bad-width",
        syscall::io_port_read(ports, 0x40, 3),
        Err(Error::InvalidArgument),
    );
    io_ports_narrow_check(c, ports);
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
    c.expect(
        "bootinfo-isa-irq-0-gsi",
        info.isa_gsi(0) == Some(gsi),
        format_args!(
            "boot info says {:?}, the PIT interrupted on GSI {gsi}",
            info.isa_gsi(0)
        ),
    );
    println!("root: irq: {IRQ_ROUNDS} PIT interrupts received on GSI {gsi} through a notification");
}

const NARROW_PORTS: u64 = FIRST + 27;
const NARROWER_PORTS: u64 = FIRST + 28;

/// `CapMint` narrows an I/O-port capability to a sub-range
/// (`abi::object::io_ports_range`): ports outside it, a range beyond the
/// source's, a reversed range and stray high bits are refused.
fn io_ports_narrow_check(c: &mut Checks, ports: u64) {
    let mint = |src, word| syscall::cap_mint(src, NARROWER_PORTS, Rights::ALL, word);
    c.result(
        "io-ports-narrow",
        syscall::cap_mint(ports, NARROW_PORTS, Rights::ALL, io_ports_range(0x40, 0x43)),
        Ok(()),
    );
    // Channel 1's counter (unused: reading it only flips its byte order).
    c.result(
        "io-ports-narrow-inside",
        syscall::io_port_read(NARROW_PORTS, 0x41, 1).map(|_| ()),
        Ok(()),
    );
    for (name, port, width) in [
        ("io-ports-narrow-below", 0x3f, 1),
        ("io-ports-narrow-above", 0x44, 1),
        ("io-ports-narrow-straddles", 0x42, 4),
    ] {
        c.result(
            name,
            syscall::io_port_read(NARROW_PORTS, port, width).map(|_| ()),
            Err(Error::InvalidArgument),
        );
    }
    for (name, src, word) in [
        (
            "io-ports-mint-beyond",
            NARROW_PORTS,
            io_ports_range(0x40, 0x44),
        ),
        ("io-ports-mint-reversed", ports, io_ports_range(0x43, 0x40)),
        ("io-ports-mint-high-bits", ports, 1 << 32),
    ] {
        c.result(name, mint(src, word), Err(Error::InvalidArgument));
    }
    c.result(
        "io-ports-narrow-again",
        mint(NARROW_PORTS, io_ports_range(0x41, 0x41)),
        Ok(()),
    );
    for slot in [NARROWER_PORTS, NARROW_PORTS] {
        // SAFETY: I/O-port capabilities; nothing is mapped through them.
        let _ = unsafe { syscall::cap_delete(slot) };
    }
}

/// QEMU q35's PCI configuration window (ECAM), bus 0 device 0 function 0
/// first: the host bridge, whose vendor is Intel.
const ECAM: u64 = 0xb000_0000;
const INTEL: u32 = 0x8086;
const DEVICE_SLOTS: u64 = FIRST + 60; // up to 40 slots
const DEVICE_VADDR: u64 = AREA + 0x30_0000;

/// Device memory: a frame made from device untyped memory at the PCI
/// configuration window, mapped uncached, reads the host bridge's vendor
/// id; the kernel refuses to read it as user memory (it is not RAM).
fn device_memory_check(c: &mut Checks, info: &BootInfo) {
    let Some(index) = info
        .untyped()
        .iter()
        .position(|u| u.device == 1 && u.phys <= ECAM && ECAM < u.phys + (1u64 << u.size_bits))
    else {
        c.expect(
            "device-untyped",
            false,
            format_args!("no device untyped covers {ECAM:#x}"),
        );
        return;
    };
    let untyped = u64::from(slot::UNTYPED_FIRST) + index as u64;
    // Carve untyped pieces off the watermark until it reaches ECAM.
    let mut next = DEVICE_SLOTS;
    let below = rt::abi::object::aligned_blocks(
        info.untyped()[index].phys,
        ECAM,
        rt::abi::object::MIN_UNTYPED_BITS,
        rt::abi::object::MAX_UNTYPED_BITS,
    );
    for (_, bits) in below {
        if let Err(e) = syscall::retype(untyped, ObjectType::Untyped, u64::from(bits), next, 1) {
            c.expect("device-carve", false, format_args!("{e:?}"));
            return;
        }
        next += 1;
    }
    let frame = next;
    c.result(
        "device-frame",
        syscall::retype(untyped, ObjectType::Frame4K, 0, frame, 1),
        Ok(()),
    );
    c.result(
        "device-no-kernel-objects",
        syscall::retype(untyped, ObjectType::Endpoint, 0, frame + 1, 1),
        Err(Error::InvalidArgument),
    );
    let uncached = MapAttr {
        writable: false,
        executable: false,
        cache: Cache::Uncached,
    };
    // SAFETY: DEVICE_VADDR is unused by root; the page is read only here.
    let mapped = unsafe { syscall::map(slot::VSPACE.into(), frame, DEVICE_VADDR, uncached) };
    c.result("device-map-uncached", mapped, Ok(()));
    if mapped.is_ok() {
        // SAFETY: just mapped: PCI configuration space of 00:00.0.
        let id = unsafe { core::ptr::read_volatile(DEVICE_VADDR as *const u32) };
        c.expect(
            "device-read-host-bridge",
            id & 0xffff == INTEL,
            format_args!("vendor/device {id:#010x}"),
        );
        c.result(
            "device-memory-is-not-user-memory-to-the-kernel",
            syscall::debug_write_raw(DEVICE_VADDR, 4),
            Err(Error::BadAddress),
        );
    }
    // SAFETY: revokes only what this check made (mapped at DEVICE_VADDR).
    let _ = unsafe { syscall::cap_revoke(untyped) };
}

/// The device control capability: the physical address of an untyped
/// block is the one the boot information gives; MSI vectors only for
/// CPUs that are online, only into empty slots (the success path costs a
/// vector for good: the platform test takes it).
fn device_control_check(c: &mut Checks, info: &BootInfo) {
    let control = u64::from(slot::DEVICE_CONTROL);
    if let Some((i, u)) = info.untyped().iter().enumerate().next() {
        let got = syscall::phys_address(control, u64::from(slot::UNTYPED_FIRST) + i as u64);
        c.expect(
            "phys-address-untyped",
            got.is_ok_and(|p| p.phys == u.phys && p.size_bits == u32::from(u.size_bits)),
            format_args!("{got:?} for {:#x} ({} bits)", u.phys, u.size_bits),
        );
    }
    // The control capability's own "address": the MCFG's window.
    let window = syscall::phys_address(control, control);
    c.expect(
        "phys-address-pci-window",
        window.is_ok_and(|w| w.phys == ECAM && w.device),
        format_args!("{window:?}"),
    );
    c.result(
        "msi-alloc-cpu-offline",
        syscall::msi_alloc(control, DEVICE_SLOTS + 45, info.cpu_count as u32).map(|_| ()),
        Err(Error::InvalidArgument),
    );
    c.result(
        "msi-alloc-occupied-slot",
        syscall::msi_alloc(control, control, 0).map(|_| ()),
        Err(Error::SlotOccupied),
    );
}

const WARM_UP: usize = 100;
/// Label of the one-way measurement messages; word 3 carries the sender's
/// timestamp.
const ONE_WAY_LABEL: u64 = 0x0e;
static ONE_WAY_CALL: AtomicU64 = AtomicU64::new(0);
/// The notification word the echo server last received through its bound
/// notification.
static NOTIFIED: AtomicU64 = AtomicU64::new(0);
const RECEIVED_CAP: u64 = FIRST + 25;
const NOTIFICATION_BADGED: u64 = FIRST + 26;

/// A capability travels in a message (only with `GRANT`), and a
/// notification bound to the server's thread reaches it through `Recv`.
fn transfer_and_bind_checks(c: &mut Checks) {
    // SAFETY: root's and the server's IPC buffers, used by nobody else now
    // (the server is blocked in Recv).
    let (mine, server) = unsafe {
        (
            &mut *(rt::abi::MAIN_IPC_BUFFER_ADDR as *mut rt::abi::ipc_buffer::IpcBuffer),
            &mut *(SERVER_IPC_BUFFER as *mut rt::abi::ipc_buffer::IpcBuffer),
        )
    };
    mine.send_cap = NOTIFICATION;
    server.recv_slot = RECEIVED_CAP;
    let with_cap = MsgInfo::new(9, 0, 1).unwrap_or_default();
    c.result(
        "cap-transfer-needs-grant",
        syscall::call(EP_BADGED, with_cap, [0; 4]),
        Err(Error::MissingRights),
    );
    let reply = syscall::call(EP, with_cap, [0; 4]);
    c.expect(
        "cap-transfer",
        matches!(reply, Ok((_, w)) if w[2] == 1) && syscall::signal(RECEIVED_CAP).is_ok(),
        format_args!("{reply:?}"),
    );
    c.expect(
        "transferred-cap-works",
        syscall::poll(NOTIFICATION) == Ok(1),
        format_args!("the signal through the transferred capability did not arrive"),
    );
    server.recv_slot = 0;
    let reply = syscall::call(EP, with_cap, [0; 4]);
    c.expect(
        "cap-refused-without-receive-slot",
        matches!(reply, Ok((_, w)) if w[2] == 0),
        format_args!("{reply:?}"),
    );
    mine.send_cap = 0;

    c.result(
        "bind-notification",
        syscall::bind_notification(THREAD, NOTIFICATION),
        Ok(()),
    );
    c.result(
        "bind-notification-twice",
        syscall::bind_notification(THREAD, NOTIFICATION),
        Err(Error::InvalidState),
    );
    let r = syscall::cap_mint(NOTIFICATION, NOTIFICATION_BADGED, Rights::WRITE, 0x30)
        .and_then(|()| syscall::signal(NOTIFICATION_BADGED));
    c.result("signal-bound", r, Ok(()));
    // The server (same priority) runs when root yields; a timer tick can
    // preempt it between receiving and recording, so give it a few turns.
    let mut word = 0;
    for _ in 0..100 {
        let _ = syscall::yield_now();
        word = NOTIFIED.load(Ordering::Relaxed);
        if word != 0 {
            break;
        }
    }
    c.expect(
        "bound-notification-through-recv",
        word == 0x30,
        format_args!("the server saw {word:#x}"),
    );
    c.result(
        "unbind-notification",
        syscall::bind_notification(THREAD, 0),
        Ok(()),
    );
    // The server still answers calls afterwards.
    let reply = syscall::call(EP, MsgInfo::new(1, 1, 0).unwrap_or_default(), [5, 0, 0, 0]);
    c.expect(
        "server-after-notification",
        matches!(reply, Ok((_, w)) if w[0] == 6),
        format_args!("{reply:?}"),
    );
}
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
    // One way, sel4bench style: timestamp in the sender right before the
    // system call, in the receiver right after it; rdtsc overhead
    // subtracted.
    let info = MsgInfo::new(ONE_WAY_LABEL, 0, 0).unwrap_or_default();
    let mut calls = vec![0u64; SAMPLES];
    let mut replies = vec![0u64; SAMPLES];
    for i in 0..WARM_UP + SAMPLES {
        let reply = syscall::call(EP, info, [0, 0, 0, rdtsc()]);
        let back = rdtsc();
        if let (Some(slot), Ok((_, w))) = (i.checked_sub(WARM_UP), reply) {
            calls[slot] = ONE_WAY_CALL
                .load(Ordering::Relaxed)
                .saturating_sub(overhead);
            replies[slot] = back.wrapping_sub(w[3]).saturating_sub(overhead);
        }
    }
    calls.sort_unstable();
    replies.sort_unstable();
    println!(
        "root: ipc one-way call min={} median={} ticks, reply min={} median={} ticks (same address space, 0 words)",
        calls[0],
        calls[SAMPLES / 2],
        replies[0],
        replies[SAMPLES / 2]
    );
}
