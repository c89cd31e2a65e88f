//! ps2: the PS/2 keyboard and mouse driver — the i8042 controller every
//! PC (and QEMU's q35) has — serving one Input session
//! (`rt::session::input`; the GUI multiplexer is meant to be its client).
//!
//! A legacy device like the PIT: its scenario names the controller's
//! ports and the two interrupts, `io_ports = [{ base = 0x60, count = 1 },
//! { base = 0x64, count = 1 }]` (data; status and command) and `irqs =
//! [1, 12]` (keyboard, mouse), which init hands over at
//! `child::io_ports_slot(0..2)` and `child::irq_slot(2, 0..2)`, with a
//! notification bound to its thread. It binds the interrupts to two badged
//! copies of that notification, so one `Recv` returns session requests
//! and interrupts alike.
//!
//! Set-up (bounded polling; the controller answers at once): both ports
//! off, the output buffer drained, the configuration byte with both
//! interrupts on and the scan-code translation on (set 1), both ports on,
//! the mouse set to its defaults with data reporting on, the keyboard
//! scanning. On each interrupt it reads every byte waiting (the status
//! register says whether a byte is the mouse's), decodes it
//! (`ucore::ps2`: scan codes, a US keymap, 3-byte mouse packets) and
//! queues the events for the session (`rt::session::input::serve_one`),
//! signalling its notification once per interrupt (made from the
//! client's donation, so the parent wakes the client with it when this
//! driver stops: the GUI multiplexer then reconnects to the restarted
//! driver, `tests/ps2-kill.toml`). The queue is bounded
//! (256 events): when the client does not fetch, the oldest go, counted
//! in the session's close line.
//!
//! Prints `ps2: i8042 keyboard and mouse (ports 0x60 and 0x64, ISA IRQs 1
//! and 12)` when it serves.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

use rt::abi::caddr::own;
use rt::abi::{CapSlot, Rights};
use rt::interfaces::child;
use rt::println;
use rt::session::input::{self, Input, ServedQueue};
use rt::syscall;
use ucore::ps2::{KeyboardInput, Mouse};

rt::entry!(main);

const DATA: CapSlot = own(child::io_ports_slot(0));
const CONTROL: CapSlot = own(child::io_ports_slot(1));
const KBD_IRQ: CapSlot = own(child::irq_slot(2, 0));
const MOUSE_IRQ: CapSlot = own(child::irq_slot(2, 1));
const NOTIFICATION: CapSlot = own(child::NOTIFICATION);
/// The badged copies the interrupts signal.
const KBD_SIGNAL: u32 = child::irq_slot(2, 2);
const MOUSE_SIGNAL: u32 = KBD_SIGNAL + 1;
/// The provider's two slots for its one session (its notification is
/// made from the client's donation).
const SESSION_SLOT: u32 = MOUSE_SIGNAL + 1;

const KBD_BIT: u64 = 1 << 0;
const MOUSE_BIT: u64 = 1 << 1;

const DATA_PORT: u16 = 0x60;
const STATUS_PORT: u16 = 0x64;
/// Status: a byte waits at the data port.
const OUTPUT_FULL: u32 = 1 << 0;
/// Status: the controller has not taken the last byte written.
const INPUT_FULL: u32 = 1 << 1;
/// Status: the waiting byte is the mouse's.
const AUX_DATA: u32 = 1 << 5;

/// Polls of the status register before a step of the set-up gives up.
const POLLS: u32 = 100_000;

/// Why the set-up failed.
type SetupError = &'static str;

fn status() -> u32 {
    syscall::io_port_read(CONTROL, STATUS_PORT, 1).unwrap_or(0)
}

fn read_data() -> u8 {
    syscall::io_port_read(DATA, DATA_PORT, 1).unwrap_or(0) as u8
}

/// Waits until the controller takes a byte.
fn wait_input_empty() -> Result<(), SetupError> {
    (0..POLLS)
        .find(|_| status() & INPUT_FULL == 0)
        .map(drop)
        .ok_or("the controller takes no bytes")
}

/// Waits for a byte and reads it.
fn wait_read() -> Result<u8, SetupError> {
    (0..POLLS)
        .find(|_| status() & OUTPUT_FULL != 0)
        .map(|_| read_data())
        .ok_or("the controller sends no byte")
}

