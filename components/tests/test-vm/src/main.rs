//! test-vm: a small VMM and a hostile guest (docs/virtualization.md).
//! Started by root as a test child with its own capabilities
//! (`pecan.start=test-vm:1+own,test-vm:2+own`: two VMMs, two VMs at once).
//!
//! The VMM makes a guest space and a virtual CPU from its own untyped
//! memory, maps [`RAM_PAGES`] frames of its own into the guest space at
//! guest-physical 0 (and into its own address space, to load the code and
//! look at guest memory), loads the hand-assembled guest of [`guest`] and
//! runs it in 32-bit protected mode. It handles every exit itself —
//! decoding the exiting instruction where it needs its length (no decode
//! assists or next-RIP under QEMU's TCG; IOIO's exit info 2 is the one
//! next RIP the hardware gives) — and checks each:
//!
//! - `ram-shared`: the guest's write inside its RAM lands in the VMM's
//!   frame;
//! - `io-out`: `out dx, ax` to port 0x1234 exits with the port, the width,
//!   the value in RAX and exit info 2 = the next RIP (checked against the
//!   VMM's own decode of the instruction's length);
//! - `cpuid-emulated`: `cpuid` exits; the VMM's answer reaches the guest's
//!   registers (the guest sends EBX back through a port);
//! - `msr-read-intercepted`, `msr-write-intercepted`: `rdmsr EFER` and
//!   `wrmsr VM_HSAVE_PA` exit (the MSRs `VMLOAD`/`VMSAVE` switch, such as
//!   LSTAR, pass through: `kcore::svm`);
//! - `npf-host-kernel`, `npf-lapic`, `npf-read`: writes to guest-physical
//!   0x100000 and 0xfee00000 and a read of 0x40000000, outside its RAM,
//!   are nested page faults with that address (the VMM skips the writes
//!   and emulates the read);
//! - `io-probes`: `in 0x60`, `out 0xf4` (QEMU's debug-exit port: had it
//!   reached the machine, QEMU would have stopped) and `out 0xcf8` exit;
//! - `hlt`, `vmmcall`, `svm-instruction` (`stgi`): exit;
//! - `cr4-pke-refused`: `mov cr4` setting PKE exits; the VMM loads the
//!   value and the kernel clears PKE (protection keys' PKRU is outside
//!   the kernel's XCR0: it would outlive the exit);
//! - `guest-fpu-clean-at-start`, `guest-fpu-kept`,
//!   `guest-fpu-not-in-vmm`: the guest finds `xmm0` clean, loads its
//!   instance's own value and finds it again at the end (after thousands
//!   of exits, host preemptions and the other VM's runs), and the VMM's
//!   own `xmm0` is still clean after the guest's exit;
//! - `exit-loop`: 2000 `out`s in a loop, 2000 exits;
//! - `host-runs-during-guest`: while the guest spins without exits, host
//!   interrupts end its runs (counted by `rt::vcpu`) and a ticker thread
//!   of this component (same priority) runs meanwhile;
//! - `triple-fault`: `ud2` with an empty IDT shuts the guest down: a
//!   SHUTDOWN exit, and the VMM ends that VM;
//! - then a second guest on the same VCPU, loaded afresh
//!   ([`run_irq_guest`]): `tsc-offset` (its `rdtsc` sees the offset the
//!   VMM set), `interrupt-window` (a pending virtual interrupt with the
//!   window exit asked for: a VINTR exit once the guest enables
//!   interrupts), `event-injected` (an external interrupt injected then
//!   runs the guest's handler for its vector), `virq-delivered` (a
//!   virtual interrupt left pending is taken by the guest through its IDT
//!   after a `hlt`), `irq-guest-done`;
//! - a third guest entered straight in 64-bit long mode (paging, EFER,
//!   a 64-bit code segment loaded by the VMM): `long-mode` (its 64-bit
//!   RAX reaches the VMM whole, EFER.LMA is set);
//! - `refusals`: bad runs are errors (wrong object types, missing rights,
//!   unknown flags, a bad event, no such slot) and a thread whose
//!   capability space lacks the VCPU cannot run it.
//!
//! Output: `test-vm[N]: check <name>: ok` / `FAILED (...)` and a closing
//! `test-vm[N]: C checks, F failed`; the exit code is F.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod guest;

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use rt::abi::caddr::{in_table, own};
use rt::abi::fault::LABEL_EXIT;
use rt::abi::map::{Cache, MapAttr};
use rt::abi::vcpu::{event, exit, ioio, load, segment as seg, virq, word};
use rt::abi::{Error, ObjectType, Rights, Sys};
use rt::check::Checks;
use rt::interfaces::child;
use rt::println;
use rt::syscall;
use rt::vcpu::Vcpu;

rt::entry!(main);

