//! The device capabilities a component's config names (`io_ports`,
//! `irqs`; docs/scenarios.md), at the slots `interfaces::child` gives them: each
//! I/O-port range minted (narrowed) from init's all-ports capability, each
//! ISA IRQ's handler copied (`interfaces::init` says where init holds them).

use alloc::vec::Vec;

use rt::abi::caddr::own;
use rt::abi::object::io_ports_range;
use rt::abi::Rights;
use rt::interfaces::{child, init};
use rt::println;
use rt::spawn::{Grant, SpawnError};
use rt::syscall;
use ucore::config::{Component, Device};

/// The grants for `c`. Each is minted once into init's empty slot
/// `scratch` and deleted again first, so that a device init cannot give
/// (no handler for that IRQ on this machine) is named and the component is
/// not started.
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
        };
        let tried = syscall::cap_mint(own(grant.src), own(scratch), Rights::ALL, grant.word);
        // SAFETY: an I/O-port or IRQ capability; nothing is mapped through it.
        let _ = unsafe { syscall::cap_delete(own(scratch)) };
        if let Err(error) = tried {
            println!(
                "init: {}: cannot give it {device:?}: init holds no such device ({error})",
                c.name
            );
            return Err(SpawnError::Syscall {
                call: "CapMint",
                error,
            });
        }
        grants.push(grant);
    }
    Ok(grants)
}
