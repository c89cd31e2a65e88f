//! Global descriptor table, task-state segment and interrupt descriptor table.
//!
//! Segment order is fixed by `syscall`/`sysret`: STAR[47:32] = kernel code
//! (kernel data follows it), STAR[63:48] = user code32 selector base, from
//! which sysret derives user data (+8) and user code64 (+16).
//!
//! `sysretq` never reads the GDT (it loads fixed segment attributes), so
//! the user code32 slot is a null descriptor: Pecan has no 32-bit user
//! code, and a far jump or return to selector 0x1b raises #GP instead of
//! entering compatibility mode, where `syscall` would use CSTAR
//! (`trap.s`, `docs/security.md`). The kernel option
//! `pecan.test-compat32=1` makes it a present 32-bit code segment, only
//! so that the hostile test can prove the CSTAR entry harmless.
//!
//! No descriptor is a call, task or interrupt gate a user could use: every
//! IDT gate has DPL 0, so `int n` from user mode (`int 0x80`, `int3`)
//! raises #GP; the LDT is null (loaded with selector 0, not the reset
//! state's table at linear address 0, which a user could fill with a call
//! gate by mapping page 0), so every LDT selector raises #GP; the TSS has
//! no I/O bitmap (ports need a capability).
//!
//! Each CPU has its own GDT and TSS (the TSS holds that CPU's kernel stack
//! and IST stacks); all CPUs share one IDT.

use core::arch::asm;
use core::mem::size_of;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::static_cell::StaticCell;

pub const KERNEL_CODE: u16 = 0x08;
pub const KERNEL_DATA: u16 = 0x10;
/// The selector base of STAR[63:48] (sysret adds 8 for user data, 16 for
/// user code64); its descriptor is null unless [`allow_compat_mode`] ran.
pub const USER_CODE32: u16 = 0x18 | 3;
pub const USER_DATA: u16 = 0x20 | 3;
pub const USER_CODE64: u16 = 0x28 | 3;
pub const TSS_SELECTOR: u16 = 0x30;

/// IST slots (1-based as the CPU numbers them).
pub const IST_DOUBLE_FAULT: u8 = 1;
pub const IST_NMI: u8 = 2;
pub const IST_MACHINE_CHECK: u8 = 3;
const IST_STACK_SIZE: usize = 16 * 1024;

#[repr(C, packed(4))]
pub struct Tss {
    _reserved0: u32,
    pub rsp: [u64; 3],
    _reserved1: u64,
    pub ist: [u64; 7],
    _reserved2: u64,
    _reserved3: u16,
    pub iomap_base: u16,
}

#[repr(C, align(16))]
struct IstStack([u8; IST_STACK_SIZE]);

/// The descriptor tables and emergency stacks of one CPU.
#[repr(C, align(4096))]
pub struct CpuTables {
    gdt: [u64; 8],
    pub tss: Tss,
    ist_stacks: [IstStack; 3],
}

impl CpuTables {
    pub const fn new() -> Self {
        CpuTables {
            gdt: [0; 8],
            tss: Tss {
                _reserved0: 0,
                rsp: [0; 3],
                _reserved1: 0,
                ist: [0; 7],
                _reserved2: 0,
                _reserved3: 0,
                // No I/O bitmap: a base beyond the limit denies all ports at CPL 3.
                iomap_base: size_of::<Tss>() as u16,
            },
            ist_stacks: [
                IstStack([0; IST_STACK_SIZE]),
                IstStack([0; IST_STACK_SIZE]),
                IstStack([0; IST_STACK_SIZE]),
            ],
        }
    }