const FIRST: u64 = child::FIRST_FREE as u64;
const GSPACE: u64 = FIRST;
const VCPU: u64 = FIRST + 1;
/// A read-only copy of the VCPU, a guest space copy without WRITE.
const VCPU_RO: u64 = FIRST + 2;
const GSPACE_RO: u64 = FIRST + 3;
/// The helper without the VCPU: its thread, its capability table, its
/// fault endpoint, its stack frames.
const HELPER: u64 = FIRST + 4;
const HELPER_TABLE: u64 = FIRST + 5;
const FAULT_EP: u64 = FIRST + 6;
const TICKER: u64 = FIRST + 7;
const TICKER_FRAMES: u64 = FIRST + 8; // rt::thread::PAGES slots
const HELPER_STACK: u64 = FIRST + 16;
/// A notification bound to the VMM's thread: the ticker signals it once
/// during the guest's spin, which ends that run early.
const KICK: u64 = FIRST + 17;
const KICK_BITS: u64 = 0x4b;
/// Guest RAM frames, then a copy of each (one mapping per capability).
const RAM: u64 = FIRST + 32;
const RAM_PAGES: u64 = 16;
const RAM_VIEW: u64 = RAM + RAM_PAGES;

/// Where the VMM sees guest RAM.
const VIEW_VA: u64 = 0x0000_5300_0000_0000;
const HELPER_STACK_VA: u64 = 0x0000_5400_0000_0000;

/// The instance number that checks a kernel without SVM
/// (`tests/vm-unsupported.toml`, kernel option `pecan.svm=off`).
const WITHOUT_SVM: u64 = 99;

/// Without SVM every way to a virtual CPU is `Unsupported`.
fn without_svm(t: &mut Checks) {
    let u = own(child::UNTYPED);
    t.result(
        "retype-vcpu-unsupported",
        syscall::retype(u, ObjectType::Vcpu, 0, VCPU, 1),
        Err(Error::Unsupported),
    );
    t.result(
        "retype-guest-space-unsupported",
        syscall::retype(u, ObjectType::GuestSpace, 14, GSPACE, 1),
        Err(Error::Unsupported),
    );
    // SAFETY: the block in the main thread's IPC buffer is this thread's.
    let run = unsafe { syscall::vcpu_run(VCPU, GSPACE, 0) }.map(|_| ());
    t.result("run-unsupported", run, Err(Error::Unsupported));
}

/// Counts the ticker thread's rounds; it stops when asked.
static TICKS: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicBool = AtomicBool::new(false);
/// Set by the VMM when the guest's spin starts; the ticker then kicks
/// the VMM's thread once.
static SPINNING: AtomicBool = AtomicBool::new(false);
/// The CPU this VMM runs on, and its instance number.
static CPU: AtomicU32 = AtomicU32::new(0);
static INSTANCE: AtomicU32 = AtomicU32::new(0);

fn main(instance: u64) -> i32 {
    let mut t = Checks::new(instance);
    if instance == WITHOUT_SVM {
        without_svm(&mut t);
        return t.finish();
    }
    INSTANCE.store(instance as u32, Ordering::Relaxed);
    if let Err(e) = setup() {
        if e == Error::Unsupported {
            println!("test-vm[{instance}]: this machine has no SVM: nothing to test (FAILED)");
        } else {
            println!("test-vm[{instance}]: setup FAILED ({e:?})");
        }
        return 1;
    }
    // Instance N runs on CPU N - 1 if there is one (two VMs on two CPUs
    // in tests/vm-hostile-smp2.toml), its ticker beside it.
    let cpu = (instance.saturating_sub(1)) as u32;
    let cpu = if syscall::cpu_set().contains(cpu) {
        cpu
    } else {
        0
    };
    if cpu != 0 {
        let moved = syscall::thread_set_sched_params(own(child::OWN_THREAD), child::PRIORITY, cpu);
        t.result("move-to-cpu", moved, Ok(()));
    }
    CPU.store(cpu, Ordering::Relaxed);
    println!("test-vm[{instance}]: running on CPU {cpu}");
    let ticker = rt::thread::spawn(
        ticker,
        0,
        rt::thread::Slots {
            thread: TICKER,
            frames: TICKER_FRAMES,
        },
        rt::thread::Placement {
            priority: child::PRIORITY,
            cpu,
            fault_endpoint: 0,
        },
    );
    t.expect("ticker-started", ticker.is_ok(), format_args!("{ticker:?}"));

    refusals(&mut t);
    run_guest(&mut t, instance);
    run_irq_guest(&mut t, instance);
    run_long_mode_guest(&mut t, instance);

    STOP.store(true, Ordering::Relaxed);
    let _ = syscall::thread_suspend(TICKER);
    t.finish()
}

/// The ticker: counts while it runs, yields now and then.
extern "C" fn ticker(_: u64) -> ! {
    let mut kicked = false;
    loop {
        TICKS.fetch_add(1, Ordering::Relaxed);
        if !kicked && SPINNING.load(Ordering::Relaxed) {
            kicked = syscall::signal(FIRST + 18).is_ok();
        }
        if STOP.load(Ordering::Relaxed) {
            let _ = syscall::yield_now();
        }
    }
}

