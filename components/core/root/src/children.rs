//! Starting the components of `pecan.start=` — or, when the boot image
//! has a config ROM, init (`interfaces::init`) — and supervising them until every
//! child that is not a server has finished (`interfaces::child`). What each
//! child may do is what its entry's markers grant (`+own`, `+serve`,
//! `ucore::start`), whatever its name.

use formats::bootimage::BootImage;
use rt::abi::bootinfo::{self, slot, BootInfo};
use rt::abi::caddr::{in_table, own};
use rt::abi::cpu::CpuSet;
use rt::abi::ObjectType;
use rt::interfaces::{child, init};
use rt::println;
use rt::resources::Resources;
use rt::spawn::{self, ChildCaps, ChildSpec, Grant, ParentCaps, RomView, SpawnError, PT_POOL_BITS};
use rt::syscall;
use ucore::start::{self, StartEntry};
use ucore::supervise::{Event, Supervisor};

use crate::boot;

/// Exit codes of root (besides 0).
pub mod exit {
    /// The boot image could not be used.
    pub const BAD_BOOT_IMAGE: i32 = 3;
    /// Root's capability space or memory could not be set up.
    pub const NO_RESOURCES: i32 = 4;
    /// `Recv` on root's endpoint failed, so children could not be supervised.
    pub const RECV_FAILED: i32 = 5;
    /// An entry of `pecan.start=` was refused or could not be started (the
    /// others ran), or init could not be started (nothing ran).
    pub const NOT_STARTED: i32 = 6;
    /// Init ended with an exit code other than 0 (a component it could not
    /// start, a bad config ROM: `interfaces::init`) or faulted.
    pub const INIT_FAILED: i32 = 7;
}

/// The boot-image entry of the config ROM.
const CONFIG: &str = "config";

/// Starts init when the boot image has a config ROM, else the children
/// named on the command line; waits for them and stops the servers;
/// returns root's exit code: [`exit::NOT_STARTED`] when init or an entry
/// of the list could not be started (init: at once, nothing runs),
/// [`exit::INIT_FAILED`] when init did not exit with 0. With neither
/// nothing happens.
pub fn run(info: &'static BootInfo) -> i32 {
    let cmdline = info.cmdline();
    let list = formats::cmdline::value(cmdline, start::KEY);
    let image = match boot::image(info) {
        Ok(image) => image,
        Err(_) if list.is_none() => return 0,
        Err(e) => {
            println!("root: {e}");
            return exit::BAD_BOOT_IMAGE;
        }
    };
    let config = image.find(CONFIG);
    if config.is_none() && list.is_none() {
        return 0;
    }
    let (mut res, summary) = match Resources::from_boot_info(info) {
        Ok(r) => r,
        Err(e) => {
            println!("root: {e}");
            return exit::NO_RESOURCES;
        }
    };
    println!(
        "root: {} KiB of untyped memory in {} capabilities ({} device capabilities unused), \
         {} free slots",
        summary.free_bytes / 1024,
        summary.untyped_caps,
        summary.device_caps,
        summary.free_slots
    );
    // What the memory rule's model of root's memory is checked against
    // (`ucore::plan::RootMemory`, the tests `memory-*`).
    println!(
        "root: untyped blocks: {}",
        ucore::plan::BlockList(res.untyped_blocks())
    );
    // The kernel starts root at this priority; children run below it, so
    // root finishes starting them all before the first one runs.
    if let Err(e) = syscall::thread_set_sched_params(own(slot::THREAD), child::ROOT_PRIORITY, 0) {
        println!(
            "root: cannot run at priority {}: {e} (children may run before all are started)",
            child::ROOT_PRIORITY
        );
    }
    let endpoints = match ParentCaps::make(&mut res, slot::VSPACE) {
        Ok(caps) => caps,
        Err(e) => {
            println!("root: cannot make its endpoints: {e}");
            return exit::NO_RESOURCES;
        }
    };

    let mut children: Supervisor<'static, ChildCaps> = Supervisor::new();
    if let Some(config) = config {
        if list.is_some() {
            println!("root: the boot image has a config ROM: starting init, not pecan.start=");
        }
        match start_init(&mut res, &image, info, endpoints, config.data) {
            Ok((caps, entry_point)) => {
                println!("root: started init (index 1, entry {entry_point:#x})");
                children.add(1, "init", false, caps);
            }
            Err(e) => {
                println!("root: cannot start init: {e}");
                return exit::NOT_STARTED;
            }
        }
    }
    let mut not_started = 0;
    let list = if config.is_none() { list } else { None };
    for entry in list.into_iter().flat_map(start::entries) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(bad) => {
                println!("root: refusing {bad}");
                not_started += 1;
                continue;
            }
        };
        let (name, index) = (entry.name, entry.index);
        match start_entry(&mut res, &image, endpoints, &entry) {
            Ok((caps, entry_point)) => {
                println!("root: started {name} (index {index}, entry {entry_point:#x})");
                children.add(index, name, entry.serve, caps);
            }
            Err(e) if e.is_refusal() => println!("root: refusing {name}: {e}"),
            Err(e) => println!("root: cannot start {name}: {e}"),
        }
        if children.child_mut(index).is_none() {
            not_started += 1;
        }
    }
    let init = config.map(|_| 1);
    let code = supervise(&mut children, endpoints.fault, init);
    println!("root: all children finished");
    stop_all(&children, init);
    if code == 0 && not_started > 0 {
        println!("root: {not_started} entries of pecan.start= could not be started");
        return exit::NOT_STARTED;
    }
    code
}

