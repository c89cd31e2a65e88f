//! test-isolation: proves that a component is confined to what it was
//! given. Started by root as a *test* child (see `interfaces::child`: it holds its
//! own thread, capability space and address space), normally twice —
//! `pecan.start=test-isolation:1+own,test-isolation:2+own` — so that each instance
//! can aim at the other's memory.
//!
//! Each instance maps a page holding a secret at `SECRET_BASE + ARG * 4096`
//! and then probes, each time with a helper thread whose fault endpoint is
//! this component's own endpoint: the probe thread touches an address and
//! either faults (the fault message arrives here, the probe thread is
//! suspended and reused) or exits with the value it read. Probes:
//!
//! - its own secret page: readable (the control: probes do work);
//! - the other instance's secret page: faults (not mapped here);
//! - root's boot-information page and the boot image: fault;
//! - kernel memory (direct map, kernel image), read and write: fault;
//! - a non-canonical address: general-protection exception.
//!
//! Capability checks: a slot it was never given is empty, a slot past its
//! capability space does not exist, a capability address through something
//! that is not a table is refused, and a capability derived from one it
//! revoked is gone.
//!
//! Output: `test-isolation[N]: check <name>: ok` / `FAILED (...)`, then
//! `test-isolation[N]: C checks, F failed`; the exit code is F.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::fault::{LABEL_EXCEPTION, LABEL_EXIT, LABEL_PAGE_FAULT};
use rt::abi::map::{Cache, MapAttr};
use rt::abi::{caddr, Error, ObjectType, Rights};
use rt::check::Checks;
use rt::interfaces::child;
use rt::println;
use rt::syscall;

rt::entry!(main);

/// Where the instances put their secrets (one page each, by ARG).
const SECRET_BASE: u64 = 0x0000_5000_0000_0000;
const SECRET: u64 = 0x5ec2_e700;
/// The probe thread's stack.
const PROBE_STACK: u64 = 0x0000_5100_0000_0000;

const FAULT_EP: u64 = child::FIRST_FREE as u64;
const PROBE: u64 = FAULT_EP + 1;
const STACK_FRAME: u64 = FAULT_EP + 2;
const SECRET_FRAME: u64 = FAULT_EP + 3;
const DERIVED_EP: u64 = FAULT_EP + 4;
const SPARE: u64 = FAULT_EP + 5;

/// How a probe ended.
#[derive(Debug, PartialEq, Eq)]
enum Probe {
    /// The probe thread read this value and exited.
    Read(u64),
    PageFault(u64),
    Exception(u64),
    Other(Error),
}

/// A probe thread's body: reads `addr` and exits with the value.
extern "C" fn probe_read(addr: u64) -> ! {
    // SAFETY: deliberately unsound: the whole point is to touch memory
    // that may not be ours; a fault goes to our fault handler, which
    // stops this thread.
    let value = unsafe { core::ptr::read_volatile(addr as *const u64) };
    syscall::thread_exit(value as i32)
}

/// A probe thread's body: writes `addr`.
extern "C" fn probe_write(addr: u64) -> ! {
    // SAFETY: as for probe_read.
    unsafe { core::ptr::write_volatile(addr as *mut u64, 1) };
    syscall::thread_exit(1)
}

fn rw() -> MapAttr {
    MapAttr {
        writable: true,
        executable: false,
        cache: Cache::WriteBack,
    }
}

/// Runs one probe of `addr` and says how it ended.
fn probe(addr: u64, write: bool) -> Probe {
    // A probe that faulted waits for a reply; suspend it so it can start
    // again (a new thread could be made instead; reuse keeps it small).
    let _ = syscall::thread_suspend(PROBE);
    let entry = if write {
        probe_write as *const ()
    } else {
        probe_read as *const ()
    };
    // SAFETY: the probe thread runs on its own stack and touches only
    // `addr`.
    let started =
        unsafe { syscall::thread_start(PROBE, entry as u64, PROBE_STACK + 4096 - 8, addr) };
    if let Err(e) = started {
        return Probe::Other(e);
    }
    match syscall::recv(FAULT_EP) {
        Ok((_, info, w)) => match info.label() {
            LABEL_PAGE_FAULT => Probe::PageFault(w[rt::abi::fault::WORD_ADDRESS]),
            LABEL_EXCEPTION => Probe::Exception(w[rt::abi::fault::WORD_CODE]),
            LABEL_EXIT => Probe::Read(w[0] & 0xffff_ffff),
            _ => Probe::Other(Error::InvalidState),
        },
        Err(e) => Probe::Other(e),
    }
}

