//! The hostile guest: 32-bit protected-mode code (flat segments, paging
//! off), assembled by hand. Each line is one instruction and what it is
//! for; [`CODE`] is loaded at guest-physical [`CODE_GPA`].

/// Where the code starts (guest-physical = linear: paging is off).
pub const CODE_GPA: u64 = 0x1000;
/// The guest's stack top.
pub const STACK_GPA: u64 = 0x8000;
/// Where the guest writes [`RAM_MARK`] inside its RAM (the VMM reads it
/// through its own mapping of the same frame).
pub const RAM_MARK_GPA: u64 = 0x9000;
pub const RAM_MARK: u32 = 0x600d_d00d;

/// Ports the guest uses to report.
pub const PORT_HELLO: u16 = 0x1234;
pub const HELLO_VALUE: u64 = 0xcafe;
pub const PORT_CPUID_EBX: u16 = 0x1235;
pub const PORT_MSR_EAX: u16 = 0x1236;
pub const PORT_READ_VALUE: u16 = 0x1237;
pub const PORT_LOOP: u16 = 0x80;
pub const PORT_SPIN_DONE: u16 = 0x81;
pub const PORT_XMM_START: u16 = 0x93;
pub const PORT_XMM_END: u16 = 0x94;
/// Where the VMM puts the value the guest loads into `xmm0` (one per
/// instance, so two VMs' values differ).
pub const PATTERN_GPA: u64 = 0x9100;
/// Exits the guest makes on [`PORT_LOOP`].
pub const LOOP_EXITS: u64 = 2000;
/// Iterations of the spin (`dec ecx; jnz`: no exit but host interrupts).
pub const SPIN: u32 = 0x0200_0000;

/// The guest-physical addresses outside its RAM the guest writes
/// (the host kernel's load address, the local APIC) and reads.
pub const WRITE_OUTSIDE: [u64; 2] = [0x0010_0000, 0xfee0_0000];
pub const READ_OUTSIDE: u64 = 0x4000_0000;

macro_rules! le32 {
    ($v:expr) => {
        [
            ($v & 0xff) as u8,
            (($v >> 8) & 0xff) as u8,
            (($v >> 16) & 0xff) as u8,
            (($v >> 24) & 0xff) as u8,
        ]
    };
}

const fn cat<const N: usize>(parts: &[&[u8]]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    let mut p = 0;
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            out[at] = parts[p][i];
            at += 1;
            i += 1;
        }
        p += 1;
    }
    assert!(at == N);
    out
}

const SPIN_LE: [u8; 4] = le32!(SPIN);
const LOOP_LE: [u8; 4] = le32!(LOOP_EXITS as u32);
const MARK_LE: [u8; 4] = le32!(RAM_MARK);
const W0: [u8; 4] = le32!(WRITE_OUTSIDE[0] as u32);
const W1: [u8; 4] = le32!(WRITE_OUTSIDE[1] as u32);
const R0: [u8; 4] = le32!(READ_OUTSIDE as u32);
const PATTERN_LE: [u8; 4] = le32!(PATTERN_GPA as u32);

pub const CODE_LEN: usize = 163;