const RW: MapAttr = MapAttr {
    writable: true,
    executable: false,
    cache: Cache::WriteBack,
};
const RWX: MapAttr = MapAttr {
    writable: true,
    executable: true,
    cache: Cache::WriteBack,
};

/// The guest space, the VCPU, guest RAM in both spaces, the code.
fn setup() -> Result<(), Error> {
    let u = own(child::UNTYPED);
    let vspace = own(child::OWN_VSPACE);
    syscall::retype(u, ObjectType::GuestSpace, 14, GSPACE, 1)?;
    syscall::retype(u, ObjectType::Vcpu, 0, VCPU, 1)?;
    syscall::retype(u, ObjectType::Frame4K, 0, RAM, RAM_PAGES)?;
    syscall::retype(u, ObjectType::Notification, 0, KICK, 1)?;
    syscall::cap_mint(KICK, FIRST + 18, Rights::ALL, KICK_BITS)?;
    syscall::bind_notification(own(child::OWN_THREAD), KICK)?;
    for i in 0..RAM_PAGES {
        syscall::cap_copy(RAM + i, RAM_VIEW + i)?;
        // SAFETY: a guest space is not this component's memory.
        unsafe { syscall::map(GSPACE, RAM + i, i * 4096, RWX)? };
        // SAFETY: VIEW_VA is this component's window on guest RAM; nothing
        // else lives there.
        unsafe { syscall::map(vspace, RAM_VIEW + i, VIEW_VA + i * 4096, RW)? };
    }
    let code = guest_ram(guest::CODE_GPA, guest::CODE_LEN);
    code.copy_from_slice(&guest::CODE);

    Ok(())
}

/// What this instance's guest loads into `xmm0`.
fn xmm_pattern() -> u32 {
    0x5a5a_0000 | CPU.load(Ordering::Relaxed) << 8 | INSTANCE.load(Ordering::Relaxed)
}

/// Guest RAM at `gpa`, `len` bytes, through the VMM's own mapping.
fn guest_ram(gpa: u64, len: usize) -> &'static mut [u8] {
    assert!(gpa + len as u64 <= RAM_PAGES * 4096);
    // SAFETY: VIEW_VA maps RAM_PAGES frames of guest RAM (setup); the
    // guest changes it only while this thread waits in VcpuRun, and the
    // VMM holds one such slice at a time.
    unsafe { core::slice::from_raw_parts_mut((VIEW_VA + gpa) as *mut u8, len) }
}

/// The guest's start: 32-bit protected mode, flat, paging off, an IDT
/// of limit 0 (any exception ends in a triple fault).
fn initial_state(v: &mut Vcpu) {
    v.set(word::RIP, guest::CODE_GPA);
    v.set(word::RSP, guest::STACK_GPA);
    v.set(word::RFLAGS, 2);
    v.set(word::CR0, 0x11); // PE, ET (EM clear: SSE allowed)
    v.set(word::CR4, 0x200); // OSFXSR
    v.set(word::EFER, 0);
    let set = |v: &mut Vcpu, i: usize, w: u64, base: u64| {
        v.set(word::SEGMENTS + 2 * i, w);
        v.set(word::SEGMENTS + 2 * i + 1, base);
    };
    set(v, seg::CS, seg::pack(0x08, seg::CODE32, 0xffff_ffff), 0);
    for s in [seg::DS, seg::ES, seg::SS, seg::FS, seg::GS] {
        set(v, s, seg::pack(0x10, seg::DATA32, 0xffff_ffff), 0);
    }
    set(v, seg::GDTR, seg::pack(0, 0, 0x17), 0);
    set(v, seg::IDTR, seg::pack(0, 0, 0), 0);
    set(v, seg::LDTR, seg::pack(0, seg::LDT, 0), 0);
    set(v, seg::TR, seg::pack(0x18, seg::TSS_BUSY, 0x67), 0);
}

/// What the VMM saw, for the checks.
#[derive(Default)]
struct Seen {
    hello: Option<(u64, u64, u8, u64)>,
    cpuid_ebx_back: Option<u64>,
    msr_read: Option<u64>,
    msr_write: Option<(u64, u64)>,
    msr_eax_back: Option<u64>,
    npf: [Option<(u64, u64)>; 3],
    read_back: Option<u64>,
    probes: [bool; 3],
    hlt: bool,
    loop_exits: u64,
    spin_interrupts: Option<u64>,
    spin_ticks: Option<u64>,
    vmmcall: bool,
    svm_instruction: bool,
    shutdown: bool,
    unexpected: Option<(u64, u64, u64, u64)>,
    next_rip_ok: u64,
    cr4_wanted: Option<u64>,
    cr4_after: Option<u64>,
    kicks: alloc::vec::Vec<(u64, u64)>,
    xmm_start: Option<u64>,
    xmm_end: Option<u64>,
    vmm_xmm0: Option<u32>,
    next_rip_bad: u64,
}

