//! vmm: the virtual machine monitor (docs/virtualization.md, "The VMM").
//! Boots an unmodified Linux from two boot modules — a bzImage and an
//! initramfs — on one virtual CPU, with guest RAM made from its own quota,
//! and emulates the PC devices Linux needs. The guest's consoles — the
//! serial port and virtio-console (`/dev/hvc0`) — go to the log, a line
//! at a time, prefixed with the VM's name (`[vm1] Linux version ...`),
//! and, when the scenario routes `Console` to a terminal, to the
//! terminal too; the lines typed there go to `/dev/hvc0` (to the serial
//! port until the guest's virtio-console driver runs).
//!
//! Config (`[component.config]`, every key optional):
//!
//! | key | default | what |
//! |-----|---------|------|
//! | `name` | `vm` | the prefix of the console lines |
//! | `kernel` | `vmlinuz` | the bzImage's module |
//! | `initramfs` | `initramfs` | the initramfs's module (`""`: none) |
//! | `ram_mib` | 128 | guest RAM, MiB, a multiple of 2, from the quota |
//! | `cmdline` | see [`DEFAULT_CMDLINE`] | the kernel's command line |
//! | `append` | none | words added to the command line (`quiet`) |
//!
//! Exit code: the guest's status (`status N` on COM2) when it powers off
//! (0 if it reported none); 1 the VMM could not start the VM; 2 the guest
//! halted with interrupts off; 3 it triple-faulted; 4, 6 an instruction
//! the VMM must decode was not understood; 5 an exit it does not handle;
//! 7 the guest asked for a reset (a reboot or a panic's: the VMM ends,
//! and the scenario's restart policy may start it again).
//!
//! The pure logic — boot protocol, CPUID, device models — is the `vmm`
//! crate's, tested on the host; this program is the glue: memory, the
//! run loop ([`machine`]), time and the log.
#![no_std]
#![no_main]
#![forbid(unsafe_op_in_unsafe_fn)]

extern crate alloc;

mod machine;
mod memory;

use alloc::string::String;

use rt::abi::caddr::own;
use rt::abi::{Error, ObjectType};
use rt::interfaces::child;
use rt::println;
use rt::session::rom::Rom;
use rt::session::timer::Timer;
use rt::session::{self, Session};
use ucore::config::parse_tree;
use vmm::acpi;
use vmm::linux::{self, BzImage, Plan};

use memory::Ram;

rt::entry!(main);

/// The kernel's command line unless the config gives one: the serial
/// console (from the first instruction on, `earlyprintk`), no address
/// randomisation (its decompressor's search finds no room in a small
/// guest and says so), PCI bus 0 scanned by probing (`pci=lastbus=1`:
/// the DSDT describes no root bridge; the devices' interrupts come from
/// their Interrupt Line registers), the PS/2 controller this VMM does not have left alone, and
/// the TSC trusted (it is the host's, invariant).
pub const DEFAULT_CMDLINE: &str =
    "console=ttyS0 earlyprintk=serial,ttyS0 nokaslr pci=lastbus=1 i8042.noaux i8042.nokbd i8042.nopnp tsc=reliable";