/// Builds and starts the child of start-list entry `entry` (its index is
/// its badge), as `interfaces::child` specifies.
fn start_entry(
    res: &mut Resources,
    image: &BootImage<'_>,
    parent: ParentCaps,
    entry: &StartEntry<'_>,
) -> Result<(ChildCaps, u64), SpawnError> {
    let name = entry.name;
    let file = image.find(name).ok_or(SpawnError::NotInImage)?.data;
    let spec = ChildSpec {
        name,
        file,
        badge: entry.index as u64,
        arg: entry.arg,
        cspace_bits: child::CSPACE_BITS,
        pt_pool_bits: PT_POOL_BITS,
        untyped_bits: entry.untyped_bits,
        priority: child::PRIORITY,
        cpu: 0,
        cpus: CpuSet::EMPTY,
        server: entry.serve,
        parent_endpoint: false,
        own: entry.own,
        rom: None,
        grants: &[],
        memory_grants: &[],
        notification: false,
    };
    spawn::spawn(res, parent, &spec)
}

/// Builds and starts init with its view of the boot image (the kernel's
/// frames of it, mapped, and their table) and the memory all children of
/// the config ROM `config` need (`interfaces::init`). A ROM that does
/// not parse still starts init, with only init's own memory: init reports
/// what is wrong with it.
fn start_init(
    res: &mut Resources,
    image: &BootImage<'_>,
    info: &BootInfo,
    parent: ParentCaps,
    config: &[u8],
) -> Result<(ChildCaps, u64), SpawnError> {
    let file = image.find("init").ok_or(SpawnError::NotInImage)?.data;
    // The kernel cut the image's frames by the same rule (abi::bootinfo).
    let phase = info.boot_image_phys % formats::bootimage::LARGE;
    if image.frame_count(phase) != info.rom_frames {
        println!(
            "root: the kernel made {} frames of the boot image, its regions need {}",
            info.rom_frames,
            image.frame_count(phase)
        );
        return Err(SpawnError::NotInImage);
    }
    let base = init::image_addr(phase);
    let update = image
        .find(init::UPDATE_ENTRY)
        .and_then(|e| ucore::config::Rom::parse(e.data).ok());
    // The memory rule's pieces (`ucore::plan`), which init computes too.
    let pieces = match ucore::config::Rom::parse(config) {
        Ok(rom) => ucore::plan::pool_pieces(image, &rom, update.as_ref()),
        Err(_) => alloc::vec![ucore::init::OWN_BITS],
    };
    // Never empty: init's own MiB is always a piece.
    let first = pieces.first().copied().unwrap_or(ucore::init::OWN_BITS);
    let others = pieces.get(1..).unwrap_or(&[]);
    // Init's devices (interfaces::init): all I/O ports and the ISA IRQs' handlers.
    let mut grants = alloc::vec![Grant {
        src: bootinfo::slot::IO_PORTS,
        dst: init::IO_PORTS,
        word: 0,
    }];
    grants.extend((0..bootinfo::ISA_IRQS as u8).filter_map(|irq| {
        Some(Grant {
            src: bootinfo::slot::IRQ_FIRST + info.isa_gsi(irq)?,
            dst: init::isa_irq_slot(irq),
            word: 0,
        })
    }));
    // For the platform service, if the config names one: the device
    // control capability and the PCI interrupt lines (device memory
    // follows below, made as children of root's: untyped is never copied).
    grants.push(Grant {
        src: bootinfo::slot::DEVICE_CONTROL,
        dst: init::DEVICE_CONTROL,
        word: 0,
    });
    let pci_gsis =
        child::platform::PCI_GSI_FIRST..child::platform::PCI_GSI_FIRST + child::platform::PCI_IRQS;
    grants.extend(
        pci_gsis
            .zip(init::PCI_IRQ_FIRST..)
            .filter(|&(gsi, _)| u64::from(gsi) < info.irq_count)
            .map(|(gsi, dst)| Grant {
                src: bootinfo::slot::IRQ_FIRST + gsi,
                dst,
                word: 0,
            }),
    );
    let spec = ChildSpec {
        name: "init",
        file,
        badge: 1,
        arg: base,
        cspace_bits: init::CSPACE_BITS,
        pt_pool_bits: init::PT_POOL_BITS,
        untyped_bits: first,
        priority: child::INIT_PRIORITY,
        cpu: 0,
        cpus: CpuSet::EMPTY,
        server: false,
        parent_endpoint: false,
        own: child::OwnCaps::ALL,
        rom: Some(RomView {
            table: slot::ROM_FRAMES,
            image,
            phase,
            base,
        }),
        grants: &grants,
        memory_grants: &[],
        notification: false,
    };
    let (caps, entry) = spawn::spawn(res, parent, &spec)?;
    // Init does not run before root waits for its children (it runs
    // below root's priority on root's CPU), so the pieces are there when
    // it starts.
    for (slot, &bits) in (init::POOL_FIRST..init::POOL_FIRST + init::POOL_SLOTS).zip(others) {
        res.make_at(ObjectType::Untyped, bits, in_table(caps.cspace, slot))?;
    }
    syscall::cap_copy(
        own(slot::ROM_FRAMES),
        in_table(caps.cspace, init::ROM_FRAMES),
    )
    .map_err(|error| SpawnError::Syscall {
        call: "CapCopy",
        error,
    })?;
    give_device_memory(info, caps.cspace);
    Ok((caps, entry))
}