/// What the VMM answers to CPUID (leaf 0: "PecanVM" vendor words).
const CPUID_EBX: u64 = 0x6e61_6365; // "ecan"

fn run_guest(t: &mut Checks, instance: u64) {
    guest_ram(guest::PATTERN_GPA, 4).copy_from_slice(&xmm_pattern().to_le_bytes());
    let mut v = Vcpu::new(VCPU, GSPACE);
    initial_state(&mut v);
    let mut flags = load::REGISTERS | load::CONTROL | load::SEGMENTS;
    let mut seen = Seen::default();
    let mut spin_from: Option<(u64, u64)> = None;
    for _ in 0..10_000 {
        let e = match v.run(flags) {
            Ok(e) => e,
            Err(err) => {
                t.expect("run", false, format_args!("VcpuRun: {err:?}"));
                return;
            }
        };
        flags = load::REGISTERS;
        let rip = v.get(word::RIP);
        let at = guest_ram(rip.min(RAM_PAGES * 4096 - 16), 16);
        let len = guest::length(at);
        match e.code {
            exit::IOIO => {
                let port = ioio::port(e.info1);
                let width = ioio::width(e.info1);
                let mask = if width == 4 {
                    u64::from(u32::MAX)
                } else {
                    (1u64 << (8 * width)) - 1
                };
                let value = v.get(word::RAX) & mask;
                if Some(e.info2 - rip) == len {
                    seen.next_rip_ok += 1;
                } else {
                    seen.next_rip_bad += 1;
                }
                if e.info1 & ioio::IN != 0 {
                    // Nothing answers: all ones, like an empty bus.
                    v.set(word::RAX, v.get(word::RAX) | mask);
                }
                match port {
                    guest::PORT_HELLO => {
                        seen.hello = Some((e.info1 & ioio::IN, u64::from(port), width, value));
                        println!(
                            "test-vm[{instance}]: exit IOIO port {port:#x} width {width} value {value:#x} next rip {:#x}",
                            e.info2
                        );
                    }
                    guest::PORT_CPUID_EBX => seen.cpuid_ebx_back = Some(value),
                    guest::PORT_MSR_EAX => seen.msr_eax_back = Some(value),
                    guest::PORT_READ_VALUE => seen.read_back = Some(value),
                    guest::PORT_XMM_START => seen.xmm_start = Some(value),
                    guest::PORT_XMM_END => {
                        seen.xmm_end = Some(value);
                        seen.vmm_xmm0 = Some(own_xmm0());
                    }
                    0x60 => seen.probes[0] = e.info1 & ioio::IN != 0,
                    0xf4 => seen.probes[1] = e.info1 & ioio::IN == 0 && value == 1,
                    0xcf8 => seen.probes[2] = value == 0x8000_0000,
                    guest::PORT_LOOP => {
                        seen.loop_exits += 1;
                        if seen.loop_exits == guest::LOOP_EXITS {
                            spin_from = Some((v.interrupted, TICKS.load(Ordering::Relaxed)));
                            SPINNING.store(true, Ordering::Relaxed);
                        }
                    }
                    guest::PORT_SPIN_DONE => {
                        if let Some((irq, ticks)) = spin_from {
                            seen.spin_interrupts = Some(v.interrupted - irq);
                            seen.spin_ticks = Some(TICKS.load(Ordering::Relaxed) - ticks);
                        }
                    }
                    _ => seen.unexpected = Some((e.code, e.info1, e.info2, rip)),
                }
                v.set(word::RIP, e.info2);
            }
            exit::CPUID => {
                v.set(word::RAX, 1);
                v.set(word::RBX, CPUID_EBX);
                v.set(word::RCX, 0);
                v.set(word::RDX, 0);
                v.set(word::RIP, rip + len.unwrap_or(2));
            }
            exit::MSR => {
                let msr = v.get(word::RCX) & 0xffff_ffff;
                if e.info1 == 0 {
                    seen.msr_read = Some(msr);
                    v.set(word::RAX, 0x1234_5678);
                    v.set(word::RDX, 0);
                } else {
                    let value = (v.get(word::RDX) << 32) | (v.get(word::RAX) & 0xffff_ffff);
                    seen.msr_write = Some((msr, value));
                }
                println!(
                    "test-vm[{instance}]: exit MSR {} {msr:#x}",
                    if e.info1 == 0 { "read" } else { "write" }
                );
                v.set(word::RIP, rip + len.unwrap_or(2));
            }
            exit::NPF => {
                let gpa = e.info2;
                println!(
                    "test-vm[{instance}]: exit NPF at guest-physical {gpa:#x} (error code {:#x}, rip {rip:#x})",
                    e.info1
                );
                let slot = match gpa {
                    x if x == guest::WRITE_OUTSIDE[0] => 0,
                    x if x == guest::WRITE_OUTSIDE[1] => 1,
                    x if x == guest::READ_OUTSIDE => 2,
                    _ => {
                        seen.unexpected = Some((e.code, e.info1, e.info2, rip));
                        break;
                    }
                };
                seen.npf[slot] = Some((gpa, e.info1));
                if at[0] == 0xa1 {
                    // An emulated read of nothing: all ones.
                    v.set(word::RAX, 0xffff_ffff);
                }
                match len {
                    Some(n) => v.set(word::RIP, rip + n),
                    None => break,
                }
            }
            exit::HLT => {
                seen.hlt = true;
                v.set(word::RIP, rip + 1);
            }
            code if code == exit::CR_WRITE + 4 => {
                // mov cr4, eax (the guest's only one): emulated by loading
                // what it wanted; the kernel refuses PKE.
                seen.cr4_wanted = Some(v.get(word::RAX) & 0xffff_ffff);
                v.set(word::CR4, v.get(word::RAX) & 0xffff_ffff);
                v.set(word::RIP, rip + len.unwrap_or(3));
                flags |= load::CONTROL;
            }
            exit::VMMCALL => {
                seen.cr4_after = Some(v.get(word::CR4));
                seen.vmmcall = true;
                v.set(word::RIP, rip + 3);
            }
            exit::STGI => {
                seen.svm_instruction = true;
                v.set(word::RIP, rip + 3);
            }
            exit::NOTIFICATION => {
                // The ticker's kick: nothing ran; go on where it was.
                seen.kicks.push((e.info1, rip));
                flags = 0;
            }
            exit::SHUTDOWN => {
                println!("test-vm[{instance}]: exit SHUTDOWN (triple fault): VM ended");
                seen.shutdown = true;
                break;
            }
            _ => {
                seen.unexpected = Some((e.code, e.info1, e.info2, rip));
                break;
            }
        }
    }
    report(t, &seen, &v);
}