fn command(byte: u8) -> Result<(), SetupError> {
    wait_input_empty()?;
    // SAFETY: the command port of the i8042, this driver's alone: a
    // controller command changes the controller, nothing else.
    unsafe { syscall::io_port_write(CONTROL, STATUS_PORT, 1, byte.into()) }
        .map_err(|_| "the command port refused the write")
}

fn write_data(byte: u8) -> Result<(), SetupError> {
    wait_input_empty()?;
    // SAFETY: the data port of the i8042, this driver's alone.
    unsafe { syscall::io_port_write(DATA, DATA_PORT, 1, byte.into()) }
        .map_err(|_| "the data port refused the write")
}

/// Sends `byte` to a device (the mouse through `0xD4`) and waits for its
/// acknowledgement (`0xFA`), skipping other bytes a few times.
fn device_command(mouse: bool, byte: u8) -> Result<(), SetupError> {
    if mouse {
        command(0xd4)?;
    }
    write_data(byte)?;
    for _ in 0..8 {
        if wait_read()? == 0xfa {
            return Ok(());
        }
    }
    Err("a device did not acknowledge")
}

/// Sets the controller and both devices up (module doc).
fn setup() -> Result<(), SetupError> {
    command(0xad)?; // first port off
    command(0xa7)?; // second port off
    for _ in 0..64 {
        if status() & OUTPUT_FULL == 0 {
            break;
        }
        read_data();
    }
    command(0x20)?;
    let config = wait_read()?;
    // Both interrupts on, translation on, both clocks on.
    let config = (config | 0x43) & !0x30;
    command(0x60)?;
    write_data(config)?;
    command(0xae)?; // first port on
    command(0xa8)?; // second port on
    device_command(true, 0xf6)?; // mouse: defaults
    device_command(true, 0xf4)?; // mouse: data reporting on
    device_command(false, 0xf4)?; // keyboard: scanning on
    Ok(())
}

/// The driver's state.
struct Driver {
    keyboard: KeyboardInput,
    mouse: Mouse,
}

impl Driver {
    /// An interrupt (bits of the notification word): reads every byte
    /// waiting, queues the events for the open session (none: dropped),
    /// acknowledges the lines, signals the client once.
    fn interrupt(&mut self, bits: u64, mut session: Option<&mut ServedQueue>) {
        for _ in 0..POLLS {
            let s = status();
            if s & OUTPUT_FULL == 0 {
                break;
            }
            let byte = read_data();
            let mut push = |e| {
                if let Some(q) = session.as_deref_mut() {
                    q.push(e);
                }
            };
            if s & AUX_DATA != 0 {
                self.mouse.feed(byte).for_each(&mut push);
            } else if let Some(e) = self.keyboard.feed(byte) {
                push(e);
            }
        }
        for (bit, irq) in [(KBD_BIT, KBD_IRQ), (MOUSE_BIT, MOUSE_IRQ)] {
            if bits & bit != 0 {
                let _ = syscall::irq_ack(irq);
            }
        }
        if let Some(q) = session {
            q.publish();
        }
    }
}

fn main(_: u64) -> i32 {
    let bound = [
        (KBD_SIGNAL, KBD_BIT, KBD_IRQ),
        (MOUSE_SIGNAL, MOUSE_BIT, MOUSE_IRQ),
    ]
    .into_iter()
    .try_for_each(|(slot, bit, irq)| {
        syscall::cap_mint(NOTIFICATION, own(slot), Rights::WRITE, bit)?;
        syscall::irq_bind(irq, own(slot))
    });
    if let Err(e) = bound {
        println!("ps2: cannot bind ISA IRQs 1 and 12: {e}; is `irqs = [1, 12]` in its config?");
        return 1;
    }
    if syscall::io_port_read(CONTROL, STATUS_PORT, 1).is_err() {
        println!("ps2: no i8042 ports; is `io_ports = [{{ base = 0x60, count = 1 }}, {{ base = 0x64, count = 1 }}]` in its config?");
        return 1;
    }
    if let Err(e) = setup() {
        println!("ps2: setting the i8042 up: {e}");
        return 1;
    }
    println!("ps2: i8042 keyboard and mouse (ports 0x60 and 0x64, ISA IRQs 1 and 12)");
    let mut driver = Driver {
        keyboard: KeyboardInput::default(),
        mouse: Mouse::default(),
    };
    input::serve_one::<Input>("ps2", SESSION_SLOT, |bits, session| {
        driver.interrupt(bits, session)
    })
}
