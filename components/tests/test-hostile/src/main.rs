//! test-hostile: attacks the kernel's user/kernel boundary the way a hostile
//! component would, and checks that every attack ends as a fault of the
//! attacker while the kernel runs on (`docs/security.md` lists what each
//! check stands for).
//!
//! Started by root as a *test* child (it holds its own thread, capability
//! space and address space). Every attack runs in a probe thread whose
//! fault endpoint is this component's own endpoint, once on each CPU of
//! its set (so on 1 and on 2 CPUs when the machine has them): the probe
//! either faults (the fault message arrives here, the probe is suspended
//! and reused) or runs to its end and exits with a code, which for an
//! attack means the CPU let it through.
//!
//! The attacks, by class:
//! - entering ring 0 through the system-call MSRs: `syscall` in 32-bit
//!   compatibility mode (CSTAR) — a far jump to the 32-bit user code
//!   selector 0x1b first, which raises #GP because that descriptor is null;
//!   with `ARG` = 2 (kernel option `pecan.test-compat32=1`, which makes it
//!   present) the far jump succeeds and the `syscall` must come back as
//!   an invalid-opcode fault at that instruction; `sysenter` (#UD on AMD,
//!   #GP with SYSENTER_CS = 0 on Intel);
//! - interrupt gates: `int 0x80`, `int3`, `int 0x20` (the timer's vector)
//!   and `int 0xff` — every gate has DPL 0, so each is #GP;
//! - segments: a far jump to every selector of the GDT and LDT, with
//!   every RPL — only the 64-bit user code slot works, and its code runs
//!   in ring 3. (Far *jumps*: QEMU 7.2's TCG pops the operands of a user
//!   `lret`/`iret` with a supervisor access, which SMAP refuses — a page
//!   fault before any segment check; a far jump reads its pointer as an
//!   ordinary user access and then makes the same descriptor checks.)
//! - privileged instructions and state: control registers, MSRs (reading
//!   LSTAR, writing CSTAR), `cli`, `hlt`, `swapgs`, `sysretq`, an `iretq`
//!   to ring 0, port I/O (the debug-exit port), `lgdt`, raising IOPL with
//!   `popf` (silently kept at 0);
//! - UMIP: `sgdt`, `sidt`, `sldt`, `str`, `smsw` raise #GP (when the CPU
//!   has UMIP; the check says so when it has not);
//! - the address-space edges: `Map` at 0 and anywhere below 64 KiB is
//!   refused, at 64 KiB it works; the last page below the canonical
//!   boundary (where a `syscall` would leave a non-canonical return
//!   address for `sysretq`, CVE-2012-0217) is refused, the page below it
//!   works; a thread started two bytes below the boundary faults fetching
//!   its first instruction; a call to address 0 is a page fault.
//!
//! Output: `test-hostile[N]: check <name>: ok` / `FAILED (...)`, then
//! `test-hostile[N]: C checks, F failed`; the exit code is F.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::map::{Cache, MapAttr, USER_MAP_END, USER_MAP_START};
use rt::abi::{Error, ObjectType};
use rt::check::Checks;
use rt::interfaces::child;
use rt::println;
use rt::syscall;
use ucore::supervise::Event;

rt::entry!(main);

/// `ARG` when the kernel runs with `pecan.test-compat32=1`.
const ARG_COMPAT_ALLOWED: u64 = 2;

/// The probe thread's stack.
const PROBE_STACK: u64 = 0x0000_5100_0000_0000;
/// Where the mapping checks map their frame when it should work.
const MAP_LOW_OK: u64 = USER_MAP_START;
/// The page below the last user page (the IPC buffer is the one below
/// that, the stack further down).
const MAP_HIGH_OK: u64 = USER_MAP_END - 0x3000;

const FAULT_EP: u64 = child::FIRST_FREE as u64;
const PROBE: u64 = FAULT_EP + 1;
const STACK_FRAME: u64 = FAULT_EP + 2;
const TEST_FRAME: u64 = FAULT_EP + 3;

/// What an attack's code does when the CPU let it through: exit with this.
const RAN: u64 = 0x600d;

/// Selectors of the GDT (`kernel/src/arch/x86_64/gdt.rs`).
const USER_CODE32: u64 = 0x1b;
const USER_CODE64: u64 = 0x2b;