fn report(t: &mut Checks, s: &Seen, v: &Vcpu) {
    let mark = guest_ram(guest::RAM_MARK_GPA, 4);
    let mark = u32::from_le_bytes([mark[0], mark[1], mark[2], mark[3]]);
    t.expect(
        "ram-shared",
        mark == guest::RAM_MARK,
        format_args!("{mark:#x}"),
    );
    t.expect(
        "io-out",
        s.hello == Some((0, u64::from(guest::PORT_HELLO), 2, guest::HELLO_VALUE)),
        format_args!("{:?}", s.hello),
    );
    t.expect(
        "io-next-rip",
        s.next_rip_bad == 0 && s.next_rip_ok > guest::LOOP_EXITS,
        format_args!("{} right, {} wrong", s.next_rip_ok, s.next_rip_bad),
    );
    t.expect(
        "cpuid-emulated",
        s.cpuid_ebx_back == Some(CPUID_EBX),
        format_args!("{:?}", s.cpuid_ebx_back),
    );
    t.expect(
        "msr-read-intercepted",
        s.msr_read == Some(0xc000_0080) && s.msr_eax_back == Some(0x1234_5678),
        format_args!("{:?} {:?}", s.msr_read, s.msr_eax_back),
    );
    t.expect(
        "msr-write-intercepted",
        s.msr_write == Some((0xc001_0117, 0xdead_beef)),
        format_args!("{:?}", s.msr_write),
    );
    for (i, name) in ["npf-host-kernel", "npf-lapic", "npf-read"]
        .iter()
        .enumerate()
    {
        // Error code: bit 0 present (clear: nothing mapped), bit 1 write.
        let want_write = i < 2;
        let ok =
            matches!(s.npf[i], Some((_, code)) if code & 1 == 0 && (code & 2 != 0) == want_write);
        t.expect(name, ok, format_args!("{:?}", s.npf[i]));
    }
    t.expect(
        "npf-read-emulated",
        s.read_back == Some(0xffff_ffff),
        format_args!("{:?}", s.read_back),
    );
    t.expect(
        "io-probes",
        s.probes == [true; 3],
        format_args!("{:?}", s.probes),
    );
    t.expect("hlt", s.hlt, format_args!("no HLT exit"));
    t.expect(
        "exit-loop",
        s.loop_exits == guest::LOOP_EXITS,
        format_args!("{} exits", s.loop_exits),
    );
    t.expect(
        "host-runs-during-guest",
        matches!((s.spin_interrupts, s.spin_ticks), (Some(i), Some(k)) if i > 0 && k > 0),
        format_args!(
            "interrupted runs {:?}, ticker rounds {:?}",
            s.spin_interrupts, s.spin_ticks
        ),
    );
    if let (Some(i), Some(k)) = (s.spin_interrupts, s.spin_ticks) {
        println!(
            "test-vm[{}]: during the guest's spin: {i} runs ended by host interrupts, the ticker counted {k}",
            t.instance()
        );
    }
    t.expect(
        "guest-fpu-clean-at-start",
        s.xmm_start == Some(0),
        format_args!("{:x?}", s.xmm_start),
    );
    t.expect(
        "guest-fpu-kept",
        s.xmm_end == Some(u64::from(xmm_pattern())),
        format_args!("{:x?}, want {:#x}", s.xmm_end, xmm_pattern()),
    );
    t.expect(
        "guest-fpu-not-in-vmm",
        s.vmm_xmm0 == Some(0),
        format_args!(
            "the VMM's own xmm0 after the guest's exit: {:x?}",
            s.vmm_xmm0
        ),
    );
    const PKE: u64 = 1 << 22;
    t.expect(
        "cr4-pke-refused",
        matches!((s.cr4_wanted, s.cr4_after), (Some(w), Some(a)) if w & PKE != 0 && a & PKE == 0),
        format_args!("CR4 wanted {:x?}, then {:x?}", s.cr4_wanted, s.cr4_after),
    );
    t.expect(
        "kick",
        s.kicks.len() == 1 && s.kicks[0].0 == KICK_BITS,
        format_args!("notification exits {:x?}", s.kicks),
    );
    t.expect("vmmcall", s.vmmcall, format_args!("no VMMCALL exit"));
    t.expect(
        "svm-instruction",
        s.svm_instruction,
        format_args!("no STGI exit"),
    );
    t.expect(
        "triple-fault",
        s.shutdown && s.unexpected.is_none(),
        format_args!(
            "shutdown {}, unexpected exit {:?} (rip {:#x})",
            s.shutdown,
            s.unexpected,
            v.get(word::RIP)
        ),
    );
}