    /// Fills in this CPU's GDT and TSS and loads them.
    ///
    /// # Safety
    /// `self` must stay at this address for as long as the CPU runs (the CPU
    /// keeps pointers to it), and no other CPU may use these tables.
    pub unsafe fn load(&'static mut self) {
        for (slot, stack) in self.ist_stacks.iter().enumerate() {
            let top = stack.0.as_ptr() as u64 + IST_STACK_SIZE as u64;
            self.tss.ist[slot] = top;
        }
        let tss_base = &self.tss as *const Tss as u64;
        let tss_limit = (size_of::<Tss>() - 1) as u64;
        self.gdt = [
            0,
            0x00af_9a00_0000_ffff,    // kernel code 64
            0x00cf_9200_0000_ffff,    // kernel data
            user_code32_descriptor(), // sysret's selector base only (module doc)
            0x00cf_f200_0000_ffff,    // user data
            0x00af_fa00_0000_ffff,    // user code 64
            // 64-bit available TSS (type 9, present), base split over both words.
            tss_limit
                | ((tss_base & 0xff_ffff) << 16)
                | (0x89 << 40)
                | (((tss_base >> 24) & 0xff) << 56),
            tss_base >> 32,
        ];
        let pointer = DescriptorPointer {
            limit: (size_of::<[u64; 8]>() - 1) as u16,
            base: self.gdt.as_ptr() as u64,
        };
        // SAFETY: the GDT above is valid and 'static; reloading CS through a
        // far return and the data segments with the same flat descriptors
        // keeps the current execution environment intact; the TSS descriptor
        // points at a valid, 'static TSS.
        unsafe {
            asm!(
                "lgdt [{ptr}]",
                "push {code}",
                "lea {tmp}, [rip + 2f]",
                "push {tmp}",
                "retfq",
                "2:",
                "mov ds, {data:x}",
                "mov es, {data:x}",
                "mov ss, {data:x}",
                // A null LDT: the CPU comes out of reset with an LDT at
                // linear address 0 (limit 0xffff), where a user far jump
                // or call through an LDT selector would read a descriptor
                // from the user's own page 0 — a call gate into ring 0.
                "lldt {null:x}",
                "ltr {tss:x}",
                ptr = in(reg) &pointer,
                code = in(reg) u64::from(KERNEL_CODE),
                data = in(reg) u64::from(KERNEL_DATA),
                tss = in(reg) u64::from(TSS_SELECTOR),
                null = in(reg) 0u64,
                tmp = out(reg) _,
            );
        }
    }
}

/// A present 32-bit user code segment (DPL 3) instead of the null one.
const USER_CODE32_PRESENT: u64 = 0x00cf_fa00_0000_ffff;
/// Set by [`allow_compat_mode`] (kernel option `pecan.test-compat32=1`).
static COMPAT_MODE_ALLOWED: AtomicBool = AtomicBool::new(false);

fn user_code32_descriptor() -> u64 {
    if COMPAT_MODE_ALLOWED.load(Ordering::Relaxed) {
        USER_CODE32_PRESENT
    } else {
        0
    }
}

/// For the hostile test only (`pecan.test-compat32=1`): makes the user
/// code32 slot a present 32-bit code segment, in `tables` (the boot CPU's,
/// already loaded) and in every GDT loaded later, so that user code can
/// reach compatibility mode and show that `syscall` there is a fault of
/// the thread (CSTAR, `trap.s`). Called before any user thread runs.
pub fn allow_compat_mode(tables: &mut CpuTables) {
    COMPAT_MODE_ALLOWED.store(true, Ordering::Relaxed);
    // The CPU reads a descriptor when a selector is loaded, so the change
    // takes effect at the next far return to 0x1b.
    tables.gdt[usize::from(USER_CODE32 >> 3)] = USER_CODE32_PRESENT;
}

#[repr(C, packed)]
struct DescriptorPointer {
    limit: u16,
    base: u64,
}

#[derive(Clone, Copy)]
#[repr(C)]
struct IdtEntry {
    offset_low: u16,
    selector: u16,
    ist: u8,
    type_attr: u8,
    offset_mid: u16,
    offset_high: u32,
    _reserved: u32,
}

static IDT: StaticCell<[IdtEntry; 256]> = StaticCell::new(
    [IdtEntry {
        offset_low: 0,
        selector: 0,
        ist: 0,
        type_attr: 0,
        offset_mid: 0,
        offset_high: 0,
        _reserved: 0,
    }; 256],
);

unsafe extern "C" {
    static trap_stubs: u8;
}

/// Size of one entry stub in `trap.s`.
const TRAP_STUB_SIZE: u64 = 16;

/// Builds the shared IDT (once, on the boot CPU).
pub fn init_idt() {
    let stubs = &raw const trap_stubs as u64;
    // SAFETY: called once on the boot CPU before interrupts are enabled and
    // before other CPUs exist, so nothing reads the IDT concurrently.
    let idt = unsafe { &mut *IDT.get() };
    for (vector, entry) in idt.iter_mut().enumerate() {
        let handler = stubs + vector as u64 * TRAP_STUB_SIZE;
        let ist = match vector {
            8 => IST_DOUBLE_FAULT,
            2 => IST_NMI,
            18 => IST_MACHINE_CHECK,
            _ => 0,
        };
        *entry = IdtEntry {
            offset_low: handler as u16,
            selector: KERNEL_CODE,
            ist,
            type_attr: 0x8e, // present, DPL 0, 64-bit interrupt gate
            offset_mid: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            _reserved: 0,
        };
    }
}

/// Loads the shared IDT on this CPU.
pub fn load_idt() {
    let pointer = DescriptorPointer {
        limit: (size_of::<[IdtEntry; 256]>() - 1) as u16,
        base: IDT.get() as u64,
    };
    // SAFETY: IDT is 'static and was filled by init_idt before any CPU loads it.
    unsafe { asm!("lidt [{}]", in(reg) &pointer, options(readonly, nostack, preserves_flags)) }
}
