//! Starting the root task: its objects, its capabilities, its memory.
//!
//! The boot image (a PVH boot module, `formats::bootimage` format) carries the
//! components as ELF files. The kernel loads only `root`; root loads the
//! rest. Every malformed input (image or ELF) is refused with a message that
//! says what is wrong; nothing here can crash the kernel.
//!
//! Root's thread, capability table and address space are made from frames
//! the kernel takes before it hands out the rest; their capabilities are
//! derivation-tree roots, so nothing can revoke them. Root gets (see
//! `abi::bootinfo`): its own thread, capability space and address space,
//! every I/O port, an IRQ handler capability per IOAPIC line, every free
//! frame as untyped memory (naturally aligned power-of-two blocks), the
//! boot image mapped read-only, the boot image's own memory as read-only
//! frame capabilities in a table of their own (`abi::bootinfo`, "ROM
//! frames": never copied; 2 MiB frames where the image's physical layout
//! allows) and the boot-information page.

use core::fmt;

use abi::bootinfo::{self, slot, BootInfo as RootBootInfo, UntypedInfo};
use abi::{ObjectType, Rights};
use formats::bootimage::{self, RootError, ROOT_STACK_BYTES};
use kcore::cap::{self, Capability, SlotId};
use kcore::phys::{PhysRange, PAGE_SIZE};
use kcore::typed::{CapTableCap, FrameCap, IoPortsCap, UntypedCap};

use crate::mm;
use crate::object;
use crate::pvh::BootInfo;
use crate::thread::{self, ThreadRef};
use crate::token::{Kernel, Objects};
use crate::vspace;

/// Root's stack: its segments end below it (`formats::bootimage::ROOT_LIMITS`).
const STACK_PAGES: u64 = ROOT_STACK_BYTES / PAGE_SIZE;
/// log2 of root's capability-table slots.
const ROOT_CSPACE_BITS: u64 = abi::bootinfo::ROOT_CSPACE_BITS as u64;
/// log2 of root's page-table pool.
const ROOT_PT_POOL_BITS: u64 = 20;
/// Frames kept back for the kernel's own later needs (MMIO page tables).
const KERNEL_RESERVE_PAGES: u64 = 256;

#[derive(Debug)]
pub enum LoadError {
    NoBootImage,
    MisalignedBootImage(u64),
    /// The image, its `root` entry or root's ELF file is refused.
    Root(RootError),
    OutOfMemory,
    Map(abi::Error),
    Cap(cap::CapError),
    /// The boot image needs more frames than a capability table holds.
    TooManyRomFrames(u64),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Self::NoBootImage => write!(f, "no boot image (QEMU -initrd) was passed"),
            Self::MisalignedBootImage(a) => {
                write!(
                    f,
                    "the boot image at {a:#x} does not start on a page boundary"
                )
            }
            Self::Root(e) => write!(f, "{e}"),
            Self::OutOfMemory => write!(f, "out of memory while loading root"),
            Self::Map(e) => write!(f, "mapping root's memory failed: {e}"),
            Self::Cap(e) => write!(f, "setting up root's capabilities failed: {e}"),
            Self::TooManyRomFrames(n) => write!(
                f,
                "the boot image needs {n} frames, more than the {} a capability table holds",
                bootinfo::MAX_ROM_FRAMES
            ),
        }
    }
}

impl From<cap::CapError> for LoadError {
    fn from(e: cap::CapError) -> Self {
        Self::Cap(e)
    }
}

/// The boot image's physical range (boot module 0).
fn boot_image_range(boot: &BootInfo) -> Option<PhysRange> {
    let module = boot.modules().first()?;
    Some(PhysRange::new(module.start, module.end))
}

/// Zeroed, contiguous, naturally aligned frames from the kernel's pool.
fn alloc_frames(pages: u64) -> Result<u64, LoadError> {
    let mut guard = mm::FRAMES.lock();
    let frames = guard.as_mut().ok_or(LoadError::OutOfMemory)?;
    let phys = frames
        .alloc(pages, pages)
        .map_err(|_| LoadError::OutOfMemory)?;
    // SAFETY: the frames were just taken from the free pool; RAM is in the
    // direct map.
    unsafe {
        core::ptr::write_bytes(
            mm::phys_to_virt(phys) as *mut u8,
            0,
            (pages * PAGE_SIZE) as usize,
        )
    };
    Ok(phys)
}