/// The program.
pub const CODE: [u8; CODE_LEN] = cat(&[
    // mov dword [0x9000], RAM_MARK: inside its RAM
    &[0xc7, 0x05, 0x00, 0x90, 0x00, 0x00],
    &MARK_LE,
    // mov dx, 0x1234; mov eax, 0xcafe; out dx, ax (16-bit)
    &[0x66, 0xba, 0x34, 0x12],
    &[0xb8, 0xfe, 0xca, 0x00, 0x00],
    &[0x66, 0xef],
    // movd eax, xmm0; out PORT_XMM_START, eax: its vector registers at
    // the start (clean: nothing of the VMM's or another guest's)
    &[0x66, 0x0f, 0x7e, 0xc0],
    &[0xe7, PORT_XMM_START as u8],
    // movd xmm0, [PATTERN_GPA]: its own value, which the VMM put there
    &[0x66, 0x0f, 0x6e, 0x05],
    &PATTERN_LE,
    // xor eax, eax; cpuid; mov eax, ebx; mov dx, 0x1235; out dx, eax
    &[0x31, 0xc0],
    &[0x0f, 0xa2],
    &[0x89, 0xd8],
    &[0x66, 0xba, 0x35, 0x12],
    &[0xef],
    // mov ecx, EFER; rdmsr; mov dx, 0x1236; out dx, eax
    &[0xb9, 0x80, 0x00, 0x00, 0xc0],
    &[0x0f, 0x32],
    &[0x66, 0xba, 0x36, 0x12],
    &[0xef],
    // mov ecx, VM_HSAVE_PA; mov eax, 0xdeadbeef; xor edx, edx; wrmsr:
    // where the host's CPU keeps its state across VMRUN, were it not
    // intercepted
    &[0xb9, 0x17, 0x01, 0x01, 0xc0],
    &[0xb8, 0xef, 0xbe, 0xad, 0xde],
    &[0x31, 0xd2],
    &[0x0f, 0x30],
    // mov dword [0x100000], 0xdeadbeef; mov dword [0xfee00000], ...
    &[0xc7, 0x05],
    &W0,
    &[0xef, 0xbe, 0xad, 0xde],
    &[0xc7, 0x05],
    &W1,
    &[0xef, 0xbe, 0xad, 0xde],
    // mov eax, [0x40000000]; mov dx, 0x1237; out dx, eax
    &[0xa1],
    &R0,
    &[0x66, 0xba, 0x37, 0x12],
    &[0xef],
    // in al, 0x60 (keyboard); mov al, 1; out 0xf4, al (QEMU's debug-exit
    // port: were it not intercepted, QEMU would stop with status 3)
    &[0xe4, 0x60],
    &[0xb0, 0x01],
    &[0xe6, 0xf4],
    // mov dx, 0xcf8; mov eax, 0x80000000; out dx, eax (PCI configuration)
    &[0x66, 0xba, 0xf8, 0x0c],
    &[0xb8, 0x00, 0x00, 0x00, 0x80],
    &[0xef],
    // hlt
    &[0xf4],
    // mov ecx, 2000; L1: out 0x80, al; loop L1
    &[0xb9],
    &LOOP_LE,
    &[0xe6, 0x80],
    &[0xe2, 0xfc],
    // mov ecx, SPIN; L2: dec ecx; jnz L2; out 0x81, al
    &[0xb9],
    &SPIN_LE,
    &[0x49],
    &[0x75, 0xfd],
    &[0xe6, 0x81],
    // movd eax, xmm0; out PORT_XMM_END, eax: still its own after
    // thousands of exits and host preemptions
    &[0x66, 0x0f, 0x7e, 0xc0],
    &[0xe7, PORT_XMM_END as u8],
    // mov eax, cr4; or eax, PKE; mov cr4, eax: protection keys, whose
    // PKRU would outlive the exit (intercepted; the VMM loads CR4 and the
    // kernel clears PKE)
    &[0x0f, 0x20, 0xe0],
    &[0x0d, 0x00, 0x00, 0x40, 0x00],
    &[0x0f, 0x22, 0xe0],
    // vmmcall
    &[0x0f, 0x01, 0xd9],
    // stgi: an SVM instruction (intercepted)
    &[0x0f, 0x01, 0xdc],
    // ud2: #UD with an IDT of limit 0 → #GP → #DF → shutdown
    &[0x0f, 0x0b],
]);

/// The length of the instruction at the start of `code`, for the ones
/// this guest makes exits on (the VMM decodes them itself: no decode
/// assists, no next-RIP under QEMU's TCG). `None` for anything else.
pub fn length(code: &[u8]) -> Option<u64> {
    Some(match code {
        [0x0f, 0xa2, ..] | [0x0f, 0x32, ..] | [0x0f, 0x30, ..] => 2,
        [0x0f, 0x01, 0xd9 | 0xdc, ..] => 3,
        // mov crN, r32 (register operand)
        [0x0f, 0x22, 0xc0..=0xff, ..] => 3,
        // mov dword [disp32], imm32
        [0xc7, 0x05, ..] => 10,
        // mov eax, [moffs32]
        [0xa1, ..] => 5,
        [0x66, 0xe7, ..] => 3,
        [0xf4, ..] => 1,
        [0xe4..=0xe7, ..] => 2,
        [0xec..=0xef, ..] => 1,
        [0x66, 0xed | 0xef, ..] => 2,
        _ => return None,
    })
}