/// Slots: sessions, then objects, then ROM and RAM frames.
const FIRST: u32 = child::FIRST_FREE;
const ROM_SLOT: u32 = FIRST;
const TIMER_SLOT: u32 = FIRST + 1;
const TIMER_NOTIFY: u32 = FIRST + 2;
const GSPACE: u32 = FIRST + 3;
const VCPU: u32 = FIRST + 4;
const RTC_SLOT: u32 = FIRST + 5;
/// The Block session (its donation, table and stream slots after it).
const BLOCK_SLOT: u32 = FIRST + 6;
const BLOCK_DONOR: u32 = FIRST + 7;
const BLOCK_TABLE: u32 = FIRST + 8;
const BLOCK_STREAM: [u32; 3] = [FIRST + 9, FIRST + 10, FIRST + 11];
/// The heap's extra 2 MiB frames (the block device's request buffer).
const HEAP_SLOT: u32 = FIRST + 12;
const HEAP_FRAMES: u32 = 2;
/// The Nic session (donation, table, stream slots).
const NIC_SLOT: u32 = FIRST + 20;
/// The VMM's own notification, bound to its thread, and two write
/// capabilities to it: the Timer's forwarder's ([`machine::TIMER_BIT`])
/// and the NIC's ([`machine::NIC_BIT`]).
const WAKE: u32 = FIRST + 26;
const WAKE_TIMER: u32 = FIRST + 27;
const WAKE_NIC: u32 = FIRST + 28;
/// The forwarding threads and their frames (rt::thread::PAGES each).
const FORWARD_TIMER_THREAD: u32 = FIRST + 29;
const FORWARD_NIC_THREAD: u32 = FIRST + 30;
const FORWARD_INPUT_THREAD: u32 = FIRST + 31;
const FORWARD_TIMER_FRAMES: u32 = FIRST + 32;
const FORWARD_NIC_FRAMES: u32 = FIRST + 40;
const FORWARD_INPUT_FRAMES: u32 = FIRST + 48;
/// The console's input: the terminal's notification (read-only), and the
/// write capability to the VMM's for its forwarder
/// ([`machine::INPUT_BIT`]).
const INPUT_NOTIFY: u32 = FIRST + 54;
const WAKE_INPUT: u32 = FIRST + 55;
const CONFIG_FIRST: u32 = FIRST + 16;
const CONFIG_END: u32 = CONFIG_FIRST + 4;
/// Guest RAM: 2 MiB frames, then a copy of each for the VMM's view.
const RAM_FIRST: u32 = FIRST + 64;
/// At most 3 GiB of guest RAM (below the device hole): 1536 frames.
const RAM_MAX_FRAMES: u32 = 1536;
const ROM_FIRST: u32 = RAM_FIRST + 2 * RAM_MAX_FRAMES;
/// Slots for the modules' frames (48 MiB of 4 KiB frames; a module of
/// 2 MiB or more is mostly 2 MiB frames, a slot each).
const ROM_MAX_PAGES: u32 = 12288;

/// Where things are mapped in the VMM.
const CONFIG_VA: u64 = 0x30_0000_0000;
const BLOCK_VA: u64 = 0x38_0000_0000;
const NIC_VA: u64 = 0x3c_0000_0000;
const KERNEL_VA: u64 = 0x40_0000_0000;
const INITRD_VA: u64 = 0x48_0000_0000;
pub const RAM_VA: u64 = 0x100_0000_0000;

/// The guest space's page-table pool: 2^16 bytes, 16 tables (a PML4, a
/// PDPT, and page directories for 3 GiB of 2 MiB pages need 6).
const GSPACE_BITS: u64 = 16;

/// What the config asks for.
struct Config {
    name: String,
    kernel: String,
    initramfs: String,
    ram_mib: u64,
    cmdline: String,
}

fn read_config(rom: &Session<Rom>) -> Result<Config, String> {
    let mut c = Config {
        name: "vm".into(),
        kernel: "vmlinuz".into(),
        initramfs: "initramfs".into(),
        ram_mib: 128,
        cmdline: DEFAULT_CMDLINE.into(),
    };
    // SAFETY: CONFIG_VA.. is used by nothing else of this program.
    let tree = match unsafe { rom.map("config", CONFIG_FIRST, CONFIG_END, CONFIG_VA) } {
        Ok(tree) => tree,
        // No config: the defaults.
        Err(_) => return Ok(c),
    };
    let config =
        parse_tree(tree).map_err(|(at, fault)| alloc::format!("config: byte {at}: {fault}"))?;
    let text = |key: &str, into: &mut String| -> Result<(), String> {
        if let Some(v) = config.get(key) {
            *into = v
                .as_str()
                .ok_or_else(|| alloc::format!("config: {key} must be a string"))?
                .into();
        }
        Ok(())
    };
    text("name", &mut c.name)?;
    text("kernel", &mut c.kernel)?;
    text("initramfs", &mut c.initramfs)?;
    text("cmdline", &mut c.cmdline)?;
    let mut append = String::new();
    text("append", &mut append)?;
    if !append.is_empty() {
        c.cmdline.push(' ');
        c.cmdline.push_str(&append);
    }
    if let Some(v) = config.get("ram_mib") {
        let mib = v
            .as_integer()
            .ok_or_else(|| String::from("config: ram_mib must be an integer"))?;
        if !(16..=3072).contains(&mib) || mib % 2 != 0 {
            return Err(alloc::format!(
                "config: ram_mib = {mib}: an even number of MiB from 16 to 3072"
            ));
        }
        c.ram_mib = mib as u64;
    }
    Ok(c)
}