/// Maps a page into root's address space `space` (made by `load_root`).
fn map_page(
    objects: &mut Objects,
    space: u64,
    vaddr: u64,
    phys: u64,
    writable: bool,
    executable: bool,
) -> Result<(), LoadError> {
    let frame = FrameCap {
        phys,
        large: false,
        mapping: None,
    };
    let attr = abi::map::MapAttr {
        writable,
        executable,
        cache: abi::map::Cache::WriteBack,
    };
    // SAFETY: `space` is root's address space, made by `load_root`.
    unsafe { vspace::map(objects, space, &frame, vaddr, attr) }
        .map(|_| ())
        .map_err(LoadError::Map)
}

/// Loads `root` from the boot image and creates its first thread, ready to
/// run.
pub fn load_root(k: &mut Kernel, boot: &BootInfo, cpu_count: u64) -> Result<ThreadRef, LoadError> {
    let image_range = boot_image_range(boot).ok_or(LoadError::NoBootImage)?;
    if image_range.start % PAGE_SIZE != 0 {
        return Err(LoadError::MisalignedBootImage(image_range.start));
    }
    let image_len = usize::try_from(image_range.len()).map_err(|_| LoadError::OutOfMemory)?;
    // SAFETY: boot modules lie in usable RAM (covered by the direct map),
    // and mm::init reserved them, so nothing else writes to them.
    let bytes = unsafe {
        core::slice::from_raw_parts(mm::phys_to_virt(image_range.start) as *const u8, image_len)
    };
    let (image, root, plan) = bootimage::root_plan(bytes).map_err(LoadError::Root)?;
    let phase = image_range.start % bootimage::LARGE;
    let rom_frames = image.frame_count(phase);
    if rom_frames > bootinfo::MAX_ROM_FRAMES {
        return Err(LoadError::TooManyRomFrames(rom_frames));
    }

    // The three objects.
    let space = alloc_frames((1 << (ROOT_PT_POOL_BITS + 1)) / PAGE_SIZE)?;
    // SAFETY (three objects): fresh, zeroed, naturally aligned frames of
    // the objects' sizes from the frame allocator, used by nothing else.
    unsafe { vspace::init(&mut k.objects, space, ROOT_PT_POOL_BITS) };
    // SAFETY: the address space just made.
    unsafe { vspace::note_cpu(&mut k.objects, space, 0) };
    let table =
        alloc_frames((1 << (ROOT_CSPACE_BITS + abi::object::SLOT_BYTES_BITS as u64)) / PAGE_SIZE)?;
    // SAFETY: see above.
    unsafe { object::init_object(k, ObjectType::CapTable, table, ROOT_CSPACE_BITS) };
    let tcb = alloc_frames(1)?;
    // SAFETY: see above.
    unsafe { object::init_object(k, ObjectType::Thread, tcb, 0) };

    // Memory: segments, stack, IPC buffer, boot info, boot image.
    for segment in plan.segments() {
        let (first, end) = segment.page_range();
        let mut page = first;
        while page < end {
            let frame = alloc_frames(1)?;
            copy_segment_bytes(root.data, segment, page, frame);
            map_page(
                &mut k.objects,
                space,
                page,
                frame,
                segment.writable,
                segment.executable,
            )?;
            page += PAGE_SIZE;
        }
    }
    for i in 1..=STACK_PAGES {
        map_page(
            &mut k.objects,
            space,
            abi::MAIN_STACK_TOP - i * PAGE_SIZE,
            alloc_frames(1)?,
            true,
            false,
        )?;
    }
    map_page(
        &mut k.objects,
        space,
        abi::MAIN_IPC_BUFFER_ADDR,
        alloc_frames(1)?,
        true,
        false,
    )?;
    let info_frame = alloc_frames(1)?;
    map_page(
        &mut k.objects,
        space,
        bootinfo::BOOT_INFO_ADDR,
        info_frame,
        false,
        false,
    )?;
    let mut offset = 0;
    while offset < image_range.len() {
        map_page(
            &mut k.objects,
            space,
            bootinfo::BOOT_IMAGE_ADDR + offset,
            image_range.start + offset,
            false,
            false,
        )?;
        offset += PAGE_SIZE;
    }

    // The rest of the image's last page is zero: a ROM frame shows
    // nothing past the image.
    let tail = image_range.end % PAGE_SIZE;
    if tail != 0 {
        // SAFETY: the last page of the boot module is reserved with it
        // (mm::init reserves every page the module touches) and in the
        // direct map; nothing has read past the image's end.
        unsafe {
            core::ptr::write_bytes(
                mm::phys_to_virt(image_range.end) as *mut u8,
                0,
                (PAGE_SIZE - tail) as usize,
            )
        };
    }

    // Capabilities.
    let slot_at = |index: u32| {
        SlotId(mm::phys_to_virt(table) + (u64::from(index) << abi::object::SLOT_BYTES_BITS))
    };
    let table_cap = CapTableCap::new(table, ROOT_CSPACE_BITS as u32).to_cap(Rights::ALL);
    cap::insert_root(
        k,
        slot_at(slot::THREAD),
        Capability::new(ObjectType::Thread, tcb, Rights::ALL),
    )?;
    cap::insert_root(k, slot_at(slot::CSPACE), table_cap)?;
    cap::insert_root(
        k,
        slot_at(slot::VSPACE),
        Capability::new(ObjectType::AddressSpace, space, Rights::ALL),
    )?;
    let ports = IoPortsCap::ALL.to_cap(Rights::ALL);
    cap::insert_root(k, slot_at(slot::IO_PORTS), ports)?;
    let control = Capability::new(ObjectType::DeviceControl, 0, Rights::ALL);
    cap::insert_root(k, slot_at(slot::DEVICE_CONTROL), control)?;
    rom_frame_caps(
        k,
        &image,
        image_range.start,
        rom_frames,
        slot_at(slot::ROM_FRAMES),
    )?;
    let irq_count = crate::irq::line_count().min(u64::from(slot::IRQ_MAX));
    for line in 0..irq_count {
        let irq = Capability::new(ObjectType::IrqHandler, line, Rights::ALL);
        cap::insert_root(k, slot_at(slot::IRQ_FIRST + line as u32), irq)?;
    }

    // SAFETY: the thread made above.
    let thread = unsafe { object::thread_at(tcb) };
    let t = k.threads.get_mut(thread);
    t.set_name("root");
    trace!(name(t.id, formats::trace::pack_label(b"root")));
    crate::exit::set_root(t.id);
    t.priority = abi::bootinfo::ROOT_PRIORITY;
    // Root may use every CPU online (indices 0 ..< cpu_count).
    t.cpus = if cpu_count >= 64 {
        u64::MAX
    } else {
        (1 << cpu_count) - 1
    };
    t.ipc_buffer = abi::MAIN_IPC_BUFFER_ADDR;
    *t.frame() = thread::initial_frame(plan.entry(), abi::MAIN_STACK_TOP, bootinfo::BOOT_INFO_ADDR);
    for (own, src) in [
        (object::slot_id(&t.cspace), slot::CSPACE),
        (object::slot_id(&t.vspace), slot::VSPACE),
    ] {
        cap::copy(k, slot_at(src), own)?;
        if let Some(c) = k.slot(own).cap {
            object::add_ref(k, &c);
        }
    }

    // Boot information, then every remaining frame as untyped memory.
    // SAFETY: a fresh, zeroed frame owned by this function, direct-mapped;
    // BootInfo fits in a page (checked in abi) and is plain old data.
    let info = unsafe { &mut *(mm::phys_to_virt(info_frame) as *mut RootBootInfo) };
    info.magic = bootinfo::BOOT_INFO_MAGIC;
    info.cpu_count = cpu_count;
    info.cspace_bits = ROOT_CSPACE_BITS;
    info.boot_image_len = image_range.len();
    info.boot_image_phys = image_range.start;
    info.rom_frames = rom_frames;
    info.irq_count = irq_count;
    for (irq, gsi) in info.isa_irq_gsi.iter_mut().enumerate() {
        *gsi = match crate::arch::ioapic::isa_irq_to_gsi(irq as u8) {
            Ok(line) if u64::from(line.gsi) < irq_count => line.gsi as u8,
            _ => bootinfo::NO_GSI,
        };
    }
    let cmdline = boot.cmdline().as_bytes();
    let n = cmdline.len().min(bootinfo::MAX_CMDLINE);
    info.cmdline[..n].copy_from_slice(&cmdline[..n]);
    info.cmdline_len = n as u64;

    let mut index = 0usize;
    let mut lost = 0u64;
    let ram = untyped_blocks().map(|block| (block, false));
    let device = device_blocks(boot).map(|block| (block, true));
    for ((start, bits), is_device) in ram.chain(device) {
        if index == bootinfo::MAX_UNTYPED {
            if !is_device {
                lost += 1 << bits;
            }
            continue;
        }
        let c = UntypedCap::new(start, bits, is_device).to_cap(Rights::ALL);
        cap::insert_root(k, slot_at(slot::UNTYPED_FIRST + index as u32), c)?;
        info.untyped[index] = UntypedInfo {
            phys: start,
            size_bits: bits as u8,
            device: u8::from(is_device),
            _reserved: [0; 6],
        };
        index += 1;
    }
    info.untyped_count = index as u64;
    info.first_free_slot = u64::from(slot::UNTYPED_FIRST) + index as u64;
    let (mut ram, mut device) = (0u64, 0u64);
    for u in info.untyped() {
        *if u.device == 0 { &mut ram } else { &mut device } += 1u64 << u.size_bits;
    }
    crate::kprintln!(
        "kernel: root gets {} MiB of untyped memory and {} MiB of device memory in {index} capabilities",
        ram >> 20,
        device >> 20
    );
    if lost > 0 {
        crate::kprintln!(
            "kernel: warning: {} KiB of memory not handed out (too many pieces)",
            lost >> 10
        );
    }
    Ok(thread)
}