const VECTOR_UD: u64 = 6;
const VECTOR_GP: u64 = 13;
/// Page-fault error codes: a supervisor read of a present page (QEMU's
/// far-return quirk, `iretq-to-ring-0`), and a user instruction fetch
/// from a page that is not present.
const PF_PRESENT: u64 = 1;
const FETCH_NOT_PRESENT: u64 = (1 << 2) | (1 << 4);

// The attacks. Each is entered like `extern "C" fn(arg: u64) -> !` on the
// probe's stack; when an instruction does not fault, the code after it
// exits with `RAN` (0x600d).
core::arch::global_asm!(
    r#"
    # The instruction before it did not fault: exit with RAN.
    .macro HOSTILE_RAN
    mov ${ran}, %edi
    jmp hostile_probe_exit
    .endm

    .text
    .p2align 4
    # rdi: the selector to far-jump to. The pointer (m16:32, which Intel
    # and AMD both take in 64-bit mode: offset below 4 GiB) is built on the
    # stack; the jump itself reads it with an ordinary user access.
    .global hostile_far_jump
hostile_far_jump:
    lea 1f(%rip), %rax
    sub $8, %rsp
    mov %eax, (%rsp)
    mov %di, 4(%rsp)
    ljmpl *(%rsp)
    # Got through: exit with the CS it runs on (bits 16..) and RAN.
1:  mov %cs, %edi
    shl $16, %edi
    or ${ran}, %edi
    jmp hostile_probe_exit

    # Far jump to the 32-bit user code selector, then `syscall` there.
    .global hostile_compat_syscall
hostile_compat_syscall:
    lea hostile_compat_syscall_insn(%rip), %rax
    sub $8, %rsp
    mov %eax, (%rsp)
    movw ${code32}, 4(%rsp)
    ljmpl *(%rsp)
    .global hostile_compat_syscall_insn
hostile_compat_syscall_insn:
    .byte 0x0f, 0x05        # syscall (in compatibility mode)
    .byte 0x0f, 0x0b        # ud2: never reached

    .global hostile_sysenter
hostile_sysenter:
    .byte 0x0f, 0x34        # sysenter
    HOSTILE_RAN

    .global hostile_int80
hostile_int80:
    int $0x80
    HOSTILE_RAN

    .global hostile_int3
hostile_int3:
    int3
    HOSTILE_RAN

    .global hostile_int_timer
hostile_int_timer:
    int $0x20
    HOSTILE_RAN

    .global hostile_int_ff
hostile_int_ff:
    int $0xff
    HOSTILE_RAN

    .global hostile_sgdt
hostile_sgdt:
    sub $16, %rsp
    sgdt (%rsp)
    add $16, %rsp
    HOSTILE_RAN

    .global hostile_sidt
hostile_sidt:
    sub $16, %rsp
    sidt (%rsp)
    add $16, %rsp
    HOSTILE_RAN

    .global hostile_sldt
hostile_sldt:
    sldt %ax
    HOSTILE_RAN

    .global hostile_str
hostile_str:
    str %ax
    HOSTILE_RAN

    .global hostile_smsw
hostile_smsw:
    smsw %ax
    HOSTILE_RAN

    .global hostile_read_cr4
hostile_read_cr4:
    mov %cr4, %rax
    HOSTILE_RAN

    .global hostile_read_lstar
hostile_read_lstar:
    mov $0xc0000082, %ecx
    rdmsr
    HOSTILE_RAN

    .global hostile_write_cstar
hostile_write_cstar:
    mov $0xc0000083, %ecx
    xor %eax, %eax
    xor %edx, %edx
    wrmsr
    HOSTILE_RAN

    .global hostile_cli
hostile_cli:
    cli
    HOSTILE_RAN

    .global hostile_hlt
hostile_hlt:
    hlt
    HOSTILE_RAN

    .global hostile_swapgs
hostile_swapgs:
    swapgs
    HOSTILE_RAN

    .global hostile_sysret
hostile_sysret:
    lea 1f(%rip), %rcx
    pushfq
    pop %r11
    sysretq
1:  HOSTILE_RAN

    # iretq to the kernel's code selector (ring 0).
    .global hostile_iret_ring0
hostile_iret_ring0:
    mov %rsp, %rax
    pushq $0x10
    push %rax
    pushfq
    pushq $0x08
    lea 1f(%rip), %rax
    push %rax
    iretq
1:  HOSTILE_RAN

    # The isa-debug-exit port: would end the machine.
    .global hostile_out_port
hostile_out_port:
    mov $0xf4, %dx
    xor %eax, %eax
    out %al, %dx
    HOSTILE_RAN

    .global hostile_lgdt
hostile_lgdt:
    sub $16, %rsp
    movq $0, (%rsp)
    movq $0, 8(%rsp)
    lgdt (%rsp)
    add $16, %rsp
    HOSTILE_RAN

    # popf cannot raise IOPL at CPL 3: exits with the IOPL bits it reads back.
    .global hostile_raise_iopl
hostile_raise_iopl:
    pushfq
    orq $0x3000, (%rsp)
    popfq
    pushfq
    pop %rdi
    and $0x3000, %edi
    jmp hostile_probe_exit

    .global hostile_call_null
hostile_call_null:
    xor %eax, %eax
    call *%rax
    HOSTILE_RAN
    "#,
    ran = const RAN,
    code32 = const USER_CODE32,
    options(att_syntax)
);

