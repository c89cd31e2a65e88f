//! The machine: one virtual CPU, its devices and the run loop. Every exit
//! is handled here — port I/O to the device models, MSRs to the local
//! APIC, kvmclock and the few CPU MSRs Linux touches, CPUID filtered by
//! `vmm::cpuid`, `mov cr4` decoded (no decode assists under TCG), HLT by
//! sleeping until the next timer — and before each run the highest
//! interrupt the guest can take is injected, or the interrupt-window exit
//! asked for.
//!
//! The guest is untrusted: an unknown port reads all ones and ignores
//! writes, an unknown MSR is a #GP (as on hardware), each logged once; an
//! access to guest-physical memory that is not RAM, a triple fault or a
//! state the CPU refuses stops this VM alone, with a line that says why.

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;

use rt::abi::vcpu::{event, exit, ioio, load, segment as seg, virq, word};
use rt::abi::CapSlot;
use rt::println;
use rt::session::timer::Timer;
use rt::syscall;
use rt::vcpu::Vcpu;
use vmm::acpi::{Pm, PmAction};
use vmm::console::Lines;
use vmm::cpuid::{self, Regs};
use vmm::ioapic::{self, IoApic};
use vmm::kvmclock;
use vmm::lapic::{Effect, GeneralProtection, Lapic, Now, TimerDue};
use vmm::linux::{self, Plan};
use vmm::pci::{self, Bus};
use vmm::pic::Pics;
use vmm::pit::Pit;
use vmm::rtc::Rtc;
use vmm::uart::Uart;
use vmm::virtio::GuestMemory;
use vmm::virtio_blk::{self, Blk, IoError};
use vmm::virtio_console::{self, Console};
use vmm::virtio_net::{self, Net, Received};

use rt::session::block::BlockClient;
use rt::session::nic::{Nic, NicClient};
use rt::session::Session;
use rt::stream::Taken;

use crate::memory::Ram;

/// The PCI device number and ISA interrupt of the disk (one of
/// `vmm::acpi::PCI_IRQS`, like every PCI device's); where its I/O BAR
/// starts (Linux may move it).
const BLK_IRQ: u8 = 10;
const BLK_BAR: u16 = 0xc000;
/// The NIC's interrupt and I/O BAR.
const NET_IRQ: u8 = 11;
const NET_BAR: u16 = 0xc040;
/// The console's (virtio-console, the guest's `/dev/hvc0`) interrupt
/// and I/O BAR.
const CONSOLE_IRQ: u8 = 5;
const CONSOLE_BAR: u16 = 0xc080;
/// The bits the forwarding threads set on the VMM's notification (bound
/// to its thread) when the Timer's or the Nic's was signalled (main.rs,
/// `forward`).
pub const TIMER_BIT: u64 = 1 << 0;
pub const NIC_BIT: u64 = 1 << 1;
/// The console's input notification (the terminal's typed lines).
pub const INPUT_BIT: u64 = 1 << 2;

/// The sessions behind the guest's devices, and what wakes the VMM.
pub struct Attached {
    /// `/dev/vda`'s.
    pub disk: Option<Disk>,
    /// `eth0`'s.
    pub nic: Option<NetDevice>,
    /// The component's console session, if its terminal gives it the
    /// typed input: what the guest's console reads.
    pub input: Option<Session<rt::session::log::Log>>,
    /// The VMM's own notification, bound to its thread, which the
    /// forwarders signal.
    pub wake: CapSlot,
}

/// The guest's NIC: the Nic session's streams behind virtio-net.
pub struct NetDevice {
    _session: Session<Nic>,
    client: NicClient,
    mac: [u8; 6],
    /// A received frame the guest had no buffer for yet.
    pending: Option<Taken>,
    /// Frames the stream had no room for (dropped).
    tx_full: u64,
}

impl NetDevice {
    pub fn new(session: Session<Nic>, client: NicClient, mac: [u8; 6]) -> NetDevice {
        NetDevice {
            _session: session,
            client,
            mac,
            pending: None,
            tx_full: 0,
        }
    }
}

impl GuestMemory for Ram {
    fn read(&self, gpa: u64, buf: &mut [u8]) -> bool {
        match self.slice(gpa, buf.len()) {
            Some(s) => {
                buf.copy_from_slice(s);
                true
            }
            None => false,
        }
    }

    fn write(&mut self, gpa: u64, data: &[u8]) -> bool {
        match self.slice_mut(gpa, data.len()) {
            Some(s) => {
                s.copy_from_slice(data);
                true
            }
            None => false,
        }
    }
}

/// The guest's disk: a Block session as virtio-blk's backend, requests
/// split to what one packet may carry.
pub struct Disk {
    client: BlockClient,
    /// 512-byte sectors per block of the device.
    per_block: u64,
    sectors: u64,
    writable: bool,
    max_bytes: usize,
}

impl Disk {
    pub fn new(client: BlockClient) -> Result<Disk, String> {
        let info = client.info();
        if info.block_size < 512 || !info.block_size.is_multiple_of(512) {
            return Err(alloc::format!(
                "blocks of {} bytes: a multiple of 512 needed",
                info.block_size
            ));
        }
        let per_block = u64::from(info.block_size / 512);
        Ok(Disk {
            sectors: info.block_count * per_block,
            writable: info.writable,
            max_bytes: (info.max_bytes as usize / info.block_size as usize
                * info.block_size as usize)
                .max(info.block_size as usize),
            per_block,
            client,
        })
    }

    pub fn describe(&self) -> String {
        alloc::format!(
            "{} sectors ({} MiB), {}",
            self.sectors,
            self.sectors / 2048,
            if self.writable {
                "writable"
            } else {
                "read-only"
            }
        )
    }

    /// The device's block of `sector`, if the request starts on one and
    /// covers whole blocks.
    fn block(&self, sector: u64, len: usize) -> Result<u32, IoError> {
        let bytes = 512 * self.per_block as usize;
        if !sector.is_multiple_of(self.per_block) || !len.is_multiple_of(bytes) {
            return Err(IoError);
        }
        u32::try_from(sector / self.per_block).map_err(|_| IoError)
    }
}

impl virtio_blk::Backend for Disk {
    fn sectors(&self) -> u64 {
        self.sectors
    }