/// Bad runs: each is an error, nothing runs.
fn refusals(t: &mut Checks) {
    let run = |vcpu: u64, space: u64, flags: u64| {
        // SAFETY: the block in the main thread's IPC buffer is this
        // thread's to lend.
        unsafe { syscall::vcpu_run(vcpu, space, flags) }.map(|_| ())
    };
    let r = syscall::cap_mint(VCPU, VCPU_RO, Rights::READ, 0).and(syscall::cap_mint(
        GSPACE,
        GSPACE_RO,
        Rights::READ,
        0,
    ));
    t.result("mint-read-only", r, Ok(()));
    t.result(
        "run-empty-slot",
        run(FIRST + 200, GSPACE, 0),
        Err(Error::EmptySlot),
    );
    t.result(
        "run-thread-as-vcpu",
        run(own(child::OWN_THREAD), GSPACE, 0),
        Err(Error::WrongObjectType),
    );
    t.result(
        "run-in-address-space",
        run(VCPU, own(child::OWN_VSPACE), 0),
        Err(Error::WrongObjectType),
    );
    t.result(
        "run-read-only-vcpu",
        run(VCPU_RO, GSPACE, 0),
        Err(Error::MissingRights),
    );
    t.result(
        "run-read-only-space",
        run(VCPU, GSPACE_RO, 0),
        Err(Error::MissingRights),
    );
    t.result(
        "run-unknown-flags",
        run(VCPU, GSPACE, 1 << 40),
        Err(Error::InvalidArgument),
    );
    // A bad event: type 1 is reserved.
    let bad = event::VALID | 1 << event::TYPE_SHIFT | 32;
    // SAFETY: the main thread's IPC buffer (see `rt::vcpu`).
    unsafe {
        ((rt::abi::MAIN_IPC_BUFFER_ADDR + 8 * word::EVENT as u64) as *mut u64).write_volatile(bad)
    };
    t.result(
        "run-bad-event",
        run(VCPU, GSPACE, load::EVENT),
        Err(Error::InvalidArgument),
    );
    t.result(
        "run-bad-slot-address",
        run(in_table(u32::MAX, 1), GSPACE, 0),
        Err(Error::InvalidSlot),
    );
    // Guest-physical addresses: aligned, below GUEST_PHYS_END.
    let r = syscall::retype(own(child::UNTYPED), ObjectType::Frame4K, 0, FIRST + 100, 1);
    t.result("retype-spare-frame", r, Ok(()));
    // SAFETY: a guest space is not this component's memory.
    let map = |gpa| unsafe { syscall::map(GSPACE, FIRST + 100, gpa, RWX) };
    t.result(
        "map-beyond-guest-physical",
        map(rt::abi::vcpu::GUEST_PHYS_END),
        Err(Error::InvalidArgument),
    );
    t.result(
        "map-misaligned",
        map(0x10_0800),
        Err(Error::InvalidArgument),
    );
    t.result("map-taken", map(0), Err(Error::AlreadyMapped));
    no_capability(t);
}