unsafe extern "C" {
    fn hostile_far_jump();
    fn hostile_compat_syscall();
    static hostile_compat_syscall_insn: u8;
    fn hostile_sysenter();
    fn hostile_int80();
    fn hostile_int3();
    fn hostile_int_timer();
    fn hostile_int_ff();
    fn hostile_sgdt();
    fn hostile_sidt();
    fn hostile_sldt();
    fn hostile_str();
    fn hostile_smsw();
    fn hostile_read_cr4();
    fn hostile_read_lstar();
    fn hostile_write_cstar();
    fn hostile_cli();
    fn hostile_hlt();
    fn hostile_swapgs();
    fn hostile_sysret();
    fn hostile_iret_ring0();
    fn hostile_out_port();
    fn hostile_lgdt();
    fn hostile_raise_iopl();
    fn hostile_call_null();
}

/// Where an attack that was let through ends (jumped to from the assembly).
#[unsafe(no_mangle)]
extern "C" fn hostile_probe_exit(code: u64) -> ! {
    syscall::thread_exit(code as i32)
}

/// How a probe ended: what its fault message says (an exit: it ran to
/// its end), or an error of ours.
type Outcome = Result<Event, Error>;

/// The vector of an exception outcome.
fn vector(o: Outcome) -> Option<u64> {
    match o {
        Ok(Event::Exception { vector, .. }) => Some(vector),
        _ => None,
    }
}

/// The outcome of an attack that ran to its end with `code`.
fn exited(code: u64) -> Outcome {
    Ok(Event::Exited { code: code as i64 })
}

/// Runs `entry(arg)` in the probe thread on CPU `n` of the set.
fn probe(n: u32, entry: u64, arg: u64) -> Outcome {
    // A probe that faulted waits for a reply: suspend it to restart it.
    let _ = syscall::thread_suspend(PROBE);
    rt::cpu::place(PROBE, child::PRIORITY, n)?;
    // SAFETY: the probe runs on its own stack (its own frame) and touches
    // nothing of ours; everything it does wrong is a fault sent here.
    unsafe { syscall::thread_start(PROBE, entry, PROBE_STACK + 4096 - 8, arg)? };
    let (_, info, words) = syscall::recv(FAULT_EP)?;
    Ok(Event::decode(info.label(), words))
}

/// Runs an attack on every CPU of the set; the check passes when `ok`
/// holds on each.
fn attack(
    t: &mut Checks,
    name: &str,
    entry: unsafe extern "C" fn(),
    arg: u64,
    ok: impl Fn(Outcome) -> bool,
) {
    attack_at(t, name, entry as usize as u64, arg, ok);
}

/// [`attack`] with the probe started at address `entry`.
fn attack_at(t: &mut Checks, name: &str, entry: u64, arg: u64, ok: impl Fn(Outcome) -> bool) {
    let mut failure = None;
    for n in 0..rt::cpu::count() {
        let outcome = probe(n, entry, arg);
        if !ok(outcome) && failure.is_none() {
            failure = Some((n, outcome));
        }
    }
    match failure {
        None => t.expect(name, true, format_args!("")),
        Some((n, outcome)) => t.expect(
            name,
            false,
            format_args!("on CPU {n} of the set: {outcome:?}"),
        ),
    }
}

/// Whether the CPU reports UMIP (CPUID leaf 7, ECX bit 2).
fn cpu_has_umip() -> bool {
    let max = core::arch::x86_64::__cpuid(0).eax;
    max >= 7 && core::arch::x86_64::__cpuid_count(7, 0).ecx & (1 << 2) != 0
}