    fn writable(&self) -> bool {
        self.writable
    }

    fn read(&mut self, sector: u64, buf: &mut [u8]) -> Result<(), IoError> {
        let bs = 512 * self.per_block as usize;
        for (i, chunk) in buf.chunks_mut(self.max_bytes).enumerate() {
            let first = self.block(sector, chunk.len())? + (i * self.max_bytes / bs) as u32;
            self.client.read(first, chunk).map_err(|_| IoError)?;
        }
        Ok(())
    }

    fn write(&mut self, sector: u64, data: &[u8]) -> Result<(), IoError> {
        let bs = 512 * self.per_block as usize;
        for (i, chunk) in data.chunks(self.max_bytes).enumerate() {
            let first = self.block(sector, chunk.len())? + (i * self.max_bytes / bs) as u32;
            self.client.write(first, chunk).map_err(|_| IoError)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.client.sync().map_err(|_| IoError)
    }
}

const COM1: u16 = 0x3f8;
/// COM2: the VMM's status channel. A line `status N` the guest writes
/// to its second serial port (`/dev/ttyS1`) is its verdict (0: success),
/// which the VMM reports and exits with at power-off — QEMU's
/// `isa-debug-exit` idea, on a device every Linux has a driver for. The
/// xtask-built initramfs writes the number of failed commands there.
const COM2: u16 = 0x2f8;
/// The exit counters, for benchmarks in the guest (`ioperm`, then 32-bit
/// `in`s): 0x510 the exits the VMM handled so far (the read's own
/// included), 0x514 the runs that host interrupts ended (the guest lost
/// its CPU to the host meanwhile), both the low 32 bits. Reads only.
pub const EXIT_COUNTER: u16 = 0x510;
/// The PC's reset control register.
const RESET_CONTROL: u16 = 0xcf9;
/// The VMM's exit code when the guest reset itself.
pub const RESET_EXIT: i32 = 7;
const COM2_IRQ: u8 = 3;
const COM1_IRQ: u8 = 4;
const MSR_EFER: u32 = 0xc000_0080;
const MSR_PAT: u32 = 0x277;
const MSR_TSC: u32 = 0x10;
const RFLAGS_IF: u64 = 1 << 9;
/// A virtio device's status bit: its driver is ready.
const VIRTIO_DRIVER_OK: u8 = 4;
/// EFER bits a guest may write: SCE, LME, NXE, FFXSR (LMA follows CR0.PG).
const EFER_WRITABLE: u64 = 1 | 1 << 8 | 1 << 11 | 1 << 14;
const EFER_LMA: u64 = 1 << 10;
/// The most distinct unknown accesses logged.
const MAX_LOGGED: usize = 24;

/// Why the VM stopped.
enum Stop {
    /// The guest powered off or halted for good: the exit code.
    Done(i32),
}

/// The state block word of general register `n` in x86 encoding order.
fn gpr_word(n: u8) -> usize {
    [
        word::RAX,
        word::RCX,
        word::RDX,
        word::RBX,
        word::RSP,
        word::RBP,
        word::RSI,
        word::RDI,
        word::R8,
        word::R9,
        word::R10,
        word::R11,
        word::R12,
        word::R13,
        word::R14,
        word::R15,
    ][usize::from(n & 15)]
}

fn host_cpuid(leaf: u32, subleaf: u32) -> Regs {
    #[allow(unused_unsafe)]
    // SAFETY: `cpuid` exists on every x86-64 CPU and only reads.
    let r = unsafe { core::arch::x86_64::__cpuid_count(leaf, subleaf) };
    Regs {
        eax: r.eax,
        ebx: r.ebx,
        ecx: r.ecx,
        edx: r.edx,
    }
}

pub struct Machine<'t> {
    name: String,
    ram: Ram,
    timer: &'t Timer,
    vcpu: Vcpu,
    tsc_hz: u64,
    tsc0: u64,
    uart: Uart,
    status_uart: Uart,
    /// The status line being collected from COM2.
    status_line: Vec<u8>,
    pics: Pics,
    pit: Pit,
    rtc: Rtc,
    lapic: Lapic,
    ioapic: IoApic,
    pm: Pm,
    /// The guest entered S5 (ACPI soft off).
    powered_off: bool,
    /// The guest asked for a reset (a reboot, or a panic's): the keyboard
    /// controller's pulse or the PCI reset register.
    reset: Option<&'static str>,
    pat: u64,
    kvmclock: u64,
    /// The serial console's line being collected.
    serial_lines: Lines,
    /// The virtio console (`/dev/hvc0`): its device model, its line being
    /// collected, its PCI device number.
    hvc: (Console, Lines, u8),
    /// The terminal's typed input, if the console session gives it.
    input: Option<Session<rt::session::log::Log>>,
    /// Output bytes taken from the guest, reused.
    out: Vec<u8>,
    /// The terminal signalled typed input not read yet.
    typed: bool,
    /// Whether the interrupt-window exit is asked for.
    window: bool,
    /// What was logged once (kind, number).
    logged: BTreeSet<(u8, u64)>,
    power_down: bool,
    exits: u64,
    /// Wall-clock seconds when the VMM started.
    boot_unix: u64,
    /// The status the guest wrote to COM2, if it did.
    status: Option<u8>,
    pci: Bus,
    /// The disk: its device model, its backend, its PCI device number.
    blk: Option<(Blk, Disk, u8)>,
    /// The NIC: its device model, the session, its PCI device number.
    net: Option<(Net, NetDevice, u8)>,
    /// The VMM's own notification (bound to its thread): what it sleeps
    /// on at `HLT`.
    wake: CapSlot,
}

/// A legacy (transitional) virtio device's PCI function: Red Hat's
/// vendor ID (the subsystem vendor too), `device` and `subsystem` IDs,
/// `class`, the ISA interrupt line `irq` and I/O BAR 0 of (size, first
/// port).
fn legacy_virtio(
    device: u16,
    subsystem: u16,
    class: [u8; 3],
    irq: u8,
    (bar_size, bar): (u32, u16),
) -> pci::Function {
    pci::Function::new(
        vmm::virtio::VENDOR,
        device,
        class,
        (vmm::virtio::VENDOR, subsystem),
        Some(irq),
    )
    .with_io_bar(0, bar_size, bar)
}

