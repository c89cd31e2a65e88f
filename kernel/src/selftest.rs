//! Boot self-checks, deliberate-failure tests and device proofs.
//!
//! The self-checks run on every boot and are cheap: they prove that the
//! memory map, the frame allocator, the kernel's mappings and the timer work before
//! anything depends on them. The deliberate failures (`pecan.selftest=NAME`
//! on the kernel command line) crash the kernel on purpose, so the scenario
//! tests can check that every kind of crash is reported and ends QEMU with
//! the failure status instead of hanging. A device proof (`ioapic-pit`) is
//! selected the same way, runs in place of the rest of the boot and ends the
//! machine with success or with a failure message.

use kcore::phys::{PhysRange, PAGE_SIZE};

use crate::arch::{cpu, ioapic, lapic, pit};
use crate::exit::{exit, ExitCode};
use crate::pvh::BootInfo;
use crate::{kprintln, mm, time};

/// Names accepted by `pecan.selftest=`: the deliberate failures, then the
/// device proofs.
pub const DELIBERATE_FAILURES: &[&str] = &[
    "panic",
    "page-fault",
    "invalid-opcode",
    "general-protection",
    "stack-overflow",
    "ap-stack-overflow",
    "divide-error",
    "smep",
    "smap",
    "ioapic-pit",
];

/// Where the `smep` and `smap` self-tests map their user page.
const SELFTEST_USER_PAGE: u64 = 0x40_0000;