/// Maps boot module `name` read-only in the 2 MiB-aligned window at `va`
/// (its frames in slots from `*next`): the boot image's own frames, no
/// copy (`rt::session::rom`, `map_module`).
fn module(
    rom: &Session<Rom>,
    name: &str,
    next: &mut u32,
    va: u64,
) -> Result<&'static [u8], String> {
    let info = rom
        .module(name)
        .map_err(|e| alloc::format!("boot module {name:?}: {e}"))?;
    let end = ROM_FIRST + ROM_MAX_PAGES;
    // SAFETY: `va..` (2 MiB and the module) is this module's window,
    // used by nothing else (the layout above: windows 32 GiB apart).
    let data = unsafe { rom.map_module(name, *next, end, va) }
        .map_err(|e| alloc::format!("boot module {name:?}: {e}"))?;
    *next += info.frames as u32;
    Ok(data)
}

/// What the forwarding threads wait on: the Timer's notification, the
/// Nic's, the terminal's input (each the provider's, read-only to the
/// VMM); 0 where there is none.
static WAITED: [core::sync::atomic::AtomicU64; 3] =
    [const { core::sync::atomic::AtomicU64::new(0) }; 3];
/// Where each forwarder signals: its write capability to the VMM's own
/// notification, with its bit.
const FORWARDED_TO: [u32; 3] = [WAKE_TIMER, WAKE_NIC, WAKE_INPUT];

/// A forwarding thread: each signal of the notification it waits on
/// (`arg` indexes [`WAITED`]) becomes its bit on the VMM's own
/// notification, which is bound to the VMM's thread: a timeout, a frame
/// or a typed line ends the guest's run (a NOTIFICATION exit) or the
/// VMM's sleep at `HLT`, one notification for all.
extern "C" fn forward(arg: u64) -> ! {
    use core::sync::atomic::Ordering;
    let i = (arg as usize).min(WAITED.len() - 1);
    let from = WAITED[i].load(Ordering::Acquire);
    let to = own(FORWARDED_TO[i]);
    loop {
        if rt::syscall::wait(from).is_err() || rt::syscall::signal(to).is_err() {
            rt::syscall::thread_exit(1);
        }
    }
}

/// The forwarders: which [`WAITED`] entry, the thread's slot, its frames'.
const FORWARDERS: [(u64, u32, u32); 3] = [
    (0, FORWARD_TIMER_THREAD, FORWARD_TIMER_FRAMES),
    (1, FORWARD_NIC_THREAD, FORWARD_NIC_FRAMES),
    (2, FORWARD_INPUT_THREAD, FORWARD_INPUT_FRAMES),
];

/// Binds the VMM's notification (made first thing: `run`) and starts a
/// forwarder for each notification there is. After the last direct use
/// of the Timer's notification (`Machine::new` measures the TSC with it).
fn start_forwarding(timer: &Timer) -> Result<(), String> {
    use core::sync::atomic::Ordering;
    use rt::abi::Rights;
    let e = |what: &str, e: Error| alloc::format!("{what}: {e:?}");
    let bits = [machine::TIMER_BIT, machine::NIC_BIT, machine::INPUT_BIT];
    for (to, bit) in FORWARDED_TO.into_iter().zip(bits) {
        rt::syscall::cap_mint(own(WAKE), own(to), Rights::WRITE, bit).map_err(|x| e("mint", x))?;
    }
    rt::syscall::bind_notification(own(child::OWN_THREAD), own(WAKE))
        .map_err(|x| e("binding", x))?;
    WAITED[0].store(timer.notification(), Ordering::Release);
    let cpu = rt::cpu::set().nth(0).unwrap_or(0);
    for &(arg, thread, frames) in &FORWARDERS {
        if WAITED[arg as usize].load(Ordering::Acquire) == 0 {
            continue;
        }
        rt::thread::spawn(
            forward,
            arg,
            rt::thread::Slots {
                thread: own(thread),
                frames: own(frames),
            },
            rt::thread::Placement {
                priority: child::PRIORITY,
                cpu,
                fault_endpoint: rt::abi::caddr::NULL_SLOT,
            },
        )
        .map_err(|x| alloc::format!("a forwarding thread: {x:?}"))?;
    }
    Ok(())
}