/// A thread whose capability space lacks the VCPU: its run is refused.
fn no_capability(t: &mut Checks) {
    let u = own(child::UNTYPED);
    let made = syscall::retype(u, ObjectType::Thread, 0, HELPER, 1)
        .and(syscall::retype(u, ObjectType::CapTable, 4, HELPER_TABLE, 1))
        .and(syscall::retype(u, ObjectType::Endpoint, 0, FAULT_EP, 1))
        .and(syscall::retype(u, ObjectType::Frame4K, 0, HELPER_STACK, 1));
    // SAFETY: HELPER_STACK_VA is the helper's stack page alone.
    let made = made
        .and(unsafe { syscall::map(own(child::OWN_VSPACE), HELPER_STACK, HELPER_STACK_VA, RW) });
    let made = made.and(syscall::thread_configure(
        HELPER,
        HELPER_TABLE,
        own(child::OWN_VSPACE),
        0,
        FAULT_EP,
    ));
    let cpu = CPU.load(Ordering::Relaxed);
    let made = made.and(syscall::thread_set_sched_params(
        HELPER,
        child::PRIORITY,
        cpu,
    ));
    // SAFETY: the helper runs `no_vcpu` on its own stack page.
    let made = made.and(unsafe {
        syscall::thread_start(
            HELPER,
            no_vcpu as *const () as u64,
            HELPER_STACK_VA + 4096,
            0,
        )
    });
    if let Err(e) = made {
        t.expect(
            "run-without-capability",
            false,
            format_args!("helper: {e:?}"),
        );
        return;
    }
    let got = syscall::recv(FAULT_EP);
    let ok = matches!(got, Ok((_, info, words))
        if info.label() == LABEL_EXIT && words[0] & 0xffff_ffff == Error::EmptySlot as u64);
    t.expect("run-without-capability", ok, format_args!("{got:?}"));
}

/// The helper: runs "the VCPU" at the slots the VMM uses, in a capability
/// space that has none of them; exits with the error code.
extern "C" fn no_vcpu(_: u64) -> ! {
    // SAFETY: this thread has no IPC buffer; the call fails before any use.
    let r = unsafe { syscall::vcpu_run(VCPU, GSPACE, 0) };
    let code = match r {
        Ok(_) => 0,
        Err(e) => e as u64,
    };
    let _ = Sys::VcpuRun;
    syscall::thread_exit(code as i32)
}

/// The interrupt guest (`guest::IRQ_CODE`): TSC offset, interrupt window,
/// event injection, virtual interrupt.
fn run_irq_guest(t: &mut Checks, instance: u64) {
    let gdt = guest_ram(0, 24);
    for (i, d) in guest::GDT.iter().enumerate() {
        gdt[8 * i..8 * i + 8].copy_from_slice(&d.to_le_bytes());
    }
    for (i, (vector, h)) in [guest::VECTOR_VIRQ, guest::VECTOR_EVENT]
        .iter()
        .zip(guest::HANDLERS)
        .enumerate()
    {
        let at = guest::HANDLERS_GPA + 16 * i as u64;
        guest_ram(at, h.len()).copy_from_slice(&h);
        let gate = guest::gate(at as u32).to_le_bytes();
        guest_ram(guest::IDT_GPA + 8 * u64::from(*vector), 8).copy_from_slice(&gate);
    }
    guest_ram(guest::IRQ_CODE_GPA, guest::IRQ_CODE.len()).copy_from_slice(&guest::IRQ_CODE);
    let mut v = Vcpu::new(VCPU, GSPACE);
    initial_state(&mut v);
    v.set(word::RIP, guest::IRQ_CODE_GPA);
    v.set(
        word::SEGMENTS + 2 * seg::IDTR,
        seg::pack(0, 0, guest::IDT_LIMIT),
    );
    v.set(word::SEGMENTS + 2 * seg::IDTR + 1, guest::IDT_GPA);
    const OFFSET: u64 = 1 << 62;
    v.set(word::TSC_OFFSET, OFFSET);
    v.set(
        word::VIRQ,
        u64::from(guest::VECTOR_VIRQ) | virq::PENDING | virq::WINDOW_EXIT,
    );
    // A fresh guest: no event left over from the first one.
    v.set(word::EVENT, 0);
    let mut flags = load::ALL;
    let (mut tsc_high, mut window, mut done, mut shutdown) = (None, false, false, false);
    let mut vectors = [0u64; 2];
    let mut taken = 0;
    let mut unexpected = None;
    for _ in 0..20 {
        let e = match v.run(flags) {
            Ok(e) => e,
            Err(err) => {
                unexpected = Some((u64::MAX, err as u64, 0));
                break;
            }
        };
        flags = load::REGISTERS;
        let rip = v.get(word::RIP);
        match e.code {
            exit::IOIO => {
                match ioio::port(e.info1) {
                    guest::PORT_TSC => tsc_high = Some(v.get(word::RAX) & 0xffff_ffff),
                    guest::PORT_IRQ if taken < 2 => {
                        vectors[taken] = v.get(word::RAX) & 0xff;
                        taken += 1;
                    }
                    guest::PORT_IRQ_DONE => done = true,
                    _ => unexpected = Some((e.code, e.info1, rip)),
                }
                v.set(word::RIP, e.info2);
            }
            exit::VINTR => {
                window = taken == 0;
                // The window is open: take the virtual interrupt back and
                // inject an external interrupt instead (what a VMM does
                // with its interrupt controller's next vector).
                v.set(word::VIRQ, 0);
                v.set(
                    word::EVENT,
                    event::new(guest::VECTOR_EVENT, event::TYPE_INTR, None),
                );
                flags |= load::VIRQ | load::EVENT;
            }
            exit::HLT => {
                v.set(word::RIP, rip + 1);
                // Wake it with a virtual interrupt it takes by itself.
                v.set(word::VIRQ, u64::from(guest::VECTOR_VIRQ) | virq::PENDING);
                flags |= load::VIRQ;
            }
            exit::SHUTDOWN => {
                shutdown = true;
                break;
            }
            _ => {
                unexpected = Some((e.code, e.info1, rip));
                break;
            }
        }
    }
    println!(
        "test-vm[{instance}]: interrupt guest: TSC high word {tsc_high:x?}, vectors {vectors:x?}"
    );
    t.expect(
        "tsc-offset",
        matches!(tsc_high, Some(h) if h >= OFFSET >> 32),
        format_args!("{tsc_high:?}"),
    );
    t.expect(
        "interrupt-window",
        window,
        format_args!("no VINTR exit first"),
    );
    t.expect(
        "event-injected",
        vectors[0] == u64::from(guest::VECTOR_EVENT),
        format_args!("{vectors:?}"),
    );
    t.expect(
        "virq-delivered",
        vectors[1] == u64::from(guest::VECTOR_VIRQ),
        format_args!("{vectors:?}"),
    );
    t.expect(
        "irq-guest-done",
        done && shutdown && unexpected.is_none(),
        format_args!("done {done}, shutdown {shutdown}, unexpected {unexpected:x?}"),
    );
}

