//! power: the ACPI power button. When it is pressed — QEMU's
//! `system_powerdown`, which `cargo xtask run` sends on Ctrl-C and a
//! scenario test's `[[monitor]]` can send — it asks init for an orderly
//! power-off on its `Power` session (`rt::session::power`): every
//! application stopped, every service after its clients, every file
//! system synced by its clients' closes (docs/architecture.md, "Orderly
//! power-off").
//!
//! A legacy device like the PIT: its scenario names the ACPI PM1a event
//! block's I/O ports and the SCI's interrupt, `io_ports = [{ base =
//! 0x600, count = 4 }]` and `irqs = [9]` — where QEMU's q35 firmware puts
//! them (the FADT's `PM1a_EVT_BLK` and `SCI_INT`). It enables the
//! power-button event (`PWRBTN_EN` in `PM1_EN`, base + 2), so a press
//! sets `PWRBTN_STS` in `PM1_STS` (base) and raises the SCI, a
//! level-triggered line; it clears the status (write 1) before it
//! acknowledges the interrupt, so the line is low again when unmasked.
//! Prints `power: ACPI power button at port 0x600, SCI on ISA IRQ 9` when
//! ready and `power: power button pressed: asking init for an orderly
//! power-off` on a press. Its scenario routes `Power` to `parent` (and
//! lists it in `parent_provides`): the config decides who may switch the
//! system off.
//!
//! It never finishes on its own, so a scenario with it runs until it is
//! powered off (or its `--timeout`).
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

use rt::abi::caddr::own;
use rt::abi::CapSlot;
use rt::interfaces::child;
use rt::println;
use rt::session::power::Power;
use rt::session::{self, Session};
use rt::syscall;

rt::entry!(main);

const PORTS: CapSlot = own(child::io_ports_slot(0));
const SCI: CapSlot = own(child::irq_slot(1, 0));
const SCI_NOTIFICATION: CapSlot = own(child::NOTIFICATION);
/// After the device capabilities (one port range, one IRQ).
const POWER_SLOT: u32 = child::irq_slot(1, 1);

/// The PM1a event block on QEMU's q35 (the FADT's `PM1a_EVT_BLK`).
const PM1_STS: u16 = 0x600;
const PM1_EN: u16 = PM1_STS + 2;
/// The power button's bit in `PM1_STS` and `PM1_EN`.
const PWRBTN: u32 = 1 << 8;

fn main(_: u64) -> i32 {
    let power = match session::open::<Power>(POWER_SLOT) {
        Ok(s) => s,
        Err(e) => {
            println!("power: Power session: {e}; is `Power = \"parent\"` routed to it?");
            return 1;
        }
    };
    if let Err(e) = syscall::irq_bind(SCI, SCI_NOTIFICATION) {
        println!("power: cannot bind the SCI (ISA IRQ 9): {e}; is `irqs = [9]` in its config?");
        return 1;
    }
    let enabled = syscall::io_port_read(PORTS, PM1_EN, 2).and_then(|en| {
        // SAFETY: the ports are the PM1a event block's (the capability
        // holds those alone); writing 1 to PWRBTN_STS clears that status
        // bit only, and PM1_EN gains the power button's enable bit.
        unsafe {
            syscall::io_port_write(PORTS, PM1_STS, 2, PWRBTN)?;
            syscall::io_port_write(PORTS, PM1_EN, 2, en | PWRBTN)
        }
    });
    match enabled.and_then(|()| syscall::io_port_read(PORTS, PM1_EN, 2)) {
        Ok(en) if en & PWRBTN != 0 && en != 0xffff => {}
        Ok(en) => {
            println!("power: PM1_EN at port {PM1_EN:#x} reads {en:#06x}: no ACPI PM block there");
            return 1;
        }
        Err(e) => {
            println!("power: the PM1a event block at port {PM1_STS:#x}: {e}; is `io_ports = [{{ base = 0x600, count = 4 }}]` in its config?");
            return 1;
        }
    }
    println!("power: ACPI power button at port {PM1_STS:#x}, SCI on ISA IRQ 9");
    loop {
        if let Err(e) = syscall::wait(SCI_NOTIFICATION) {
            println!("power: waiting for the SCI: {e}");
            return 1;
        }
        let status = syscall::io_port_read(PORTS, PM1_STS, 2).unwrap_or(0);
        if status & PWRBTN != 0 {
            // SAFETY: as above: clears the power button's status bit.
            let _ = unsafe { syscall::io_port_write(PORTS, PM1_STS, 2, PWRBTN) };
            pressed(&power);
        }
        if let Err(e) = syscall::irq_ack(SCI) {
            println!("power: acknowledging the SCI: {e}");
        }
    }
}

/// The button was pressed: the power-off asked for.
fn pressed(power: &Session<Power>) {
    println!("power: power button pressed: asking init for an orderly power-off");
    if let Err(e) = power.off() {
        println!("power: init refused the power-off: {e}");
    }
}