/// Sets up the Nic session's streams.
fn open_nic(
    name: &str,
    session: Session<rt::session::nic::Nic>,
) -> Result<machine::NetDevice, String> {
    let info = session
        .info()
        .map_err(|e| alloc::format!("Nic INFO: {e}"))?;
    // SAFETY: NIC_VA.. (the streams' 2 MiB) is theirs alone.
    let client = unsafe { session.streams([NIC_SLOT + 3, NIC_SLOT + 4, NIC_SLOT + 5], NIC_VA) }
        .map_err(|e| alloc::format!("Nic streams: {e}"))?;
    WAITED[1].store(
        client.notifications().own,
        core::sync::atomic::Ordering::Release,
    );
    println!(
        "vmm: {name}: eth0 is the Nic session's interface, MAC {}",
        info.mac
    );
    Ok(machine::NetDevice::new(session, client, info.mac.0))
}

fn main(_: u64) -> i32 {
    match run() {
        Ok(code) => code,
        Err(why) => {
            println!("vmm: {why}");
            1
        }
    }
}

fn run() -> Result<i32, String> {
    let rom = session::open::<Rom>(ROM_SLOT).map_err(|e| alloc::format!("Rom session: {e}"))?;
    let config = read_config(&rom)?;
    let name = config.name.clone();
    let timer =
        Timer::open(TIMER_SLOT, TIMER_NOTIFY).map_err(|e| alloc::format!("Timer session: {e}"))?;

    let mut next = ROM_FIRST;
    let image = module(&rom, &config.kernel, &mut next, KERNEL_VA)?;
    let kernel = BzImage::parse(image).map_err(|e| alloc::format!("{}: {e}", config.kernel))?;
    let initrd: &[u8] = if config.initramfs.is_empty() {
        &[]
    } else {
        module(&rom, &config.initramfs, &mut next, INITRD_VA)?
    };
    let ram_bytes = config.ram_mib << 20;
    let plan = Plan::new(&kernel, ram_bytes, initrd.len() as u64, &config.cmdline)
        .map_err(|e| alloc::format!("{}: {e}", config.kernel))?;

    // The TSC's rate (the timer measures it over its first 100 ms),
    // before the forwarder takes over the Timer's notification.
    let tsc_hz = machine::tsc_rate(&timer)?;
    println!("vmm: {name}: command line: {}", config.cmdline);

    // The wall clock for the guest's CMOS clock and kvmclock: from an Rtc
    // session if the scenario routes one, else the epoch.
    let boot_unix = match session::open::<rt::session::rtc::Rtc>(RTC_SLOT) {
        Ok(rtc) => match rtc.now() {
            Ok(t) => vmm::rtc::unix(t.year.into(), t.month, t.day, t.hour, t.minute, t.second),
            Err(e) => {
                println!("vmm: {name}: the Rtc session gave no time ({e}): the guest's clock starts at 1970");
                0
            }
        },
        Err(_) => {
            println!("vmm: {name}: no Rtc session: the guest's clock starts at 1970");
            0
        }
    };
    // The guest's disk: a Block session if the scenario routes one.
    // SAFETY: BLOCK_VA.. (2 MiB) is the stream's alone.
    let disk = match unsafe {
        rt::session::block::BlockClient::connect(
            BLOCK_SLOT,
            BLOCK_DONOR,
            BLOCK_TABLE,
            BLOCK_STREAM,
            BLOCK_VA,
        )
    } {
        Ok(client) => {
            rt::heap::grow(HEAP_SLOT, HEAP_FRAMES).map_err(|e| alloc::format!("heap: {e:?}"))?;
            let disk = machine::Disk::new(client)
                .map_err(|e| alloc::format!("{name}: the Block session's device: {e}"))?;
            println!(
                "vmm: {name}: /dev/vda is the Block session's device: {}",
                disk.describe()
            );
            Some(disk)
        }
        Err(_) => None,
    };
    // The guest's NIC: a Nic session if the scenario routes one.
    let nic = match session::open_from_quota::<rt::session::nic::Nic>(
        NIC_SLOT,
        NIC_SLOT + 1,
        NIC_SLOT + 2,
    ) {
        Ok(s) => Some(open_nic(&name, s)?),
        Err(_) => None,
    };
    // The guest's console input: the lines typed into the VMM's terminal,
    // if its scenario routes `Console` to one that gives them.
    let input = rt::print::console().and_then(|console| {
        let n = console.input_notifier(INPUT_NOTIFY).ok()?;
        WAITED[2].store(n, core::sync::atomic::Ordering::Release);
        println!("vmm: {name}: what is typed into its terminal goes to /dev/hvc0 (the serial console until the guest's virtio-console driver runs)");
        Some(console)
    });
    // The guest space, the VCPU, the notification, then guest RAM (2 MiB
    // frames, the bulk of the quota) — after the sessions' donor blocks
    // (above: each an untyped aligned to its size, 8 MiB for a Block or
    // a Nic session) and the heap's frames, which come first while the
    // quota's watermark is low: before the RAM they would cost their
    // alignment too (the quota holds guest RAM and about 24 MiB).
    let u = own(child::UNTYPED);
    let made = |e: Error, what: &str| {
        alloc::format!("{what}: {e:?} (ram_mib of the vmm's entry too small?)")
    };
    rt::syscall::retype(u, ObjectType::GuestSpace, GSPACE_BITS, own(GSPACE), 1)
        .map_err(|e| made(e, "guest space"))?;
    rt::syscall::retype(u, ObjectType::Vcpu, 0, own(VCPU), 1)
        .map_err(|e| made(e, "virtual CPU"))?;
    rt::syscall::retype(u, ObjectType::Notification, 0, own(WAKE), 1)
        .map_err(|e| made(e, "notification"))?;

    let mut ram =
        Ram::make(own(GSPACE), RAM_FIRST, ram_bytes, RAM_VA).map_err(|e| made(e, "guest RAM"))?;
    // Load: kernel, initramfs, zero page, command line, tables.
    ram.write(plan.kernel_addr, kernel.kernel());
    if plan.initrd_len > 0 {
        ram.write(plan.initrd_addr, initrd);
    }
    ram.write(acpi::TABLES, &acpi::tables());
    ram.write(
        linux::layout::ZERO_PAGE,
        &plan.zero_page(&kernel, acpi::TABLES),
    );
    ram.write(linux::layout::CMDLINE, &plan.cmdline);
    ram.write(linux::layout::PAGE_TABLES, &linux::page_tables());
    ram.write(linux::layout::GDT, &linux::gdt());
    println!(
        "vmm: {name}: Linux boot protocol {}.{:02}, kernel at {:#x} ({} KiB), initramfs at {:#x} ({} KiB), {} MiB of RAM",
        kernel.version >> 8,
        kernel.version & 0xff,
        plan.kernel_addr,
        kernel.kernel().len() / 1024,
        plan.initrd_addr,
        plan.initrd_len / 1024,
        config.ram_mib
    );

    start_forwarding(&timer)?;

    let mut m = machine::Machine::new(
        name,
        ram,
        &timer,
        tsc_hz,
        (own(VCPU), own(GSPACE)),
        boot_unix,
        machine::Attached {
            disk,
            nic,
            input,
            wake: own(WAKE),
        },
    );
    m.enter(&plan);
    let code = m.run();
    // The forwarders end with the VMM (a thread left waiting would keep
    // the component alive); its sessions are closed by init when it
    // exits, so nothing is torn down here (`forget`: no close that could
    // wait on a provider).
    for &(arg, thread, _) in &FORWARDERS {
        if WAITED[arg as usize].load(core::sync::atomic::Ordering::Acquire) != 0 {
            let _ = rt::syscall::thread_suspend(own(thread));
        }
    }
    core::mem::forget(m);
    Ok(code)
}