fn main(instance: u64) -> i32 {
    let mut t = Checks::new(instance);
    if let Err(e) = setup(instance) {
        println!("test-isolation[{instance}]: setup FAILED ({e:?})");
        return 1;
    }
    let own = SECRET_BASE + instance * 4096;
    let other = SECRET_BASE + (3 - instance.clamp(1, 2)) * 4096;
    let r = probe(own, false);
    t.expect(
        "own-memory-readable",
        r == Probe::Read(SECRET & 0xffff_ffff),
        format_args!("{r:?}"),
    );
    for (name, addr, write) in [
        ("other-component-memory", other, false),
        ("root-boot-info", rt::abi::bootinfo::BOOT_INFO_ADDR, false),
        ("boot-image", rt::abi::bootinfo::BOOT_IMAGE_ADDR, false),
        ("kernel-direct-map-read", 0xffff_8000_0010_0000, false),
        ("kernel-direct-map-write", 0xffff_8000_0010_0000, true),
        ("kernel-image-read", 0xffff_ffff_8010_0000, false),
        ("kernel-image-write", 0xffff_ffff_8010_0000, true),
    ] {
        let r = probe(addr, write);
        t.expect(name, r == Probe::PageFault(addr), format_args!("{r:?}"));
    }
    let r = probe(0x8000_0000_0000_0000, false);
    t.expect(
        "non-canonical",
        r == Probe::Exception(13),
        format_args!("{r:?}"),
    );

    // Capabilities it does not hold.
    t.expect(
        "slot-never-given",
        syscall::signal(SPARE + 10) == Err(Error::EmptySlot),
        format_args!("{:?}", syscall::signal(SPARE + 10)),
    );
    let past = 1u64 << child::CSPACE_BITS;
    t.expect(
        "slot-past-cspace",
        syscall::signal(past) == Err(Error::InvalidSlot),
        format_args!("{:?}", syscall::signal(past)),
    );
    let through = caddr::in_table(child::SERVICE_ENDPOINT, 1);
    t.expect(
        "address-through-non-table",
        syscall::signal(through) == Err(Error::WrongObjectType),
        format_args!("{:?}", syscall::signal(through)),
    );
    let revoked = syscall::cap_mint(FAULT_EP, DERIVED_EP, Rights::WRITE, 7)
        // SAFETY: revoking an endpoint's derived capabilities unmaps nothing.
        .and_then(|()| unsafe { syscall::cap_revoke(FAULT_EP) })
        .map(|()| syscall::nb_send(DERIVED_EP, Default::default(), [0; 4]));
    t.expect(
        "derived-capability-gone-after-revoke",
        revoked == Ok(Err(Error::EmptySlot)),
        format_args!("{revoked:?}"),
    );
    t.finish()
}

fn setup(instance: u64) -> Result<(), Error> {
    let u = u64::from(child::UNTYPED);
    let vspace = u64::from(child::OWN_VSPACE);
    syscall::retype(u, ObjectType::Endpoint, 0, FAULT_EP, 1)?;
    syscall::retype(u, ObjectType::Thread, 0, PROBE, 1)?;
    syscall::retype(u, ObjectType::Frame4K, 0, STACK_FRAME, 2)?;
    // SAFETY: both addresses are reserved for this purpose in this
    // component; nothing else lives there.
    unsafe {
        syscall::map(vspace, STACK_FRAME, PROBE_STACK, rw())?;
        syscall::map(vspace, SECRET_FRAME, SECRET_BASE + instance * 4096, rw())?;
        core::ptr::write_volatile((SECRET_BASE + instance * 4096) as *mut u64, SECRET);
    }
    syscall::thread_configure(PROBE, child::OWN_CSPACE.into(), vspace, 0, FAULT_EP)?;
    syscall::thread_set_sched_params(PROBE, child::PRIORITY, 0)
}
