//! `vm-exit`: a VM exit round trip. A guest in real mode loops on
//! `out 0x80, al; jmp back`; each sample is one `rt::vcpu::Vcpu::run`
//! of the VMM: the state block written to the IPC buffer, `VcpuRun`, the
//! guest's `jmp` and `out`, the IOIO exit, the block read back, and the
//! VMM's answer (RIP = exit info 2, the next instruction). Under icount
//! `VMRUN` and the `#VMEXIT` count one instruction each: the figure is the
//! software path around them, not what an exit costs on hardware
//! (docs/virtualization.md).

use alloc::vec;

use bench::catalog::Bench;
use bench::{Unit, SAMPLES};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::vcpu::{exit, load, word};
use rt::abi::ObjectType;
use rt::syscall;
use rt::vcpu::Vcpu;

use crate::env::{failed, map, RW};
use crate::{Ctx, Failure};

/// Where the VMM sees the guest's page (guest-physical 0).
const GUEST_VIEW_VA: u64 = 0x0000_0040_0000_0000;

/// The guest: `out 0x80, al; jmp $-4`.
const GUEST: [u8; 4] = [0xe6, 0x80, 0xeb, 0xfc];

pub fn vm_exit(ctx: &mut Ctx, b: &Bench) -> Result<(), Failure> {
    let space = ctx.env.make(ObjectType::GuestSpace, 14)?;
    let vcpu = ctx.env.make(ObjectType::Vcpu, 0)?;
    let frame = ctx.env.make(ObjectType::Frame4K, 0)?;
    let view = ctx.env.slot()?;
    syscall::cap_copy(frame, view).map_err(failed("CapCopy"))?;
    let rwx = MapAttr {
        writable: true,
        executable: true,
        cache: Cache::WriteBack,
    };
    // SAFETY: a guest space is not this component's memory.
    unsafe { syscall::map(space, frame, 0, rwx) }.map_err(failed("Map (guest)"))?;
    map(view, GUEST_VIEW_VA, RW)?;
    // SAFETY: GUEST_VIEW_VA maps the fresh frame just mapped, for this
    // benchmark alone.
    unsafe {
        core::ptr::copy_nonoverlapping(GUEST.as_ptr(), GUEST_VIEW_VA as *mut u8, GUEST.len())
    };
    // The VCPU starts in real mode at 0 (the kernel's reset state).
    let mut v = Vcpu::new(vcpu, space);
    let first = v.run(0).map_err(failed("VcpuRun"))?;
    if first.code != exit::IOIO || first.info2 != 2 {
        return Err(Failure::WrongData { what: "vm-exit" });
    }
    let mut bad = 0u64;
    let mut samples = vec![0; SAMPLES];
    bench::measure(&mut samples, ctx.overhead, || {
        let next = v.get(word::EXIT_INFO2);
        v.set(word::RIP, next);
        match v.run(load::REGISTERS) {
            Ok(e) if e.code == exit::IOIO && e.info2 == 2 => {}
            _ => bad += 1,
        }
    });
    if bad != 0 {
        return Err(Failure::WrongData { what: "vm-exit" });
    }
    ctx.report(
        b,
        "VM exit round trip: the guest's out to a port, VcpuRun returns to the VMM, which resumes \
         it after the out (VMRUN and #VMEXIT count one instruction each under icount)",
        Unit::Ticks,
        &samples,
    )
}