/// Hands init all device memory root has, each block whole as a child of
/// root's (`interfaces::init::DEVICE_MEMORY_FIRST`); blocks past the slots
/// stay root's, reported.
fn give_device_memory(info: &BootInfo, cspace: u32) {
    let device = info
        .untyped()
        .iter()
        .enumerate()
        .filter(|(_, u)| u.device != 0);
    let slots = init::DEVICE_MEMORY_FIRST..init::DEVICE_MEMORY_FIRST + init::DEVICE_MEMORY_SLOTS;
    let mut left = 0;
    let mut given = slots.clone();
    for (index, u) in device {
        let Some(dst) = given.next() else {
            left += 1;
            continue;
        };
        let src = own(slot::UNTYPED_FIRST + index as u32);
        let made = syscall::retype(
            src,
            ObjectType::Untyped,
            u64::from(u.size_bits),
            in_table(cspace, dst),
            1,
        );
        if let Err(e) = made {
            println!(
                "root: cannot hand init the device memory at {:#x}: {e}",
                u.phys
            );
        }
    }
    if left > 0 {
        println!(
            "root: {left} blocks of device memory beyond init's {} slots kept",
            slots.len()
        );
    }
}

/// Receives on root's endpoint until no child that is not a server runs;
/// [`exit::INIT_FAILED`] when child `init` (its index) finished otherwise
/// than with exit code 0.
fn supervise(
    children: &mut Supervisor<'static, ChildCaps>,
    endpoint: u32,
    init: Option<usize>,
) -> i32 {
    let mut code = 0;
    while children.waiting() > 0 {
        let (badge, info, words) = match syscall::recv(own(endpoint)) {
            Ok(message) => message,
            Err(e) => {
                println!("root: Recv on its endpoint failed: {e}; giving up on its children");
                return exit::RECV_FAILED;
            }
        };
        let handled = children.handle(badge, info.label(), words);
        println!("root: {handled}");
        let is_init = handled.child.is_some_and(|c| Some(c.index) == init);
        if is_init && handled.finished_now && !matches!(handled.event, Event::Exited { code: 0 }) {
            code = exit::INIT_FAILED;
        }
        if let (true, Some(c)) = (handled.stop(), handled.child) {
            if let Err(e) = syscall::thread_suspend(own(c.caps.thread)) {
                println!("root: cannot suspend {}: {e}", c.name);
            }
        }
    }
    code
}

/// Deletes everything each child made from its memory (its other
/// threads among it: a helper thread blocked forever would keep the
/// machine running) and then its thread (and the copies made from that
/// capability, such as a test child's own), which stops the servers.
/// Init (its index `init`) has its pool in pieces: the first at
/// `child::UNTYPED`, the others from `init::POOL_FIRST` (`interfaces::init`).
fn stop_all(children: &Supervisor<'static, ChildCaps>, init: Option<usize>) {
    for c in children.children() {
        let untyped = in_table(c.caps.cspace, child::UNTYPED);
        // Best effort: a child that deleted its own untyped capability
        // keeps what it made until the machine ends (the revoke then finds
        // an empty slot, which is reported).
        // SAFETY: the child's untyped memory is mapped only in the
        // child's address space; revoking it unmaps none of root's memory.
        if let Err(e) = unsafe { syscall::cap_revoke(untyped) } {
            println!("root: cannot revoke the memory of {}: {e}", c.name);
        }
        if Some(c.index) == init {
            for slot in init::POOL_FIRST..init::POOL_FIRST + init::POOL_SLOTS {
                // Slots past the last piece are empty: nothing to revoke.
                // SAFETY: as above, init's memory is mapped only in init's
                // and its children's address spaces.
                match unsafe { syscall::cap_revoke(in_table(c.caps.cspace, slot)) } {
                    Ok(()) | Err(rt::abi::Error::EmptySlot) => {}
                    Err(e) => println!("root: cannot revoke the memory of {}: {e}", c.name),
                }
            }
        }
        let thread = own(c.caps.thread);
        // SAFETY: the thread runs in the child's address space; deleting it
        // unmaps none of root's memory.
        let result =
            unsafe { syscall::cap_revoke(thread).and_then(|()| syscall::cap_delete(thread)) };
        if let Err(e) = result {
            println!("root: cannot delete the thread of {}: {e}", c.name);
        }
    }
}