pub struct CheckFailed(pub &'static str);

/// The least usable memory the kernel boots with: its page tables, its
/// 1 MiB reserve, root's objects and root's own checks (a naturally aligned
/// 2 MiB untyped block) fit, measured with QEMU `-m 12` (11 MiB usable; at
/// `-m 10` and `-m 11` root finds no aligned 2 MiB block with the
/// debug-assertion kernel, tests/boot-memory-12.toml). xtask's smallest
/// machine (`MIN_MEMORY_MIB`) is the same 12 MiB. The kernel has no heap,
/// so nothing scales with the machine here.
const MIN_USABLE_BYTES: u64 = 11 << 20;

/// [`DELIBERATE_FAILURES`] as `a, b, c` (the kernel has no heap to join
/// strings in).
pub struct Known;

impl core::fmt::Display for Known {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        for (i, name) in DELIBERATE_FAILURES.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

pub fn check_memory_map(boot: &BootInfo) -> Result<(), CheckFailed> {
    let map = &boot.memory_map;
    if map.usable_bytes() < MIN_USABLE_BYTES {
        return Err(CheckFailed(
            "less than 11 MiB of usable memory: the kernel and root need 11 MiB (QEMU -m 12)",
        ));
    }
    let kernel = mm::kernel_image();
    let kernel_in_usable = map.regions().any(|(r, kind)| {
        kind == kcore::phys::RegionKind::Usable && r.start <= kernel.start && kernel.end <= r.end
    });
    if !kernel_in_usable {
        return Err(CheckFailed("the kernel image is not inside usable memory"));
    }
    if kernel.end > abi::bootinfo::KERNEL_IMAGE_END_MAX {
        return Err(CheckFailed(
            "the kernel image ends above abi::bootinfo::KERNEL_IMAGE_END_MAX (4 MiB), below \
             which the memory rule (ucore::plan) gives root nothing: raise the bound",
        ));
    }
    let frames = mm::FRAMES.lock();
    let frames = frames
        .as_ref()
        .ok_or(CheckFailed("frame allocator missing"))?;
    let mut previous_end = 0;
    for free in frames.free_ranges() {
        if free.start < previous_end || free.is_empty() {
            return Err(CheckFailed("free ranges are not sorted and disjoint"));
        }
        previous_end = free.end;
        if free.overlaps(&kernel)
            || free.overlaps(&PhysRange {
                start: 0,
                end: PAGE_SIZE,
            })
        {
            return Err(CheckFailed(
                "the kernel image or page 0 is in the free pool",
            ));
        }
        if boot.modules().iter().any(|m| free.overlaps(m)) {
            return Err(CheckFailed("a boot module is in the free pool"));
        }
        let in_usable = map.regions().any(|(r, kind)| {
            kind == kcore::phys::RegionKind::Usable && r.start <= free.start && free.end <= r.end
        });
        if !in_usable {
            return Err(CheckFailed("a free range lies outside usable memory"));
        }
    }
    Ok(())
}

pub fn check_frames() -> Result<(), CheckFailed> {
    let mut guard = mm::FRAMES.lock();
    let frames = guard
        .as_mut()
        .ok_or(CheckFailed("frame allocator missing"))?;
    let before = frames.free_bytes();
    const PAGES: u64 = 16;
    let phys = frames
        .alloc(PAGES, 1)
        .map_err(|_| CheckFailed("cannot allocate 16 frames"))?;
    let words = (PAGES * PAGE_SIZE / 8) as usize;
    // SAFETY: the frames were just allocated, so this code owns them, and
    // the direct map covers all usable memory.
    let memory =
        unsafe { core::slice::from_raw_parts_mut(mm::phys_to_virt(phys) as *mut u64, words) };
    for (i, word) in memory.iter_mut().enumerate() {
        *word = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ phys;
    }
    let intact = memory
        .iter()
        .enumerate()
        .all(|(i, w)| *w == (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ phys);
    frames
        .free(PhysRange {
            start: phys,
            end: phys + PAGES * PAGE_SIZE,
        })
        .map_err(|_| CheckFailed("cannot free the test frames"))?;
    if !intact {
        return Err(CheckFailed("frame contents changed between write and read"));
    }
    if frames.free_bytes() != before {
        return Err(CheckFailed("free memory differs after alloc+free"));
    }
    Ok(())
}

/// The kernel's own mappings (`docs/security.md`): the lower half of its
/// tables is empty, no kernel page is user-accessible, nothing is both
/// writable and executable, and only the kernel's text is executable (NX
/// everywhere else: data, stacks, the direct map, device windows). Pages
/// mapped after boot (application processors' stacks, device windows) use
/// `mm`'s not-executable kernel-data rights by construction.
pub fn check_kernel_mappings() -> Result<(), CheckFailed> {
    let text = mm::kernel_text();
    let mut failure = None;
    let mut executable_pages = 0u64;
    mm::walk_kernel_mappings(&mut |virt, t| {
        let end = virt.saturating_add(t.size.bytes());
        let bad = if virt < crate::uaccess::USER_END {
            "a page in the lower half of the kernel's tables"
        } else if t.flags.user {
            "a user-accessible kernel page"
        } else if t.flags.writable && t.flags.executable {
            "a writable and executable kernel page"
        } else if t.flags.executable && !(text.start <= virt && end <= text.end) {
            "an executable kernel page outside the kernel's text"
        } else {
            executable_pages += u64::from(t.flags.executable);
            return;
        };
        failure.get_or_insert((bad, virt));
    });
    if let Some((why, virt)) = failure {
        kprintln!("self-check kernel mappings: {why} at {virt:#x}");
        return Err(CheckFailed(why));
    }
    if executable_pages == 0 {
        return Err(CheckFailed("the kernel's text is not executable"));
    }
    Ok(())
}

/// Waits (halting) for `count` timer interrupts. A machine without a
/// working timer hangs here, which the test harness reports as a timeout
/// naming the line it was waiting for.
pub fn check_timer(count: u64) -> Result<(), CheckFailed> {
    if !cpu::interrupts_enabled() {
        return Err(CheckFailed("interrupts are disabled"));
    }
    let start = time::ticks();
    while time::ticks() < start + count {
        cpu::enable_interrupts_and_halt();
    }
    Ok(())
}

/// Crashes the kernel in the named way, or runs the named device proof
/// (see [`DELIBERATE_FAILURES`]). Returns only for an unknown name — or
/// `ap-stack-overflow`, which arms a crash for later: returns `true` then.
pub fn deliberate_failure(name: &str) -> bool {
    if name == "ioapic-pit" {
        ioapic_pit();
    }
    if name == "ap-stack-overflow" {
        // Later, on CPU 1 (`ap_stack_overflow`): the boot goes on.
        kprintln!("selftest: CPU 1 will overflow its kernel stack when it starts");
        AP_STACK_OVERFLOW.store(true, core::sync::atomic::Ordering::Relaxed);
        return true;
    }
    kprintln!("selftest: deliberately causing: {name}");
    match name {
        "panic" => panic!("deliberate panic requested by pecan.selftest=panic"),
        "page-fault" => {
            // SAFETY: deliberately unsound: the address is unmapped, the read
            // faults and the kernel reports the fault and stops.
            let value = unsafe { core::ptr::read_volatile(0xdead_b000 as *const u64) };
            kprintln!("unreachable: read {value}");
        }
        "invalid-opcode" => {
            // SAFETY: deliberately raises #UD; the kernel stops.
            unsafe { core::arch::asm!("ud2") }
        }
        "general-protection" => {
            // SAFETY: deliberately reads a non-canonical address: #GP.
            let value = unsafe { core::ptr::read_volatile(0x8000_0000_0000_0000u64 as *const u64) };
            kprintln!("unreachable: read {value}");
        }
        "divide-error" => {
            // SAFETY: deliberately divides by zero in hardware (#DE); Rust's
            // own division would panic first.
            unsafe {
                core::arch::asm!("xor edx, edx", "xor eax, eax", "xor ecx, ecx", "div ecx", out("eax") _, out("edx") _, out("ecx") _)
            }
        }
        "stack-overflow" => {
            let depth = recurse(core::hint::black_box(1));
            kprintln!("unreachable: depth {depth}");
        }
        // The kernel calls code on a user page: with SMEP an instruction
        // fetch fault (protection violation); without, `ret` comes back.
        "smep" => {
            const RET: u8 = 0xc3;
            if mm::map_user_page_for_selftest(SELFTEST_USER_PAGE, &[RET]).is_none() {
                kprintln!("selftest smep: FAILED: no memory for the user page");
                exit(ExitCode::Failure);
            }
            // SAFETY: deliberately unsound: ring 0 calls a user page; SMEP
            // makes it a kernel page fault, which stops the machine.
            unsafe {
                core::arch::asm!("call {}", in(reg) SELFTEST_USER_PAGE, clobber_abi("C"));
            }
            kprintln!("unreachable: the kernel executed a user page (no SMEP)");
        }
        // The kernel reads a user page through its user address: with SMAP
        // a read fault (protection violation); without, the value.
        "smap" => {
            if mm::map_user_page_for_selftest(SELFTEST_USER_PAGE, &0x5a5a_u64.to_le_bytes())
                .is_none()
            {
                kprintln!("selftest smap: FAILED: no memory for the user page");
                exit(ExitCode::Failure);
            }
            // SAFETY: deliberately unsound: ring 0 reads a user page with
            // RFLAGS.AC clear; SMAP makes it a kernel page fault.
            let value = unsafe { core::ptr::read_volatile(SELFTEST_USER_PAGE as *const u64) };
            kprintln!("unreachable: the kernel read {value:#x} from a user page (no SMAP)");
        }
        _ => {}
    }
    false
}

/// PIT interrupt rate during `ioapic-pit`.
const IOAPIC_PIT_HZ: u32 = 100;
/// Interrupts `ioapic-pit` waits for (50 ms at 100 Hz; it gives up after 1 s).
const IOAPIC_PIT_WANTED: u64 = 5;
/// PIT ticks in 10 ms.
const PIT_TICKS_10MS: u16 = 11_932;

/// `pecan.selftest=ioapic-pit`: proves the device-interrupt path PIT channel
/// 0 → ISA IRQ 0 → (MADT override) GSI → I/O APIC → vector → trap dispatch
/// → `ioapic::on_interrupt`, in three steps:
///
/// 1. edge: the PIT runs periodically and the line is routed as the MADT
///    says; [`IOAPIC_PIT_WANTED`] interrupts must arrive;
/// 2. masked: no interrupt may arrive in 100 ms (10 PIT periods);
/// 3. level: a PIT one-shot raises IRQ 0 and holds it high, with the line
///    routed level-triggered: exactly one interrupt (the handler masks the
///    line, so the held level cannot storm), then exactly one more when the
///    line is unmasked again. This leaves channel 0 idle.
///
/// It runs in place of the rest of the boot (right after ACPI), setting up
/// the PIC and the local APIC with the boot's own calls but leaving the LAPIC
/// timer off, so every interrupt counted is the PIT's. Time is measured by
/// polling PIT channel 2, never by interrupts, so a broken path ends with a
/// failure message instead of a hang.
fn ioapic_pit() -> ! {
    fn fail(what: core::fmt::Arguments) -> ! {
        cpu::disable_interrupts();
        kprintln!("selftest ioapic-pit: FAILED: {what}");
        exit(ExitCode::Failure)
    }
    fn check<T>(what: &str, result: Result<T, ioapic::IoApicError>) -> T {
        result.unwrap_or_else(|e| fail(format_args!("{what}: {e}")))
    }
    pit::disable_pic();
    if let Err(e) = lapic::init() {
        fail(format_args!("local APIC: {e}"));
    }
    let madt = crate::acpi::platform().and_then(|p| p.madt.as_ref());
    check("init", ioapic::init(madt));
    let line = check("ISA IRQ 0", ioapic::isa_irq_to_gsi(0));
    let gsi = line.gsi;
    let Some(vector) = ioapic::default_vector(gsi) else {
        fail(format_args!("GSI {gsi} has no vector"))
    };

    check("route", ioapic::route(line, vector));
    check("unmask", ioapic::unmask(gsi));
    pit::start_channel0(IOAPIC_PIT_HZ);
    cpu::enable_interrupts();
    let arrived = wait_10ms_steps(100, || ioapic::interrupt_count(gsi) >= IOAPIC_PIT_WANTED);
    let edges = ioapic::interrupt_count(gsi);
    if !arrived {
        fail(format_args!(
            "{edges} interrupts on GSI {gsi} in 1 s, expected {IOAPIC_PIT_WANTED}"
        ));
    }

    check("mask", ioapic::mask(gsi));
    // An interrupt the local APIC accepted before the mask may still land
    // (late on a loaded host: see the level test below).
    wait_10ms_steps(5, || false);
    let masked_at = ioapic::interrupt_count(gsi);
    wait_10ms_steps(10, || false);
    let masked_more = ioapic::interrupt_count(gsi) - masked_at;
    if masked_more != 0 {
        fail(format_args!(
            "{masked_more} interrupts on GSI {gsi} while it was masked"
        ));
    }

    let level = ioapic::Line {
        gsi,
        polarity: ioapic::Polarity::ActiveHigh,
        trigger: ioapic::Trigger::Level,
    };
    check("route as level", ioapic::route(level, vector));
    check("unmask", ioapic::unmask(gsi));
    // The one-shot only now, so that its rising edge finds the line routed
    // as level-triggered whatever the host's delays.
    pit::channel0_one_shot(PIT_TICKS_10MS);
    // Waits poll for the interrupt for up to a second: without icount,
    // QEMU raises the PIT's line from its main loop, which a loaded host
    // can delay well past the 10 ms that channel 2 (read directly) counts.
    // A second interrupt without an unmask would come within the 20 ms
    // after the first.
    let level_count = || ioapic::interrupt_count(gsi);
    wait_10ms_steps(100, || level_count() >= 1);
    wait_10ms_steps(2, || false);
    let first = level_count();
    check("unmask again", ioapic::unmask(gsi));
    wait_10ms_steps(100, || level_count() >= 2);
    wait_10ms_steps(1, || false);
    let second = level_count();
    cpu::disable_interrupts();
    if (first, second) != (1, 2) {
        fail(format_args!(
            "level line: {first} interrupts, then {second} after unmasking; expected 1, then 2"
        ));
    }
    check("mask", ioapic::mask(gsi));
    kprintln!(
        "selftest ioapic-pit: {edges} interrupts on GSI {gsi} of {} (ISA IRQ 0, vector {vector:#x}, {:?}, {:?}); none in 100 ms while masked; as a level line: one per unmask",
        ioapic::line_count(),
        line.trigger,
        line.polarity
    );
    exit(ExitCode::Success)
}

/// Polls `done` between 10 ms waits on PIT channel 2, at most `steps`
/// waits; whether `done` held in the end.
fn wait_10ms_steps(steps: u32, done: impl Fn() -> bool) -> bool {
    for _ in 0..steps {
        if done() || pit::measure_10ms(|| {}).is_none() {
            break;
        }
    }
    done()
}

/// `pecan.selftest=ap-stack-overflow` was given.
static AP_STACK_OVERFLOW: core::sync::atomic::AtomicBool =
    core::sync::atomic::AtomicBool::new(false);

/// Called by each application processor once its own tables are loaded:
/// CPU 1 overflows its kernel stack if `pecan.selftest=ap-stack-overflow`
/// asked for it — the guard page below it (`mm::map_kernel_stack`) turns
/// that into a double fault on its IST stack, reported like the boot
/// CPU's (`tests/crash-ap-stack-overflow.toml`).
pub fn ap_stack_overflow(cpu_index: usize) {
    if cpu_index == 1 && AP_STACK_OVERFLOW.load(core::sync::atomic::Ordering::Relaxed) {
        let depth = recurse(core::hint::black_box(1));
        kprintln!("unreachable: depth {depth}");
    }
}

#[allow(unconditional_recursion)]
fn recurse(n: u64) -> u64 {
    let mut frame = [0u8; 512];
    frame[n as usize % 512] = n as u8;
    core::hint::black_box(&mut frame);
    recurse(n + 1) + u64::from(frame[0])
}
