//! The virtual machine monitor's pure logic (docs/virtualization.md, "The
//! VMM"): what the `vmm` component needs to boot an unmodified Linux on a
//! virtual CPU, without the system calls, so that all of it is tested on
//! the host.
//!
//! - [`linux`]: the x86 boot protocol — the bzImage's setup header,
//!   `boot_params` with the e820 map and the command line, the page
//!   tables and GDT of the 64-bit entry, and the entry state;
//! - [`cpuid`]: what the guest's `cpuid` answers (the host's, with what
//!   the VMM does not give taken out and the hypervisor leaves added);
//! - the devices: [`uart`] (16550), [`pic`] (8259 pair), [`pit`] (8254),
//!   [`rtc`] (CMOS clock), [`lapic`] (x2APIC with its timer and TSC
//!   deadline), [`ioapic`] (the I/O APIC the MADT names), [`kvmclock`]
//!   (the paravirtual clock Linux reads the TSC rate from), the virtio
//!   devices on the legacy PCI transport ([`virtio`]): [`virtio_blk`],
//!   [`virtio_net`], [`virtio_console`];
//! - [`console`]: a console's bytes as lines of text for the log and a
//!   terminal.
//!
//! Every device takes untrusted guest input: any value at any port or
//! register is answered (unknown ones with a safe default), never a
//! panic.
#![no_std]

extern crate alloc;

pub mod acpi;
pub mod console;
pub mod cpuid;
pub mod decode;
pub mod ioapic;
pub mod kvmclock;
pub mod lapic;
pub mod linux;
pub mod pci;
pub mod pic;
pub mod pit;
pub mod rtc;
pub mod uart;
pub mod virtio;
pub mod virtio_blk;
pub mod virtio_console;
pub mod virtio_net;