fn main(arg: u64) -> i32 {
    let mut t = Checks::new(arg);
    if let Err(e) = setup() {
        println!("test-hostile[{arg}]: setup FAILED ({e:?})");
        return 1;
    }
    println!(
        "test-hostile[{arg}]: attacking on {} CPU(s)",
        rt::cpu::count()
    );
    let gp = |o: Outcome| vector(o) == Some(VECTOR_GP);

    // Into ring 0 through the system-call MSRs.
    let compat_allowed = arg == ARG_COMPAT_ALLOWED;
    if compat_allowed {
        let insn = &raw const hostile_compat_syscall_insn as u64;
        attack(
            &mut t,
            "compat-mode-syscall",
            hostile_compat_syscall,
            0,
            |o| {
                o == Ok(Event::Exception {
                    vector: VECTOR_UD,
                    ip: insn,
                    error: 0,
                })
            },
        );
    } else {
        attack(
            &mut t,
            "compat-mode-unreachable",
            hostile_compat_syscall,
            0,
            |o| matches!(o, Ok(Event::Exception { vector: VECTOR_GP, error, .. }) if error == USER_CODE32 & !3),
        );
    }
    // AMD has no sysenter in long mode (#UD); Intel faults on SYSENTER_CS = 0.
    attack(&mut t, "sysenter", hostile_sysenter, 0, |o| {
        matches!(vector(o), Some(VECTOR_UD | VECTOR_GP))
    });

    // Interrupt gates: DPL 0 each, so `int n` is #GP whose error code
    // names the gate (bit 1: an IDT entry; bit 0, external, clear). The
    // CPU puts the vector in bits 3.. (0x402 for 0x80); QEMU 7.2's TCG
    // puts vector * 16 there (0x802), so the index is not compared.
    for (name, entry) in [
        ("int-0x80", hostile_int80 as unsafe extern "C" fn()),
        ("int3", hostile_int3),
        ("int-timer-vector", hostile_int_timer),
        ("int-0xff", hostile_int_ff),
    ] {
        attack(
            &mut t,
            name,
            entry,
            0,
            |o| matches!(o, Ok(Event::Exception { vector: VECTOR_GP, error, .. }) if error & 3 == 2),
        );
    }

    // Every selector of the GDT's eight slots, two beyond its end and of
    // the (null) LDT, with every RPL: only the 64-bit user code slot lets
    // the jump through (any RPL: a jump to a non-conforming segment may
    // name a lower RPL and runs at the current privilege), and the code
    // behind it runs with CS = 0x2b, still in ring 3. With compatibility
    // mode allowed, slot 3 would enter it and run the 64-bit code after it
    // as 32-bit code: `compat-mode-syscall` covers it.
    let mut failure = None;
    for selector in 0u64..0x50 {
        if compat_allowed && selector & !3 == USER_CODE32 & !3 {
            continue;
        }
        for n in 0..rt::cpu::count() {
            let outcome = probe(n, hostile_far_jump as *const () as u64, selector);
            let ok = if selector & !3 == USER_CODE64 & !3 {
                outcome == exited((USER_CODE64 << 16) | RAN)
            } else {
                gp(outcome)
            };
            if !ok && failure.is_none() {
                failure = Some((selector, n, outcome));
            }
        }
    }
    match failure {
        None => t.expect("far-jump-every-selector", true, format_args!("")),
        Some((s, n, o)) => t.expect(
            "far-jump-every-selector",
            false,
            format_args!("selector {s:#x} on CPU {n} of the set: {o:?}"),
        ),
    }

    // Privileged instructions and state.
    for (name, entry) in [
        ("read-cr4", hostile_read_cr4 as unsafe extern "C" fn()),
        ("rdmsr-lstar", hostile_read_lstar),
        ("wrmsr-cstar", hostile_write_cstar),
        ("cli", hostile_cli),
        ("hlt", hostile_hlt),
        ("swapgs", hostile_swapgs),
        ("sysretq", hostile_sysret),
        ("out-debug-exit-port", hostile_out_port),
        ("lgdt", hostile_lgdt),
    ] {
        attack(&mut t, name, entry, 0, gp);
    }
    // An iretq to ring 0 is #GP — or, under QEMU 7.2's TCG with SMAP on,
    // a page fault before that: it pops the iret frame from the user's
    // stack with a supervisor access, which SMAP refuses (present page,
    // supervisor read: error code 1, at the frame on the probe's stack).
    // Either way a fault of the attacker.
    attack(&mut t, "iretq-to-ring-0", hostile_iret_ring0, 0, |o| {
        gp(o)
            || matches!(o, Ok(Event::PageFault { address, code: PF_PRESENT, .. })
                if (PROBE_STACK..PROBE_STACK + 4096).contains(&address))
    });
    attack(&mut t, "popf-iopl-stays-0", hostile_raise_iopl, 0, |o| {
        o == exited(0)
    });

    // UMIP: descriptor-table and machine-status reads fault in user mode.
    let umip = cpu_has_umip();
    for (name, entry) in [
        ("umip-sgdt", hostile_sgdt as unsafe extern "C" fn()),
        ("umip-sidt", hostile_sidt),
        ("umip-sldt", hostile_sldt),
        ("umip-str", hostile_str),
        ("umip-smsw", hostile_smsw),
    ] {
        if umip {
            attack(&mut t, name, entry, 0, gp);
        } else {
            println!("test-hostile[{arg}]: {name}: skipped, the CPU has no UMIP");
        }
    }

    // The address-space edges.
    map_checks(&mut t);
    let boundary_ip = 0x0000_8000_0000_0000 - 2;
    attack_at(
        &mut t,
        "thread-two-bytes-below-boundary",
        boundary_ip,
        0,
        |o| matches!(o, Ok(Event::PageFault { address, code: FETCH_NOT_PRESENT, .. }) if address == boundary_ip),
    );
    attack(&mut t, "call-null", hostile_call_null, 0, |o| {
        matches!(
            o,
            Ok(Event::PageFault {
                address: 0,
                code: FETCH_NOT_PRESENT,
                ..
            })
        )
    });

    // The kernel ran on through all of it.
    t.expect(
        "kernel-still-answers",
        syscall::null().is_ok() && syscall::yield_now().is_ok(),
        format_args!("null or yield failed"),
    );
    t.finish()
}