/// This thread's own `xmm0` (low 32 bits): the VMM never writes it, so
/// anything but 0 came from elsewhere — a guest's state left in the
/// registers.
fn own_xmm0() -> u32 {
    let v: u32;
    // SAFETY: reads a register of this thread's own vector state (the
    // kernel loads it on first use); touches no memory.
    unsafe { core::arch::asm!("movd {0:e}, xmm0", out(reg) v, options(nomem, nostack)) };
    v
}

/// The long-mode guest (`guest::LONG_CODE`).
fn run_long_mode_guest(t: &mut Checks, instance: u64) {
    for (gpa, entry) in guest::LONG_TABLES {
        guest_ram(gpa, 4096).fill(0);
        guest_ram(gpa, 8).copy_from_slice(&entry.to_le_bytes());
    }
    guest_ram(guest::LONG_CODE_GPA, guest::LONG_CODE.len()).copy_from_slice(&guest::LONG_CODE);
    let mut v = Vcpu::new(VCPU, GSPACE);
    initial_state(&mut v);
    v.set(word::RIP, guest::LONG_CODE_GPA);
    v.set(word::CR0, 0x8000_0011); // PG, PE, ET
    v.set(word::CR3, guest::PML4_GPA);
    v.set(word::CR4, 0x220); // PAE, OSFXSR
    v.set(word::EFER, 0x500); // LME, LMA
    v.set(
        word::SEGMENTS + 2 * seg::CS,
        seg::pack(0x08, seg::CODE64, 0xffff_ffff),
    );
    v.set(word::EVENT, 0);
    let mut got = None;
    let mut shutdown = false;
    let mut flags = load::REGISTERS | load::CONTROL | load::SEGMENTS | load::EVENT;
    for _ in 0..5 {
        let e = match v.run(flags) {
            Ok(e) => e,
            Err(err) => {
                got = Some((u64::MAX, err as u64, 0));
                break;
            }
        };
        flags = load::REGISTERS;
        match e.code {
            exit::IOIO if ioio::port(e.info1) == guest::PORT_LONG => {
                got = Some((e.code, v.get(word::RAX), v.get(word::EFER)));
                v.set(word::RIP, e.info2);
            }
            exit::SHUTDOWN => {
                shutdown = true;
                break;
            }
            _ => {
                got = Some((e.code, e.info1, v.get(word::RIP)));
                break;
            }
        }
    }
    println!("test-vm[{instance}]: long-mode guest: {got:x?}");
    let lma = 1 << 10;
    t.expect(
        "long-mode",
        matches!(got, Some((exit::IOIO, rax, efer)) if rax == guest::LONG_VALUE && efer & lma != 0)
            && shutdown,
        format_args!("{got:x?}, shutdown {shutdown}"),
    );
}