/// The second guest: interrupts. A GDT at guest-physical 0 (null, flat
/// 32-bit code 0x08, flat data 0x10), an IDT at [`IDT_GPA`] with gates
/// for [`VECTOR_VIRQ`] and [`VECTOR_EVENT`], whose handlers report their
/// vector on [`PORT_IRQ`] and return; the program at [`IRQ_CODE_GPA`]
/// reads the TSC (reporting EDX on [`PORT_TSC`]), enables interrupts,
/// halts, and reports [`PORT_IRQ_DONE`] before it triple-faults.
pub const GDT: [u64; 3] = [0, 0x00cf_9a00_0000_ffff, 0x00cf_9200_0000_ffff];
pub const IDT_GPA: u64 = 0x3000;
pub const IDT_LIMIT: u32 = 0x1ff;
pub const HANDLERS_GPA: u64 = 0x3800;
pub const IRQ_CODE_GPA: u64 = 0x2000;
pub const VECTOR_VIRQ: u8 = 0x20;
pub const VECTOR_EVENT: u8 = 0x21;
pub const PORT_IRQ: u16 = 0x90;
pub const PORT_IRQ_DONE: u16 = 0x91;
pub const PORT_TSC: u16 = 0x92;

/// `mov al, VECTOR; out PORT_IRQ, al; iretd` for each vector.
pub const HANDLERS: [[u8; 5]; 2] = [
    [0xb0, VECTOR_VIRQ, 0xe6, PORT_IRQ as u8, 0xcf],
    [0xb0, VECTOR_EVENT, 0xe6, PORT_IRQ as u8, 0xcf],
];

/// A 32-bit interrupt gate to `offset` in code segment 0x08.
pub const fn gate(offset: u32) -> u64 {
    (offset as u64 & 0xffff)
        | 0x08 << 16
        | 0x8e00_u64 << 32
        | ((offset as u64 >> 16) & 0xffff) << 48
}

/// The program.
pub const IRQ_CODE: [u8; 14] = [
    0x0f,
    0x31, // rdtsc
    0x89,
    0xd0, // mov eax, edx
    0xe7,
    PORT_TSC as u8, // out PORT_TSC, eax
    0xfb,           // sti
    0x90,           // nop (the interrupt shadow of sti ends here: the window opens)
    0xf4,           // hlt
    0x90,           // nop
    0xe6,
    PORT_IRQ_DONE as u8, // out PORT_IRQ_DONE, al
    0x0f,
    0x0b, // ud2: vector 6 has no gate → #NP → #DF → shutdown
];

/// The third guest: 64-bit long mode, entered directly (the VMM loads
/// paging, EFER and a 64-bit code segment, as a VMM booting Linux's
/// 64-bit entry does). Page tables in guest RAM identity-map the first
/// 2 MiB with one large page: PML4 at [`PML4_GPA`], PDPT and PD after it.
pub const PML4_GPA: u64 = 0xa000;
pub const LONG_CODE_GPA: u64 = 0x4000;
pub const PORT_LONG: u16 = 0x95;
pub const LONG_VALUE: u64 = 0x1122_3344_5566_7788;
/// The tables: (guest-physical address, entry 0).
pub const LONG_TABLES: [(u64, u64); 3] = [
    (PML4_GPA, (PML4_GPA + 0x1000) | 0x3),
    (PML4_GPA + 0x1000, (PML4_GPA + 0x2000) | 0x3),
    // A 2 MiB page at 0: present, writable, PS.
    (PML4_GPA + 0x2000, 0x83),
];
/// `mov rax, LONG_VALUE; out PORT_LONG, eax; ud2`.
pub const LONG_CODE: [u8; 14] = [
    0x48,
    0xb8,
    0x88,
    0x77,
    0x66,
    0x55,
    0x44,
    0x33,
    0x22,
    0x11, // mov rax, imm64
    0xe7,
    PORT_LONG as u8, // out PORT_LONG, eax
    0x0f,
    0x0b, // ud2 → shutdown (IDT limit 0)
];