/// The TSC's rate from the timer, which measures it over its first
/// 100 ms (it answers 0 until then): asked every 20 ms for 2 s at most.
pub fn tsc_rate(timer: &Timer) -> Result<u64, String> {
    for _ in 0..100 {
        let (_, hz) = timer.clock().map_err(|e| alloc::format!("Timer: {e}"))?;
        if hz != 0 {
            return Ok(hz);
        }
        timer
            .sleep(20_000)
            .map_err(|e| alloc::format!("Timer: {e}"))?;
    }
    Err("the timer knows no TSC rate after 2 s".into())
}

impl<'t> Machine<'t> {
    pub fn new(
        name: String,
        ram: Ram,
        timer: &'t Timer,
        tsc_hz: u64,
        (vcpu, gspace): (CapSlot, CapSlot),
        boot_unix: u64,
        attached: Attached,
    ) -> Machine<'t> {
        let Attached {
            disk,
            nic,
            input,
            wake,
        } = attached;
        let mut bus = Bus::new();
        let blk = disk.map(|disk| {
            use vmm::virtio_blk::Backend;
            let slot = bus.add(legacy_virtio(
                virtio_blk::DEVICE,
                virtio_blk::SUBSYSTEM,
                [0x01, 0x00, 0x00],
                BLK_IRQ,
                (virtio_blk::BAR_SIZE, BLK_BAR),
            ));
            (Blk::new(disk.sectors(), disk.writable(), &name), disk, slot)
        });
        let net = nic.map(|nic| {
            let slot = bus.add(legacy_virtio(
                virtio_net::DEVICE,
                virtio_net::SUBSYSTEM,
                [0x02, 0x00, 0x00],
                NET_IRQ,
                (virtio_net::BAR_SIZE, NET_BAR),
            ));
            (Net::new(nic.mac), nic, slot)
        });
        let hvc_slot = bus.add(legacy_virtio(
            virtio_console::DEVICE,
            virtio_console::SUBSYSTEM,
            [0x07, 0x80, 0x00],
            CONSOLE_IRQ,
            (virtio_console::BAR_SIZE, CONSOLE_BAR),
        ));
        Machine {
            name,
            ram,
            timer,
            vcpu: Vcpu::new(vcpu, gspace),
            tsc_hz,
            tsc0: syscall::rdtsc(),
            uart: Uart::new(),
            status_uart: Uart::new(),
            status_line: Vec::new(),
            pics: Pics::new(),
            pit: Pit::new(),
            rtc: Rtc::new(),
            lapic: Lapic::new(0),
            ioapic: IoApic::new(vmm::acpi::IOAPIC_ID),
            pm: Pm::default(),
            powered_off: false,
            reset: None,
            pat: 0x0007_0406_0007_0406,
            kvmclock: 0,
            serial_lines: Lines::new(),
            hvc: (Console::new(), Lines::new(), hvc_slot),
            typed: input.is_some(),
            input,
            out: Vec::new(),
            window: false,
            logged: BTreeSet::new(),
            power_down: false,
            exits: 0,
            boot_unix,
            status: None,
            pci: bus,
            blk,
            net,
            wake,
        }
    }

    /// Sets the 64-bit entry state of `plan`.
    pub fn enter(&mut self, plan: &Plan) {
        for (w, v) in linux::entry_state(plan) {
            self.vcpu.set(w, v);
        }
    }

    fn now(&self) -> Now {
        let tsc = syscall::rdtsc();
        let ns = (u128::from(tsc.saturating_sub(self.tsc0)) * 1_000_000_000
            / u128::from(self.tsc_hz)) as u64;
        Now { ns, tsc }
    }

    /// Wall-clock seconds for the CMOS clock: the Rtc session's time at
    /// the start plus the VMM's uptime.
    fn unix(&self) -> u64 {
        self.boot_unix + self.now().ns / 1_000_000_000
    }

    /// Whether `(kind, what)` is new and should be logged: each once,
    /// and at most [`MAX_LOGGED`] of them (Linux probes dozens of absent
    /// ports at boot; the log says when it stops listing them).
    fn once(&mut self, kind: u8, what: u64) -> bool {
        if self.logged.len() >= MAX_LOGGED {
            if self.logged.len() == MAX_LOGGED {
                self.logged.insert((u8::MAX, 0));
                println!(
                    "vmm: {}: further unknown ports and MSRs are not logged",
                    self.name
                );
            }
            return false;
        }
        self.logged.insert((kind, what))
    }

    /// Runs the guest until it stops; the exit code.
    pub fn run(&mut self) -> i32 {
        let mut flags = load::REGISTERS | load::CONTROL | load::SEGMENTS;
        loop {
            self.update_devices();
            flags |= self.interrupts();
            let e = match self.vcpu.run_to_host_event(flags) {
                Ok(e) => e,
                Err(err) => {
                    println!("vmm: {}: VcpuRun refused: {err:?}", self.name);
                    return 1;
                }
            };
            // Host events are counted by `rt::vcpu` (`interrupted`), the
            // guest's exits here.
            if !matches!(e.code, exit::INTR | exit::NMI | exit::SMI) {
                self.exits += 1;
            }
            let handled = self.handle(e.code, e.info1, e.info2);
            let handled = if self.powered_off {
                self.flush_console(true);
                println!("vmm: {}: the guest powered off (ACPI S5)", self.name);
                Err(Stop::Done(self.status.map_or(0, i32::from)))
            } else if let Some(how) = self.reset {
                // No reset in place: the VMM ends, and init starts it
                // again if the scenario's restart policy says so — a
                // fresh machine, as a reset gives.
                self.flush_console(true);
                println!(
                    "vmm: {}: the guest asked for a reset ({how}): VM stopped (init restarts it by the scenario's policy)",
                    self.name
                );
                Err(Stop::Done(RESET_EXIT))
            } else {
                handled
            };
            match handled {
                Ok(f) => flags = f,
                Err(Stop::Done(code)) => {
                    self.flush_console(true);
                    println!(
                        "vmm: {}: VM stopped after {} exits ({} host interrupts)",
                        self.name, self.exits, self.vcpu.interrupted
                    );
                    if let Some((net, dev, _)) = &self.net {
                        let s = net.stats;
                        println!(
                            "vmm: {}: eth0: {} frames sent, {} received, {} dropped (tx {}, rx {}, stream full {})",
                            self.name,
                            s.sent,
                            s.received,
                            s.dropped_tx + s.dropped_rx + dev.tx_full,
                            s.dropped_tx,
                            s.dropped_rx,
                            dev.tx_full
                        );
                    }
                    if let Some((blk, _, _)) = &self.blk {
                        let s = blk.stats;
                        println!(
                            "vmm: {}: disk: {} reads ({} KiB), {} writes ({} KiB), {} flushes, {} errors",
                            self.name,
                            s.reads,
                            s.bytes_read / 1024,
                            s.writes,
                            s.bytes_written / 1024,
                            s.flushes,
                            s.errors
                        );
                    }
                    return code;
                }
            }
            self.flush_console(false);
        }
    }

    /// Notes what the bits of the VMM's notification say (the timer's and
    /// the NIC's are looked at on every pass anyway).
    fn woken(&mut self, bits: u64) {
        if bits & INPUT_BIT != 0 {
            self.typed = true;
        }
    }

    /// Takes the lines typed into the terminal: to `/dev/hvc0` once the
    /// guest's virtio-console driver runs, else to the serial console.
    fn take_typed(&mut self) {
        if !core::mem::take(&mut self.typed) {
            return;
        }
        let Some(session) = &self.input else {
            return;
        };
        let mut bytes = Vec::new();
        while session.read(&mut bytes).is_ok_and(|n| n > 0) && bytes.len() < 4096 {}
        let (hvc, _, _) = &mut self.hvc;
        if hvc.transport.status & VIRTIO_DRIVER_OK != 0 {
            hvc.type_in(&bytes);
            hvc.deliver(&mut self.ram);
        } else {
            self.uart.receive(&bytes);
        }
    }

    fn update_devices(&mut self) {
        self.take_typed();
        let now = self.now();
        if self.pit.irq0_due(now.ns) {
            self.pics.set_irq(0, true);
            self.pics.set_irq(0, false);
            self.ioapic.set_irq(vmm::acpi::PIT_GSI, true);
            self.ioapic.set_irq(vmm::acpi::PIT_GSI, false);
        }
        self.receive_frames();
        self.device_lines();
        // The I/O APIC's requests (the lines', and those an unmask or an
        // EOI since the last run made) go to the local APIC.
        while let Some(d) = self.ioapic.take() {
            if d.level {
                self.lapic.raise_level(d.vector);
            } else {
                self.lapic.raise(d.vector);
            }
        }
        self.lapic.tick(now);
    }

    /// Puts the devices' interrupt lines on the 8259s and the I/O APIC as
    /// they are now. After every port access too, not only before a run:
    /// a line the guest lowered (reading the virtio ISR) and a device
    /// raised again (a frame received) before the next look would be high
    /// twice in a row — no edge, and an edge-triggered line would never
    /// interrupt again (the ISR stays set until the guest reads it).
    fn device_lines(&mut self) {
        self.isa_irq(COM1_IRQ, self.uart.irq());
        self.isa_irq(COM2_IRQ, self.status_uart.irq());
        // The SCI is never raised: its active-low wire stays high.
        self.ioapic.set_irq(vmm::acpi::SCI_IRQ, true);
        if let Some((blk, _, slot)) = &self.blk {
            let line = self.pci.function(*slot).map_or(BLK_IRQ, |f| f.irq());
            let asserted = blk.irq();
            self.pci_irq(line, asserted);
        }
        if let Some((net, _, slot)) = &self.net {
            let line = self.pci.function(*slot).map_or(NET_IRQ, |f| f.irq());
            let asserted = net.irq();
            self.pci_irq(line, asserted);
        }
        let (hvc, _, slot) = &self.hvc;
        let line = self.pci.function(*slot).map_or(CONSOLE_IRQ, |f| f.irq());
        let asserted = hvc.irq();
        self.pci_irq(line, asserted);
    }

    /// An ISA line (edge, active high) to the 8259s and the I/O APIC pin
    /// of the same number (no override in the MADT moves it).
    fn isa_irq(&mut self, irq: u8, high: bool) {
        self.pics.set_irq(irq, high);
        self.ioapic.set_irq(irq, high);
    }

    /// A PCI device's INTx on ISA IRQ `line` (its Interrupt Line
    /// register): to the 8259s as a level, to the I/O APIC as the wire,
    /// which is active low — as Linux programs the pin when `line` is one
    /// of `vmm::acpi::PCI_IRQS`, which the MADT overrides so.
    fn pci_irq(&mut self, line: u8, asserted: bool) {
        if line < 16 {
            self.pics.set_irq(line, asserted);
            self.ioapic.set_irq(line, !asserted);
        }
    }

    fn interrupt_pending(&self) -> bool {
        self.lapic.pending().is_some()
            || (self.lapic.passes_extint() && self.pics.pending().is_some())
    }

    /// Injects the interrupt the guest can take now, or asks for the
    /// window exit; the load flags that needs.
    fn interrupts(&mut self) -> u64 {
        // An event the last exit interrupted is injected again by the
        // kernel: nothing else this time.
        if self.vcpu.get(word::EVENT) & event::VALID != 0 {
            return 0;
        }
        let mut flags = 0;
        if !self.interrupt_pending() {
            if self.window {
                self.window = false;
                self.vcpu.set(word::VIRQ, 0);
                flags |= load::VIRQ;
            }
            return flags;
        }
        let open = self.vcpu.get(word::RFLAGS) & RFLAGS_IF != 0
            && self.vcpu.get(word::INTERRUPT_STATE) & 1 == 0;
        if open {
            let vector = match self.lapic.pending() {
                Some(v) => {
                    self.lapic.accept(v);
                    Some(v)
                }
                None => self.pics.acknowledge(),
            };
            if let Some(v) = vector {
                self.vcpu
                    .set(word::EVENT, event::new(v, event::TYPE_INTR, None));
                flags |= load::EVENT;
            }
            if self.window {
                self.window = false;
                self.vcpu.set(word::VIRQ, 0);
                flags |= load::VIRQ;
            }
        } else if !self.window {
            self.window = true;
            self.vcpu.set(
                word::VIRQ,
                virq::PENDING | virq::WINDOW_EXIT | 0xf << virq::PRIORITY_SHIFT | 0x20,
            );
            flags |= load::VIRQ;
        }
        flags
    }

    fn inject_exception(&mut self, vector: u8, error: Option<u32>) -> u64 {
        self.vcpu.set(
            word::EVENT,
            event::new(vector, event::TYPE_EXCEPTION, error),
        );
        load::EVENT
    }

    fn advance(&mut self, len: u64) -> u64 {
        let rip = self.vcpu.get(word::RIP);
        self.vcpu.set(word::RIP, rip.wrapping_add(len));
        load::REGISTERS
    }

    fn handle(&mut self, code: u64, info1: u64, info2: u64) -> Result<u64, Stop> {
        match code {
            exit::IOIO => Ok(self.port_io(info1, info2)),
            exit::MSR => Ok(self.msr(info1 == 1)),
            exit::CPUID => {
                let leaf = self.vcpu.get(word::RAX) as u32;
                let sub = self.vcpu.get(word::RCX) as u32;
                let r = cpuid::guest(leaf, sub, 0, host_cpuid);
                self.vcpu.set(word::RAX, r.eax.into());
                self.vcpu.set(word::RBX, r.ebx.into());
                self.vcpu.set(word::RCX, r.ecx.into());
                self.vcpu.set(word::RDX, r.edx.into());
                Ok(self.advance(2))
            }
            exit::HLT => {
                let flags = self.advance(1);
                if self.vcpu.get(word::RFLAGS) & RFLAGS_IF == 0 && !self.interrupt_pending() {
                    let code = if self.power_down { 0 } else { 2 };
                    println!(
                        "vmm: {}: the guest halted with interrupts off{}",
                        self.name,
                        if self.power_down {
                            " after powering down"
                        } else {
                            ""
                        }
                    );
                    return Err(Stop::Done(code));
                }
                self.idle();
                Ok(flags)
            }
            exit::VINTR => Ok(0),
            // A host interrupt ended the run: nothing for the guest, but
            // time passed — the loop looks at the timers before the next
            // run (a guest that never exits still gets its ticks).
            exit::INTR | exit::NMI | exit::SMI => Ok(0),
            c if c == exit::CR_WRITE + 4 => self.mov_to_cr(),
            c if (exit::DR_READ..exit::DR_WRITE + 16).contains(&c) => self.mov_dr(c),
            exit::WBINVD | exit::INVD => Ok(self.advance(2)),
            exit::XSETBV
            | exit::VMMCALL
            | exit::MONITOR
            | exit::MWAIT
            | exit::MWAIT_CONDITIONAL
            | exit::VMRUN
            | exit::VMLOAD
            | exit::VMSAVE
            | exit::STGI
            | exit::CLGI
            | exit::SKINIT
            | exit::INVLPGA => {
                if self.once(1, code) {
                    println!("vmm: {}: exit {code:#x}: #UD for the guest", self.name);
                }
                Ok(self.inject_exception(6, None))
            }
            exit::RDPMC => Ok(self.inject_exception(13, Some(0))),
            exit::NOTIFICATION => {
                self.woken(info1);
                Ok(0)
            }
            exit::NPF => self.mmio(info2),
            exit::SHUTDOWN => {
                println!(
                    "vmm: {}: the guest triple-faulted at rip {:#x}: VM stopped",
                    self.name,
                    self.vcpu.get(word::RIP)
                );
                Err(Stop::Done(3))
            }
            _ => {
                println!(
                    "vmm: {}: exit {code:#x} ({info1:#x}, {info2:#x}) at rip {:#x}: VM stopped",
                    self.name,
                    self.vcpu.get(word::RIP)
                );
                Err(Stop::Done(5))
            }
        }
    }

    /// An access to guest-physical `gpa`, which is no RAM: the
    /// instruction is decoded and stepped over. The I/O APIC's page goes
    /// to its model; elsewhere a read gets all ones and a write is dropped
    /// (as on a PC's empty bus), logged once per page. An instruction
    /// that is no `mov` the decoder knows stops the VM: guessing its
    /// length could run the guest astray.
    fn mmio(&mut self, gpa: u64) -> Result<u64, Stop> {
        let rip = self.vcpu.get(word::RIP);
        let (bytes, n) = self.instruction();
        let Some(m) = vmm::decode::decode(&bytes[..n]) else {
            println!(
                "vmm: {}: the guest touched guest-physical {gpa:#x} at rip {rip:#x} with an instruction not decoded ({:02x?}): VM stopped",
                self.name,
                &bytes[..n.min(8)]
            );
            return Err(Stop::Done(4));
        };
        if IoApic::owns(gpa) {
            self.ioapic_access(gpa - ioapic::BASE, m.access);
            return Ok(self.advance(u64::from(m.len)));
        }
        if self.once(8, gpa >> 12) {
            println!(
                "vmm: {}: {} at guest-physical {gpa:#x} (no RAM, no device) at rip {rip:#x}: {}",
                self.name,
                if matches!(m.access, vmm::decode::Access::Read { .. }) {
                    "read"
                } else {
                    "write"
                },
                if matches!(m.access, vmm::decode::Access::Read { .. }) {
                    "all ones"
                } else {
                    "dropped"
                }
            );
        }
        if let vmm::decode::Access::Read {
            reg,
            size,
            dest_size,
        } = m.access
        {
            let w = gpr_word(reg);
            let old = self.vcpu.get(w);
            self.vcpu
                .set(w, vmm::decode::merge_read(old, u64::MAX, size, dest_size));
        }
        Ok(self.advance(u64::from(m.len)))
    }

    /// A decoded access to the I/O APIC's page at `offset`. (A byte
    /// store from AH..BH would store the wrong byte: Linux writes its
    /// registers 32 bits wide.)
    fn ioapic_access(&mut self, offset: u64, access: vmm::decode::Access) {
        use vmm::decode::{merge_read, Access};
        match access {
            Access::Read {
                reg,
                size,
                dest_size,
            } => {
                let w = gpr_word(reg);
                let value = self.ioapic.read(offset, size);
                let old = self.vcpu.get(w);
                self.vcpu.set(w, merge_read(old, value, size, dest_size));
            }
            Access::WriteReg { reg, size } => {
                let value = self.vcpu.get(gpr_word(reg));
                self.ioapic.write(offset, size, value);
            }
            Access::WriteImm { value, size } => self.ioapic.write(offset, size, value),
        }
    }

    /// Sleeps until an interrupt is due (the guest executed HLT).
    fn idle(&mut self) {
        loop {
            self.update_devices();
            if self.interrupt_pending() {
                return;
            }
            let now = self.now();
            let lapic = match self.lapic.next_timer() {
                Some(TimerDue::Ns(ns)) => Some(ns),
                Some(TimerDue::Tsc(tsc)) => {
                    let ticks = tsc.saturating_sub(now.tsc);
                    Some(
                        now.ns
                            + (u128::from(ticks) * 1_000_000_000 / u128::from(self.tsc_hz)) as u64,
                    )
                }
                None => None,
            };
            let next = match (lapic, self.pit.next_irq0()) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => a.or(b).unwrap_or(now.ns + 10_000_000),
            };
            let us = next.saturating_sub(now.ns) / 1000;
            if us == 0 {
                continue;
            }
            // Sleep on the VMM's notification: the timer's bit (this
            // timeout, or an older one cancelled too late: the loop looks
            // again) or the NIC's ends it.
            let Ok(t) = self.timer.oneshot(us) else {
                return;
            };
            let Ok(bits) = syscall::wait(self.wake) else {
                return;
            };
            self.woken(bits);
            if bits & TIMER_BIT == 0 {
                let _ = self.timer.cancel(t);
            }
        }
    }

    fn port_io(&mut self, info1: u64, next_rip: u64) -> u64 {
        let port = ioio::port(info1);
        let width = ioio::width(info1);
        let flags = load::REGISTERS;
        self.vcpu.set(word::RIP, next_rip);
        if info1 & ioio::STRING != 0 {
            if self.once(2, u64::from(port)) {
                println!("vmm: {}: string I/O at port {port:#x}: skipped", self.name);
            }
            return flags;
        }
        let rax = self.vcpu.get(word::RAX);
        if info1 & ioio::IN != 0 {
            let value = self.port_in(port, width);
            let mask = if width == 4 {
                u64::MAX
            } else {
                (1u64 << (8 * width)) - 1
            };
            // A 32-bit `in` zero-extends into RAX; 8 and 16 keep the rest.
            let merged = if width == 4 {
                u64::from(value)
            } else {
                rax & !mask | u64::from(value) & mask
            };
            self.vcpu.set(word::RAX, merged);
        } else {
            self.port_out(port, width, rax as u32);
        }
        self.device_lines();
        flags
    }

    /// Moves received frames into the guest's receive buffers while it
    /// has some; a frame it has no buffer for waits (the stream holds the
    /// rest). Arms the stream's signal when it is drained.
    fn receive_frames(&mut self) {
        let Some((net, dev, _)) = &mut self.net else {
            return;
        };
        loop {
            let taken = match dev.pending.take() {
                Some(t) => t,
                None => match dev.client.receive() {
                    Ok(Some(t)) => t,
                    Ok(None) => {
                        let _ = dev.client.flush();
                        // Frames came in while arming: go on.
                        match dev.client.rx.arm(false) {
                            Ok(true) => continue,
                            _ => return,
                        }
                    }
                    Err(_) => return,
                },
            };
            let outcome = match dev.client.frame(&taken) {
                Ok(frame) => net.receive(&mut self.ram, frame),
                Err(_) => Received::Dropped,
            };
            if outcome == Received::Full {
                dev.pending = Some(taken);
                let _ = dev.client.flush();
                return;
            }
            let _ = dev.client.done(taken);
        }
    }

    /// Sends what the guest queued for transmission.
    fn transmit_frames(&mut self) {
        let Some((net, dev, _)) = &mut self.net else {
            return;
        };
        // Acknowledged packets first: their buffers are free again.
        while let Ok(Some(_)) = dev.client.sent() {}
        let client = &mut dev.client;
        let full = &mut dev.tx_full;
        net.transmit(&mut self.ram, &mut |frame| {
            if client.send(frame).is_err() {
                // Room comes back with acknowledgements; one try more.
                while let Ok(Some(_)) = client.sent() {}
                if client.send(frame).is_err() {
                    *full += 1;
                }
            }
        });
        let _ = dev.client.flush();
    }

    /// The register at `port` of PCI device `slot`'s I/O BAR 0, if the
    /// BAR (wherever the guest moved it) holds `port`.
    fn bar_offset(&self, slot: u8, port: u16) -> Option<u16> {
        let (base, size) = self.pci.function(slot)?.io_bar(0)?;
        let off = port.checked_sub(base)?;
        (u32::from(off) < size).then_some(off)
    }

    /// The NIC's register at `port`, if its I/O BAR is there.
    fn net_offset(&self, port: u16) -> Option<u16> {
        self.bar_offset(self.net.as_ref()?.2, port)
    }

    /// The console's register at `port`, if its I/O BAR is there.
    fn hvc_offset(&self, port: u16) -> Option<u16> {
        self.bar_offset(self.hvc.2, port)
    }

    /// The disk's register at `port`, if its I/O BAR is there.
    fn blk_offset(&self, port: u16) -> Option<u16> {
        self.bar_offset(self.blk.as_ref()?.2, port)
    }

    fn port_in(&mut self, port: u16, width: u8) -> u32 {
        match port {
            EXIT_COUNTER => return self.exits as u32,
            p if p == EXIT_COUNTER + 4 => return self.vcpu.interrupted as u32,
            _ => {}
        }
        if Bus::owns(port) {
            return self.pci.read(port, width);
        }
        if let Some(off) = self.blk_offset(port) {
            if let Some((blk, _, _)) = &mut self.blk {
                return blk.read(off, width);
            }
        }
        if let Some(off) = self.net_offset(port) {
            if let Some((net, _, _)) = &mut self.net {
                return net.read(off, width);
            }
        }
        if let Some(off) = self.hvc_offset(port) {
            return self.hvc.0.read(off, width);
        }
        let mut v = 0u32;
        for i in 0..u16::from(width) {
            v |= u32::from(self.in8(port.wrapping_add(i))) << (8 * i);
        }
        v
    }

    fn in8(&mut self, port: u16) -> u8 {
        let now = self.now().ns;
        match port {
            COM1..=0x3ff => self.uart.read(port - COM1),
            COM2..=0x2ff => self.status_uart.read(port - COM2),
            p if Pics::owns(p) => self.pics.read(p),
            p if Pit::owns(p) => self.pit.read(p, now),
            p if Rtc::owns(p) => {
                let unix = self.unix();
                self.rtc.read(p, unix)
            }
            p if Pm::owns(p) => self.pm.read(p, now),
            0x92 => 0x02, // A20 on
            0x80 | 0xed => 0,
            _ => {
                if self.once(3, u64::from(port)) {
                    println!(
                        "vmm: {}: read of unknown port {port:#x}: all ones",
                        self.name
                    );
                }
                0xff
            }
        }
    }

    fn port_out(&mut self, port: u16, width: u8, value: u32) {
        // The reset register (its bit 2 starts the reset), among the
        // PCI configuration ports.
        if port == RESET_CONTROL && width == 1 {
            if value & 4 != 0 {
                self.reset = Some("port 0xcf9");
            }
            return;
        }
        if Bus::owns(port) {
            self.pci.write(port, width, value);
            return;
        }
        if let Some(off) = self.blk_offset(port) {
            if let Some((blk, disk, _)) = &mut self.blk {
                blk.write(off, value, &mut self.ram, disk);
            }
            return;
        }
        if let Some(off) = self.net_offset(port) {
            let notified = self
                .net
                .as_mut()
                .and_then(|(net, _, _)| net.write(off, value));
            match notified {
                Some(virtio_net::TX) => self.transmit_frames(),
                Some(virtio_net::RX) => self.receive_frames(),
                _ => {}
            }
            return;
        }
        if let Some(off) = self.hvc_offset(port) {
            match self.hvc.0.write(off, value) {
                Some(virtio_console::TX) => self.console_output(),
                Some(virtio_console::RX) => {
                    self.hvc.0.deliver(&mut self.ram);
                }
                _ => {}
            }
            return;
        }
        for i in 0..u16::from(width) {
            self.out8(port.wrapping_add(i), (value >> (8 * i)) as u8);
        }
    }

    fn out8(&mut self, port: u16, v: u8) {
        let now = self.now().ns;
        match port {
            COM1..=0x3ff => self.uart.write(port - COM1, v),
            COM2..=0x2ff => {
                self.status_uart.write(port - COM2, v);
                self.read_status();
            }
            p if Pics::owns(p) => self.pics.write(p, v),
            p if Pit::owns(p) => self.pit.write(p, v, now),
            p if Rtc::owns(p) => self.rtc.write(p, v),
            p if Pm::owns(p) => match self.pm.write(p, v) {
                PmAction::PowerOff => self.powered_off = true,
                PmAction::OtherSleep(kind) => {
                    if self.once(6, u64::from(kind)) {
                        println!(
                            "vmm: {}: sleep type {kind} is not offered: ignored",
                            self.name
                        );
                    }
                }
                PmAction::None => {}
            },
            // The keyboard controller's reset pulse: Linux's reboot and
            // panic path tries it (there is no controller otherwise).
            0x64 if v == 0xfe => self.reset = Some("keyboard controller"),
            0x80 | 0xed | 0x92 => {}
            _ => {
                if self.once(4, u64::from(port)) {
                    println!(
                        "vmm: {}: write of {v:#x} to unknown port {port:#x}: ignored",
                        self.name
                    );
                }
            }
        }
    }

    fn msr(&mut self, write: bool) -> u64 {
        let msr = self.vcpu.get(word::RCX) as u32;
        let value = (self.vcpu.get(word::RDX) << 32) | (self.vcpu.get(word::RAX) & 0xffff_ffff);
        let now = self.now();
        let result: Result<Option<u64>, GeneralProtection> = if Lapic::owns(msr) {
            if write {
                // A level-triggered vector's EOI goes on to the I/O APIC;
                // another CPU's IPIs (INIT, startup) mean nothing with one.
                self.lapic.write(msr, value, now).map(|effect| {
                    if let Some(Effect::LevelEoi(vector)) = effect {
                        self.ioapic.eoi(vector);
                    }
                    None
                })
            } else {
                self.lapic.read(msr, now).map(Some)
            }
        } else {
            match (msr, write) {
                (MSR_EFER, false) => Ok(Some(self.vcpu.get(word::EFER) & !(1 << 12))),
                (MSR_EFER, true) => {
                    if value & !(EFER_WRITABLE | EFER_LMA) != 0 {
                        Err(GeneralProtection)
                    } else {
                        let lma = self.vcpu.get(word::EFER) & EFER_LMA;
                        self.vcpu.set(word::EFER, value & EFER_WRITABLE | lma);
                        Ok(None)
                    }
                }
                (MSR_PAT, false) => Ok(Some(self.pat)),
                (MSR_PAT, true) => {
                    self.pat = value;
                    Ok(None)
                }
                (MSR_TSC, false) => Ok(Some(now.tsc)),
                (kvmclock::MSR_SYSTEM_TIME, false) => Ok(Some(self.kvmclock)),
                (kvmclock::MSR_SYSTEM_TIME, true) => {
                    self.kvmclock = value;
                    if value & 1 != 0 {
                        let info = kvmclock::time_info(now.tsc, now.ns, self.tsc_hz);
                        self.ram.write(value & !1, &info);
                    }
                    Ok(None)
                }
                (kvmclock::MSR_WALL_CLOCK, true) => {
                    let boot_ns = self.unix() * 1_000_000_000;
                    self.ram
                        .write(value, &kvmclock::wall_clock(boot_ns.saturating_sub(now.ns)));
                    Ok(None)
                }
                // Microcode patch level, HWCR, DE_CFG, TSC_AUX: AMD MSRs
                // Linux reads or sets at boot; nothing behind them here.
                // Also the interrupt-pending message register (C1E).
                (0x8b | 0xc001_0015 | 0xc001_1029 | 0xc001_0055, false) => Ok(Some(0)),
                (0x8b | 0xc001_0015 | 0xc001_1029 | 0xc000_0103 | MSR_TSC, true) => Ok(None),
                _ => Err(GeneralProtection),
            }
        };
        match result {
            Ok(read) => {
                if let Some(v) = read {
                    self.vcpu.set(word::RAX, v & 0xffff_ffff);
                    self.vcpu.set(word::RDX, v >> 32);
                }
                let efer = if msr == MSR_EFER && write {
                    load::CONTROL
                } else {
                    0
                };
                self.advance(2) | efer
            }
            Err(GeneralProtection) => {
                if self.once(5, u64::from(msr) << 1 | u64::from(write)) {
                    println!(
                        "vmm: {}: {} of MSR {msr:#x}: #GP for the guest",
                        self.name,
                        if write { "write" } else { "read" }
                    );
                }
                self.inject_exception(13, Some(0))
            }
        }
    }

    /// The exiting instruction's bytes (the guest's RIP, through its page
    /// tables when paging is on).
    fn instruction(&self) -> ([u8; 15], usize) {
        let paging = self.vcpu.get(word::CR0) & (1 << 31) != 0;
        let cs = seg::CS;
        let base = self.vcpu.get(word::SEGMENTS + 2 * cs + 1);
        let rip = self
            .vcpu
            .get(word::RIP)
            .wrapping_add(if paging { 0 } else { base });
        self.ram.fetch(self.vcpu.get(word::CR3), paging, rip)
    }

    /// `[REX] 0F op modrm` with a register operand: (REX, modrm, length).
    fn decode_mov_special(&self, opcode: u8) -> Option<(u8, u8, u64)> {
        let (b, n) = self.instruction();
        let mut i = 0;
        let mut rex = 0;
        while i < n && (b[i] == 0x66 || b[i] == 0xf2 || b[i] == 0xf3) {
            i += 1;
        }
        if i < n && b[i] & 0xf0 == 0x40 {
            rex = b[i];
            i += 1;
        }
        if i + 3 > n || b[i] != 0x0f || b[i + 1] != opcode || b[i + 2] >> 6 != 3 {
            return None;
        }
        Some((rex, b[i + 2], i as u64 + 3))
    }

    /// `mov cr4, reg` (the only CR write intercepted): CR4 is loaded with
    /// the value (the kernel clears PKE, CET and PKS).
    fn mov_to_cr(&mut self) -> Result<u64, Stop> {
        let Some((rex, modrm, len)) = self.decode_mov_special(0x22) else {
            println!(
                "vmm: {}: CR4 write not decoded at rip {:#x}: VM stopped",
                self.name,
                self.vcpu.get(word::RIP)
            );
            return Err(Stop::Done(6));
        };
        let src = (modrm & 7) | (rex & 1) << 3;
        let value = self.vcpu.get(gpr_word(src));
        self.vcpu.set(word::CR4, value);
        Ok(self.advance(len) | load::CONTROL)
    }

    /// `mov reg, drN` reads 0 (DR6/DR7 their reset values); `mov drN,
    /// reg` is ignored: the guest gets no hardware breakpoints.
    fn mov_dr(&mut self, code: u64) -> Result<u64, Stop> {
        let read = code < exit::DR_WRITE;
        let Some((rex, modrm, len)) = self.decode_mov_special(if read { 0x21 } else { 0x23 })
        else {
            println!(
                "vmm: {}: debug-register access not decoded: VM stopped",
                self.name
            );
            return Err(Stop::Done(6));
        };
        if read {
            let dr = (code - exit::DR_READ) as u8;
            let value = match dr {
                6 => 0xffff_0ff0,
                7 => 0x400,
                _ => 0,
            };
            let dst = (modrm & 7) | (rex & 1) << 3;
            self.vcpu.set(gpr_word(dst), value);
        }
        Ok(self.advance(len))
    }

    /// Takes what the guest wrote to COM2: a line `status N` is its
    /// verdict; anything else is logged once and ignored.
    fn read_status(&mut self) {
        for b in self.status_uart.take_output() {
            if b != b'\n' {
                if self.status_line.len() < 64 {
                    self.status_line.push(b);
                }
                continue;
            }
            let line = core::mem::take(&mut self.status_line);
            let text = core::str::from_utf8(&line).unwrap_or("").trim();
            match text
                .strip_prefix("status ")
                .and_then(|n| n.trim().parse::<u8>().ok())
            {
                Some(n) => {
                    println!("vmm: {}: the guest reported status {n}", self.name);
                    self.status = Some(n);
                }
                None => {
                    if self.once(7, 0) {
                        println!(
                            "vmm: {}: COM2 line {text:?} is no `status N`: ignored",
                            self.name
                        );
                    }
                }
            }
        }
    }

    /// Prints the guest's complete serial console lines, and the rest
    /// too if `all`.
    fn flush_console(&mut self, all: bool) {
        let out = self.uart.take_output();
        let (name, power_down) = (&self.name, &mut self.power_down);
        let mut print = |text: &str, sent: usize| print_line(name, text, sent, power_down);
        self.serial_lines.feed(&out, &mut print);
        if all {
            self.serial_lines.finish(&mut print);
            self.hvc.1.finish(&mut print);
        }
    }

    /// Prints what the guest wrote to `/dev/hvc0`.
    fn console_output(&mut self) {
        let mut out = core::mem::take(&mut self.out);
        out.clear();
        let (hvc, lines, _) = &mut self.hvc;
        hvc.transmit(&mut self.ram, &mut out);
        let (name, power_down) = (&self.name, &mut self.power_down);
        lines.feed(&out, &mut |text, sent| {
            print_line(name, text, sent, power_down)
        });
        // A prompt: to the terminal now, where it waits for what is typed.
        if let Some(part) = lines.take_partial() {
            rt::print::console_part(part);
        }
        self.out = out;
    }
}

/// A line of the guest's console: `[name] text` in the log, `text` in
/// the VMM's terminal (whose label names it) — but for its first `sent`
/// bytes, which went there already (a prompt). Notes the kernel's last
/// words before a power-off.
fn print_line(name: &str, text: &str, sent: usize, power_down: &mut bool) {
    if text.contains("reboot: Power down") {
        *power_down = true;
    }
    let rest = text.get(sent..).unwrap_or("");
    rt::print::line_apart(&alloc::format!("[{name}] {text}"), rest);
}