/// Makes the table of the boot image's `count` frames (`abi::bootinfo`,
/// "ROM frames") at `phys` into root's slot `dst`: read-only frame
/// capabilities of the image's own memory, cut as `formats::bootimage`
/// says, slot `1 + i` holding frame `i`.
fn rom_frame_caps(
    k: &mut Kernel,
    image: &bootimage::BootImage<'_>,
    phys: u64,
    count: u64,
    dst: SlotId,
) -> Result<(), LoadError> {
    let bits = (u64::BITS - count.leading_zeros()).max(abi::object::MIN_CAP_TABLE_BITS);
    let bytes = 1u64 << (bits + abi::object::SLOT_BYTES_BITS);
    let table = alloc_frames(bytes.div_ceil(PAGE_SIZE))?;
    // SAFETY: fresh, zeroed, naturally aligned frames of at least the
    // table's size from the frame allocator, used by nothing else.
    unsafe { object::init_object(k, ObjectType::CapTable, table, u64::from(bits)) };
    cap::insert_root(k, dst, CapTableCap::new(table, bits).to_cap(Rights::ALL))?;
    let phase = phys % bootimage::LARGE;
    let mut index = 1u64;
    for region in image.regions() {
        let mut i = 0;
        while let Some((offset, large)) = region.frame(phase, i) {
            let frame = FrameCap {
                phys: phys + region.offset + offset,
                large,
                mapping: None,
            };
            let slot = SlotId(mm::phys_to_virt(table) + (index << abi::object::SLOT_BYTES_BITS));
            cap::insert_root(k, slot, frame.to_cap(Rights::READ))?;
            index += 1;
            i += 1;
        }
    }
    Ok(())
}