/// `Map` refuses the lowest 64 KiB and the last user page, and works just
/// inside both edges.
fn map_checks(t: &mut Checks) {
    let vspace = u64::from(child::OWN_VSPACE);
    let attr = MapAttr {
        writable: false,
        executable: true,
        cache: Cache::WriteBack,
    };
    // SAFETY: maps a fresh frame of ours at addresses nothing else uses;
    // the ones that work are unmapped right away.
    let map = |vaddr: u64| unsafe { syscall::map(vspace, TEST_FRAME, vaddr, attr) };
    // SAFETY: unmaps our own test frame, which nothing references.
    let unmap = || unsafe { syscall::unmap(TEST_FRAME) };
    for (name, vaddr) in [
        ("map-at-0", 0u64),
        ("map-below-64k", USER_MAP_START - 0x1000),
        ("map-last-user-page", USER_MAP_END),
    ] {
        let r = map(vaddr);
        if r.is_ok() {
            let _ = unmap();
        }
        t.expect(
            name,
            r == Err(Error::InvalidArgument),
            format_args!("{r:?}"),
        );
    }
    for (name, vaddr) in [
        ("map-at-64k", MAP_LOW_OK),
        ("map-below-last-user-page", MAP_HIGH_OK),
    ] {
        let r = map(vaddr).and_then(|()| unmap());
        t.expect(name, r == Ok(()), format_args!("{r:?}"));
    }
}

fn setup() -> Result<(), Error> {
    let u = u64::from(child::UNTYPED);
    let vspace = u64::from(child::OWN_VSPACE);
    syscall::retype(u, ObjectType::Endpoint, 0, FAULT_EP, 1)?;
    syscall::retype(u, ObjectType::Thread, 0, PROBE, 1)?;
    syscall::retype(u, ObjectType::Frame4K, 0, STACK_FRAME, 2)?;
    let rw = MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    };
    // SAFETY: the probe's stack address is reserved for it in this
    // component; nothing else lives there.
    unsafe { syscall::map(vspace, STACK_FRAME, PROBE_STACK, rw)? };
    syscall::thread_configure(PROBE, child::OWN_CSPACE.into(), vspace, 0, FAULT_EP)?;
    syscall::thread_set_sched_params(PROBE, child::PRIORITY, 0)
}
