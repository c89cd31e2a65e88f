//! The device capabilities a component's config names (`io_ports`,
//! `irqs`; docs/scenarios.md), at the slots `interfaces::child` gives them: each
//! I/O-port range minted (narrowed) from init's all-ports capability, each
//! ISA IRQ's handler copied (`interfaces::init` says where init holds them).
//! The platform service (`platform = true`) gets instead what
//! `interfaces::child::platform` lists: the device control capability,
//! the I/O ports of the I/O-BAR window, the PCI interrupt lines and all
//! device memory (each block whole, made from init's: [`memory_grants`]).

use alloc::vec::Vec;

use rt::abi::caddr::own;
use rt::abi::object::io_ports_range;
use rt::abi::Rights;
use rt::interfaces::{child, init};
use rt::println;
use rt::spawn::{Grant, MemoryGrant, SpawnError};
use rt::syscall;
use ucore::config::{Component, Device};

/// The grants for `c`. Each is minted once into init's empty slot
/// `scratch` and deleted again first ([`try_grant`]), so that a device init
/// cannot give (no handler for that IRQ on this machine) is named and the
/// component is not started.
pub fn grants(c: &Component<'_>, scratch: u32) -> Result<Vec<Grant>, SpawnError> {
    let mut grants = Vec::new();
    let mut ranges = 0;
    let mut irqs = 0;
    for device in c.devices() {
        let grant = match device {
            Device::IoPorts { first, last } => {
                ranges += 1;
                Grant {
                    src: init::IO_PORTS,
                    dst: child::io_ports_slot(ranges - 1),
                    word: io_ports_range(first, last),
                }
            }
            Device::Irq(irq) => {
                irqs += 1;
                Grant {
                    src: init::isa_irq_slot(irq),
                    dst: child::irq_slot(ranges, irqs - 1),
                    word: 0,
                }
            }
            Device::Platform => {
                grants.extend(platform_grants(c, scratch)?);
                continue;
            }
        };
        required(c, &device, grant, scratch)?;
        grants.push(grant);
    }
    Ok(grants)
}

/// Mints `grant`'s source once into init's empty slot `scratch` and
/// deletes it again: whether init holds what the grant gives.
fn try_grant(grant: Grant, scratch: u32) -> Result<(), rt::abi::Error> {
    let tried = syscall::cap_mint(own(grant.src), own(scratch), Rights::ALL, grant.word);
    // SAFETY: an I/O-port, IRQ or device control capability; nothing is
    // mapped through it.
    let _ = unsafe { syscall::cap_delete(own(scratch)) };
    tried
}

/// [`try_grant`] for a grant the component cannot start without: a
/// refusal names what init lacks.
fn required(
    c: &Component<'_>,
    what: &dyn core::fmt::Debug,
    grant: Grant,
    scratch: u32,
) -> Result<(), SpawnError> {
    try_grant(grant, scratch).map_err(|error| {
        println!(
            "init: {}: cannot give it {what:?}: init holds no such device ({error})",
            c.name
        );
        SpawnError::Syscall {
            call: "CapMint",
            error,
        }
    })
}

/// The platform service's capabilities but its memory: device control
/// and the I/O-BAR window's ports (required), and the PCI interrupt lines
/// root gave init (lines the machine lacks are left out: the service sees
/// empty slots).
fn platform_grants(c: &Component<'_>, scratch: u32) -> Result<Vec<Grant>, SpawnError> {
    use child::platform;
    let mut grants = alloc::vec![
        Grant {
            src: init::DEVICE_CONTROL,
            dst: platform::CONTROL,
            word: 0,
        },
        Grant {
            src: init::IO_PORTS,
            dst: platform::IO_PORTS,
            word: io_ports_range(platform::IO_WINDOW_FIRST, platform::IO_WINDOW_LAST),
        },
    ];
    for &g in &grants {
        required(c, &Device::Platform, g, scratch)?;
    }
    grants.extend(
        (0..platform::PCI_IRQS)
            .map(|i| Grant {
                src: init::PCI_IRQ_FIRST + i,
                dst: platform::PCI_IRQ_FIRST + i,
                word: 0,
            })
            .filter(|&g| try_grant(g, scratch).is_ok()),
    );
    Ok(grants)
}

/// The device memory the platform service gets: every block init holds,
/// whole (`interfaces::init::DEVICE_MEMORY_FIRST`); none for others.
pub fn memory_grants(c: &Component<'_>) -> Vec<MemoryGrant> {
    if !c.devices().any(|d| d == Device::Platform) {
        return Vec::new();
    }
    let control = own(init::DEVICE_CONTROL);
    (0..init::DEVICE_MEMORY_SLOTS)
        .map_while(|i| {
            let src = init::DEVICE_MEMORY_FIRST + i;
            let info = syscall::phys_address(control, own(src)).ok()?;
            Some(MemoryGrant {
                src,
                dst: child::platform::DEVICE_MEMORY_FIRST + i,
                bits: info.size_bits,
            })
        })
        .collect()
}

/// Takes back what the platform service `c` made from init's device
/// memory and device control capability (its MSI handlers, its mappings
/// of device registers, the frames it lent drivers), so that a restarted
/// one finds every block whole again.
pub fn revoke_platform(c: &Component<'_>) {
    if !c.devices().any(|d| d == Device::Platform) {
        return;
    }
    let slots = (0..init::DEVICE_MEMORY_SLOTS).map(|i| init::DEVICE_MEMORY_FIRST + i);
    for slot in slots.chain([init::DEVICE_CONTROL]) {
        // SAFETY: device memory and the control capability: init maps
        // none of it itself.
        match unsafe { syscall::cap_revoke(own(slot)) } {
            Ok(()) | Err(rt::abi::Error::EmptySlot) => {}
            Err(e) => println!(
                "init: cannot take back the device memory of {}: {e}",
                c.name
            ),
        }
    }
}