/// Takes every free frame but a small kernel reserve, as aligned blocks.
fn untyped_blocks() -> impl Iterator<Item = (u64, u32)> {
    let mut guard = mm::FRAMES.lock();
    // The taken ranges are an owned list (no heap), independent of the lock.
    let ranges = guard.as_mut().map(|frames| {
        let reserve = frames.alloc(KERNEL_RESERVE_PAGES, 1).ok();
        let taken = frames.take_all();
        if let Some(start) = reserve {
            let _ = frames.free(PhysRange::new(
                start,
                start + KERNEL_RESERVE_PAGES * PAGE_SIZE,
            ));
        }
        taken
    });
    ranges.into_iter().flatten().flat_map(|r| {
        kcore::phys::aligned_blocks(
            r,
            abi::object::MIN_UNTYPED_BITS,
            abi::object::MAX_UNTYPED_BITS,
        )
    })
}

/// Where device memory below 4 GiB ends for root: the I/O APIC, HPET, local
/// APIC and firmware live above, and the kernel drives those itself.
const DEVICE_WINDOW_END: u64 = 0xfec0_0000;

/// The physical address space between the end of RAM below 4 GiB and
/// [`DEVICE_WINDOW_END`] that is not RAM or ACPI memory — where PCI devices'
/// memory (and the PCI configuration window) lives — as aligned blocks for
/// device untyped memory.
fn device_blocks(boot: &BootInfo) -> impl Iterator<Item = (u64, u32)> + '_ {
    use kcore::phys::RegionKind;
    let is_memory = |kind: RegionKind| {
        matches!(
            kind,
            RegionKind::Usable | RegionKind::AcpiReclaimable | RegionKind::AcpiNvs
        )
    };
    let top_of_ram = boot
        .memory_map
        .regions()
        .filter(|(r, kind)| is_memory(*kind) && r.start < DEVICE_WINDOW_END)
        .map(|(r, _)| r.end)
        .max()
        .unwrap_or(0);
    let start = top_of_ram.div_ceil(PAGE_SIZE) * PAGE_SIZE;
    // The memory above the start, in address order (the memory map keeps
    // its regions sorted), then the window's end; the gaps between them.
    let memory = boot
        .memory_map
        .regions()
        .filter(move |(r, kind)| is_memory(*kind) && r.end > start && r.start < DEVICE_WINDOW_END)
        .map(|(r, _)| r)
        .chain(core::iter::once(PhysRange::new(
            DEVICE_WINDOW_END,
            DEVICE_WINDOW_END,
        )));
    memory
        .scan(start, |start, m| {
            let gap =
                (m.start > *start).then(|| PhysRange::new(*start, m.start.min(DEVICE_WINDOW_END)));
            *start = (*start).max(m.end.div_ceil(PAGE_SIZE) * PAGE_SIZE);
            Some(gap)
        })
        .flatten()
        .flat_map(|gap| {
            kcore::phys::aligned_blocks(
                gap,
                abi::object::MIN_UNTYPED_BITS,
                abi::object::MAX_UNTYPED_BITS,
            )
        })
}

/// Copies the part of the segment's file bytes that falls into the user
/// page at `page` into `frame` (already zeroed, so the rest is bss).
fn copy_segment_bytes(file: &[u8], segment: &formats::elf::Segment, page: u64, frame: u64) {
    let file_start = segment.vaddr;
    let file_end = segment.vaddr + segment.file_size; // checked by LoadPlan
    let start = page.max(file_start);
    let end = (page + PAGE_SIZE).min(file_end);
    if start >= end {
        return;
    }
    let offset_in_file = (segment.file_offset + (start - file_start)) as usize;
    let len = (end - start) as usize;
    let Some(src) = file.get(offset_in_file..offset_in_file + len) else {
        return; // impossible: LoadPlan checked the file bounds
    };
    // SAFETY: `frame` is a fresh frame owned by the loader, direct-mapped;
    // start - page + len <= PAGE_SIZE by construction.
    unsafe {
        core::ptr::copy_nonoverlapping(
            src.as_ptr(),
            (mm::phys_to_virt(frame) + (start - page)) as *mut u8,
            len,
        );
    }
}
