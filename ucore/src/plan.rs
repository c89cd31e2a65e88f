//! Whether a scenario can start: the one rule that xtask's checker, root
//! and init share (docs/scenarios.md, "Memory").
//!
//! A scenario starts when root can build init and init can build every
//! component. All of that memory comes from untyped blocks served by
//! [`crate::untyped::UntypedAllocator`] (best fit, buddy splits, small
//! objects packed into 64 KiB blocks), and every object and every split
//! takes a capability slot. This module states, for a config ROM and the
//! boot image that carries it:
//!
//! - what each component's *block* is ([`block_bits`]): the smallest
//!   power of two holding its quota untyped (`ram_mib` rounded down to a
//!   power of two, [`crate::init::quota_bits`]) and everything its
//!   existence costs — capability table, address space, thread, one frame
//!   per page of its ELF segments, stack and IPC buffer, its endpoint and
//!   notification; its frames must also fit the slot range init keeps
//!   for each child (`interfaces::init::CHILD_SLOTS`);
//! - what root hands init ([`pool_pieces`]): every block of the config
//!   and of its update plus init's own MiB, as the binary pieces of that
//!   sum — no rounding of the total up to a power of two;
//! - the sequence of allocations root makes for init ([`root_steps`]),
//!   which mirrors `rt::spawn::spawn` and root's `start_init`;
//! - whether a set of untyped blocks and free slots serves a sequence
//!   ([`serve`]): the verdict. Memory: best-fit buddy allocation of
//!   power-of-two requests from power-of-two blocks succeeds exactly when,
//!   for every size 2^k, the requests of 2^k bytes or more add up to no
//!   more than the blocks of 2^k bytes or more ([`shortage`] names the
//!   first size where they do not); slots: splits are counted as the
//!   allocator makes them.
//! - the memory the kernel hands root on a QEMU q35 machine of a given
//!   size ([`RootMemory`]), a model that leaves out a little more than the
//!   kernel really takes, so that a scenario the checker accepts starts;
//!   the scenario tests `memory-*` check the model against root's log line
//!   `root: untyped blocks: ...`.
//!
//! The property test below replays the sequences on the real allocator
//! against a model of the kernel's `Retype` and requires the verdict to be
//! exactly its outcome.

use alloc::vec::Vec;
use core::fmt;

use abi::object::{MAX_UNTYPED_BITS, MIN_UNTYPED_BITS};
use abi::ObjectType;
use formats::bootimage::BootImage;
use formats::elf::LoadPlan;
use interfaces::{child, init};

use crate::config::{Component, Device, Rom};
use crate::load::{self, CHILD_LIMITS, PAGE_SIZE, STACK_SIZE};
use crate::untyped::PACK_BITS;

/// Block sizes: 2^0 .. 2^[`MAX_UNTYPED_BITS`] bytes.
const LEVELS: usize = MAX_UNTYPED_BITS as usize + 1;

/// A multiset of untyped blocks by size.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Blocks {
    count: [u64; LEVELS],
}

impl Default for Blocks {
    fn default() -> Self {
        Blocks { count: [0; LEVELS] }
    }
}

impl Blocks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `n` blocks of 2^`bits` bytes (sizes the allocator does not
    /// take, below 4 KiB or above 2^47, are left out).
    pub fn add(&mut self, bits: u32, n: u64) {
        if (MIN_UNTYPED_BITS..=MAX_UNTYPED_BITS).contains(&bits) {
            self.count[bits as usize] = self.count[bits as usize].saturating_add(n);
        }
    }

    /// Adds the naturally aligned blocks the kernel makes of the memory
    /// `start..end` (`abi::object::aligned_blocks`).
    pub fn add_range(&mut self, start: u64, end: u64) {
        for (_, bits) in abi::object::aligned_blocks(start, end, MIN_UNTYPED_BITS, MAX_UNTYPED_BITS)
        {
            self.add(bits, 1);
        }
    }

    /// Blocks of 2^`bits` bytes.
    pub fn count(&self, bits: u32) -> u64 {
        self.count.get(bits as usize).copied().unwrap_or(0)
    }

    /// `(log2 of the size, count)` for each size present, smallest first.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + Clone + '_ {
        (0..LEVELS as u32)
            .map(|b| (b, self.count(b)))
            .filter(|&(_, n)| n > 0)
    }

    /// Bytes in blocks of 2^`bits` bytes or more.
    pub fn bytes_from(&self, bits: u32) -> u64 {
        (bits..LEVELS as u32).fold(0u64, |sum, b| {
            sum.saturating_add(self.count(b).saturating_mul(1 << b))
        })
    }

    /// Bytes in all blocks.
    pub fn bytes(&self) -> u64 {
        self.bytes_from(0)
    }

    /// The largest size 2^b at which these blocks hold fewer bytes in
    /// blocks of 2^b or more than `other` does, if any: whatever `other`
    /// serves, these serve too exactly when there is none.
    pub fn short_of(&self, other: &Blocks) -> Option<u32> {
        (MIN_UNTYPED_BITS..=MAX_UNTYPED_BITS)
            .rev()
            .find(|&b| self.bytes_from(b) < other.bytes_from(b))
    }
}

impl fmt::Display for Blocks {
    /// `12:3 13:1 ...`: log2 of the size and count, smallest first (root's
    /// log line `root: untyped blocks: ...`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        BlockList(self.iter()).fmt(f)
    }
}

/// Displays `(log2 of the size, count)` pairs as [`Blocks`] does.
pub struct BlockList<I>(pub I);

impl<I, N> fmt::Display for BlockList<I>
where
    I: Iterator<Item = (u32, N)> + Clone,
    N: fmt::Display,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (bits, count)) in self.0.clone().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{bits}:{count}")?;
        }
        Ok(())
    }
}

/// What an allocation is for, for the messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    /// Root's own endpoints.
    RootEndpoints,
    /// Init's capability table, address space and thread.
    InitObjects,
    /// A piece of init's pool (the components' blocks and init's own).
    InitPool,
    /// Frames for init's image, stack and IPC buffer.
    InitFrames,
    /// Init's own endpoints.
    InitEndpoints,
    /// The block of the component at this position of the config (or of
    /// the update, after the config's).
    Block(usize),
    /// What a component's existence takes from its block.
    Existence,
    /// A component's quota untyped.
    Quota,
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Item::RootEndpoints => f.write_str("root's endpoints"),
            Item::InitObjects => f.write_str("init's capability table, address space and thread"),
            Item::InitPool => f.write_str("init's memory for the components"),
            Item::InitFrames => f.write_str("init's image and stack"),
            Item::InitEndpoints => f.write_str("init's endpoints"),
            Item::Block(i) => write!(f, "the block of component {i}"),
            Item::Existence => f.write_str("a component's existence"),
            Item::Quota => f.write_str("a component's quota"),
        }
    }
}

/// One call of the allocator, as its cost: an object of 2^`bits` bytes.
/// Objects below 2^[`PACK_BITS`] bytes are packed into shared blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// The object's size (`ObjectType::object_bits`).
    pub bits: u32,
    /// Whether the object takes a slot of the allocator's own range
    /// (`Resources::make`), not one in another table (`make_at`).
    pub own_slot: bool,
    pub what: Item,
}

/// A sequence of allocations from one allocator, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Steps {
    pub steps: Vec<Step>,
    /// Slots taken from the range without memory (fault-endpoint mints,
    /// init's transit slots).
    pub bare_slots: u64,
}

impl Steps {
    /// Appends `n` objects of `kind` (`size_bits` for sized types).
    /// Types `Retype` cannot make are ignored (none is used here).
    fn push(&mut self, kind: ObjectType, size_bits: u32, n: u64, own_slot: bool, what: Item) {
        if let Some(bits) = kind.object_bits(size_bits.into()) {
            for _ in 0..n {
                self.steps.push(Step {
                    bits,
                    own_slot,
                    what,
                });
            }
        }
    }

    /// The blocks the sequence takes (small objects as the 64 KiB blocks
    /// they are packed into, first fit as the allocator packs them) and the
    /// slots its objects take, splits not counted.
    pub fn requests(&self) -> (Vec<(u32, Item)>, u64) {
        let mut packs: Vec<u64> = Vec::new();
        let mut requests = Vec::new();
        let mut slots = self.bare_slots;
        for s in &self.steps {
            if s.bits < PACK_BITS {
                let size = 1u64 << s.bits;
                let fits = |used: &u64| used.next_multiple_of(size) + size <= 1 << PACK_BITS;
                match packs.iter_mut().find(|u| fits(u)) {
                    Some(used) => *used = used.next_multiple_of(size) + size,
                    None => {
                        packs.push(size);
                        requests.push((PACK_BITS, s.what));
                    }
                }
            } else {
                requests.push((s.bits, s.what));
            }
            slots += u64::from(s.own_slot);
        }
        (requests, slots)
    }
}

/// Why a sequence cannot be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Short {
    /// Memory: the requests of 2^`bits` bytes or more add up to `need`
    /// bytes, the blocks of that size or more to `have` (the first
    /// allocation that fails is for `what`).
    Memory {
        bits: u32,
        need: u64,
        have: u64,
        what: Item,
    },
    /// Slots: the sequence needs `need` slots (objects and splits), the
    /// range has `have`.
    Slots { need: u64, have: u64 },
}

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Short::Memory {
                bits,
                need,
                have,
                what,
            } => write!(
                f,
                "{} in blocks of {} or more are needed, {} are there (first missing: {what})",
                Size(need),
                Size(1 << bits),
                Size(have)
            ),
            Short::Slots { need, have } => write!(
                f,
                "{need} capability slots are needed (objects and splits), {have} are free"
            ),
        }
    }
}

/// Bytes, shown in the largest unit that divides them (`4 KiB`, `3 MiB`,
/// `1.5 GiB` is `1536 MiB`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if b >= 1 << shift && b.is_multiple_of(1 << shift) {
                return write!(f, "{} {unit}", b >> shift);
            }
        }
        if b >= 1 << 20 {
            return write!(f, "{:.1} MiB", b as f64 / (1u64 << 20) as f64);
        }
        write!(f, "{b} bytes")
    }
}

/// The first size where `requests` need more than `blocks` hold (the
/// condition under which best-fit buddy allocation fails), if any.
pub fn shortage(blocks: &Blocks, requests: &[(u32, Item)]) -> Option<Short> {
    (MIN_UNTYPED_BITS..LEVELS as u32).rev().find_map(|k| {
        let need = requests
            .iter()
            .filter(|r| r.0 >= k)
            .fold(0u64, |s, r| s.saturating_add(1 << r.0));
        let have = blocks.bytes_from(k);
        (need > have).then(|| Short::Memory {
            bits: k,
            need,
            have,
            what: requests
                .iter()
                .find(|r| r.0 >= k)
                .map_or(Item::InitPool, |r| r.1),
        })
    })
}

/// What remains after a sequence was served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// The blocks left untouched.
    pub left: Blocks,
    /// Slots used: objects and two per split.
    pub slots: u64,
}

/// Serves `steps` from `blocks` with `free_slots` slots, counting as the
/// allocator takes blocks (smallest fit, split in halves); the verdict.
pub fn serve(blocks: &Blocks, free_slots: u64, steps: &Steps) -> Result<Served, Short> {
    let (requests, objects) = steps.requests();
    if let Some(short) = shortage(blocks, &requests) {
        return Err(short);
    }
    let mut left = *blocks;
    let mut splits = 0u64;
    for &(bits, what) in &requests {
        let Some(have) = (bits..LEVELS as u32).find(|&b| left.count(b) > 0) else {
            // Not reached: the shortage check above is exact.
            return Err(Short::Memory {
                bits,
                need: 1 << bits,
                have: 0,
                what,
            });
        };
        left.count[have as usize] -= 1;
        for b in bits..have {
            left.count[b as usize] += 1;
        }
        splits += u64::from(have - bits);
    }
    let slots = objects + 2 * splits;
    if slots > free_slots {
        return Err(Short::Slots {
            need: slots,
            have: free_slots,
        });
    }
    Ok(Served { left, slots })
}

/// Frames `spawn` maps for the segments of the ELF file `elf` (one per
/// page of each segment); `None` for a file it refuses.
pub fn image_pages(elf: &[u8]) -> Option<u64> {
    let plan = LoadPlan::from_elf(elf, &CHILD_LIMITS).ok()?;
    plan.segments().iter().try_fold(0u64, |sum, segment| {
        Some(sum + load::page_fills(segment, elf.len()).ok()?.count() as u64)
    })
}

/// Frames of a child's stack and IPC buffer.
const STACK_FRAMES: u64 = STACK_SIZE / PAGE_SIZE + 1;

/// What `spawn` makes from a child's [`Resources`](crate) for a child with
/// a capability table of 2^`cspace_bits` slots, a page-table pool of
/// 2^`pt_pool_bits` bytes, a quota untyped of 2^`quota` bytes and `pages`
/// frames of segments; `endpoint` and `notification` for a provider's
/// endpoint (made first, by init) and an IRQ's notification.
fn spawn_steps(
    steps: &mut Steps,
    cspace_bits: u32,
    pt_pool_bits: u32,
    quota: u32,
    pages: u64,
    endpoint: bool,
    notification: bool,
) {
    let what = Item::Existence;
    if endpoint {
        steps.push(ObjectType::Endpoint, 0, 1, true, what);
    }
    steps.push(ObjectType::CapTable, cspace_bits, 1, true, what);
    steps.push(ObjectType::AddressSpace, pt_pool_bits, 1, true, what);
    steps.push(ObjectType::Thread, 0, 1, true, what);
    steps.push(ObjectType::Untyped, quota, 1, false, Item::Quota);
    steps.push(ObjectType::Frame4K, 0, pages + STACK_FRAMES, true, what);
    if notification {
        steps.push(ObjectType::Notification, 0, 1, true, what);
    }
    // The fault endpoint, minted into a slot of the range.
    steps.bare_slots += 1;
}

/// The page-table pool of init's children (`rt::spawn::PT_POOL_BITS`).
pub const CHILD_PT_POOL_BITS: u32 = 16;

/// What component `c` (whose ELF file has `pages` frames of segments)
/// takes from its block, in `spawn`'s order.
pub fn component_steps(c: &Component<'_>, pages: u64) -> Steps {
    let mut steps = Steps::default();
    spawn_steps(
        &mut steps,
        crate::init::cspace_bits(c.caps),
        CHILD_PT_POOL_BITS,
        crate::init::quota_bits(c.ram_mib),
        pages,
        c.provides().next().is_some(),
        c.devices().any(|d| matches!(d, Device::Irq(_))),
    );
    steps
}

/// log2 of the block component `c` is paid from, for an ELF file of
/// `pages` frames of segments: the smallest block its quota and existence
/// fit in (one block of 2^b serves a sequence exactly when the sequence's
/// blocks add up to at most 2^b).
pub fn block_bits(c: &Component<'_>, pages: u64) -> u32 {
    let (requests, _) = component_steps(c, pages).requests();
    let total = requests
        .iter()
        .fold(0u64, |s, r| s.saturating_add(1 << r.0));
    ceil_log2(total).clamp(MIN_UNTYPED_BITS, MAX_UNTYPED_BITS)
}

/// The smallest `b` with 2^b ≥ `n` (0 for 0 and 1).
fn ceil_log2(n: u64) -> u32 {
    match n {
        0 | 1 => 0,
        n => u64::BITS - (n - 1).leading_zeros(),
    }
}

/// The binaries of a boot image, as the rule needs them.
pub trait Images {
    /// Frames of segments of the binary `name` (0 for one the image does
    /// not have or cannot load: starting it fails for that reason).
    fn pages(&self, name: &str) -> u64;
}

impl Images for BootImage<'_> {
    fn pages(&self, name: &str) -> u64 {
        self.find(name)
            .and_then(|e| image_pages(e.data))
            .unwrap_or(0)
    }
}

/// Binaries of no pages: the least a scenario can cost, for checking a
/// scenario before its binaries are built.
pub struct NoImages;

impl Images for NoImages {
    fn pages(&self, _: &str) -> u64 {
        0
    }
}

/// The components of `rom` and then of `update`.
fn all<'r, 'a>(
    rom: &'r Rom<'a>,
    update: Option<&'r Rom<'a>>,
) -> impl Iterator<Item = Component<'a>> + 'r {
    rom.components()
        .chain(update.into_iter().flat_map(|u| u.components()))
}

/// log2 of the block of each component of `rom` and then of `update`.
pub fn blocks_of<'r>(
    images: &'r impl Images,
    rom: &'r Rom<'_>,
    update: Option<&'r Rom<'_>>,
) -> impl Iterator<Item = u32> + 'r {
    all(rom, update).map(move |c| block_bits(&c, images.pages(c.binary)))
}

/// The pieces of init's pool (log2 of each, largest first): the binary
/// digits of the sum of every block of `rom` and `update` and init's own
/// 2^[`crate::init::OWN_BITS`]. Root makes them in this order; init knows
/// them by computing the same.
pub fn pool_pieces(images: &impl Images, rom: &Rom<'_>, update: Option<&Rom<'_>>) -> Vec<u32> {
    let total = blocks_of(images, rom, update).fold(1u64 << crate::init::OWN_BITS, |s, b| {
        s.saturating_add(1 << b)
    });
    (MIN_UNTYPED_BITS..=MAX_UNTYPED_BITS)
        .rev()
        .filter(|&b| total & (1 << b) != 0)
        .collect()
}

/// Most pieces a pool can have.
pub const MAX_POOL_PIECES: usize = (MAX_UNTYPED_BITS - MIN_UNTYPED_BITS + 1) as usize;

/// The sequence root makes for init (`components/core/root`,
/// `start_init`, which calls `rt::spawn::spawn`): its endpoints, then
/// init's table, address space and thread, the first pool piece, the
/// frames of init's segments, stack and IPC buffer, then the other pool
/// pieces. The boot image costs root nothing: init maps the kernel's
/// frames of it (`abi::bootinfo`, "ROM frames"), into page tables from
/// its own pool.
pub fn root_steps(init_pages: u64, pieces: &[u32]) -> Steps {
    let mut steps = Steps::default();
    steps.push(ObjectType::Endpoint, 0, 2, true, Item::RootEndpoints);
    steps.push(
        ObjectType::CapTable,
        init::CSPACE_BITS,
        1,
        true,
        Item::InitObjects,
    );
    steps.push(
        ObjectType::AddressSpace,
        init::PT_POOL_BITS,
        1,
        true,
        Item::InitObjects,
    );
    steps.push(ObjectType::Thread, 0, 1, true, Item::InitObjects);
    let mut pieces = pieces.iter();
    if let Some(&first) = pieces.next() {
        steps.push(ObjectType::Untyped, first, 1, false, Item::InitPool);
    }
    let frames = init_pages + STACK_FRAMES;
    steps.push(ObjectType::Frame4K, 0, frames, true, Item::InitFrames);
    // Init's fault endpoint.
    steps.bare_slots += 1;
    for &piece in pieces {
        steps.push(ObjectType::Untyped, piece, 1, false, Item::InitPool);
    }
    steps
}

/// What init makes from its pool before its components' blocks: its two
/// endpoints and three bare slots (`Init::new`), then each block.
pub fn init_steps(blocks: impl Iterator<Item = u32>) -> Steps {
    let mut steps = Steps::default();
    steps.push(ObjectType::Endpoint, 0, 2, true, Item::InitEndpoints);
    steps.bare_slots += 3;
    for (i, bits) in blocks.enumerate() {
        steps.push(ObjectType::Untyped, bits, 1, true, Item::Block(i));
    }
    steps
}

/// The pool pieces as blocks.
pub fn pool_blocks(pieces: &[u32]) -> Blocks {
    let mut blocks = Blocks::new();
    for &p in pieces {
        blocks.add(p, 1);
    }
    blocks
}

/// Why a scenario cannot start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal<'a> {
    /// Root cannot build init with the memory and slots it gets.
    Root(Short),
    /// Init's own slot range cannot hold its endpoints and the blocks.
    Init(Short),
    /// Component `name`'s existence does not fit the slot range init keeps
    /// for each child (its binary has too many pages).
    Component { name: &'a str, short: Short },
}

impl fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Root(short) => write!(f, "root cannot start init: {short}"),
            Refusal::Init(short) => write!(f, "init cannot make its components' blocks: {short}"),
            Refusal::Component { name, short } => write!(
                f,
                "component \"{name}\" cannot be built in the {} slots init keeps for each \
                 component: {short}",
                init::CHILD_SLOTS
            ),
        }
    }
}

/// What a scenario costs, when it can start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Init's pool pieces (log2, largest first).
    pub pieces: Vec<u32>,
    /// Root's blocks left after init was built.
    pub left: Blocks,
}

/// The boot image a scenario is checked with.
pub struct Image<'i, I: Images> {
    /// Its binaries.
    pub binaries: &'i I,
    /// Frames of init's segments.
    pub init_pages: u64,
    /// Its length in bytes.
    pub len: u64,
}

impl<'i, 'a> Image<'i, BootImage<'a>> {
    /// `image`, `len` bytes long; `None` without a loadable init.
    pub fn of(image: &'i BootImage<'a>, len: u64) -> Option<Self> {
        let init_pages = image_pages(image.find("init")?.data)?;
        Some(Image {
            binaries: image,
            init_pages,
            len,
        })
    }
}

/// The rule: whether root, given `root_blocks` and `root_slots` free
/// slots, can build init for the config ROM `rom` (and its `update`)
/// carried by `image`, and init every component.
pub fn check<'a, I: Images>(
    root_blocks: &Blocks,
    root_slots: u64,
    image: &Image<'_, I>,
    rom: &Rom<'a>,
    update: Option<&Rom<'a>>,
) -> Result<Verdict, Refusal<'a>> {
    let binaries = image.binaries;
    for c in all(rom, update) {
        let pages = binaries.pages(c.binary);
        let bits = block_bits(&c, pages);
        let mut block = Blocks::new();
        block.add(bits, 1);
        serve(
            &block,
            u64::from(init::CHILD_SLOTS),
            &component_steps(&c, pages),
        )
        .map_err(|short| Refusal::Component {
            name: c.name,
            short,
        })?;
    }
    let pieces = pool_pieces(binaries, rom, update);
    let own_slots = u64::from(init::OWN_SLOTS_END - child::FIRST_FREE);
    serve(
        &pool_blocks(&pieces),
        own_slots,
        &init_steps(blocks_of(binaries, rom, update)),
    )
    .map_err(Refusal::Init)?;
    let served = serve(
        root_blocks,
        root_slots,
        &root_steps(image.init_pages, &pieces),
    )
    .map_err(Refusal::Root)?;
    Ok(Verdict {
        pieces,
        left: served.left,
    })
}

/// The machine and boot image whose memory the kernel hands root, for
/// [`RootMemory::blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootMemory {
    /// QEMU's `-m`, in MiB.
    pub memory_mib: u64,
    /// CPUs.
    pub smp: u32,
    /// The boot image's length in bytes (QEMU's initrd).
    pub image_len: u64,
    /// Root's ELF file's length in bytes.
    pub root_len: u64,
}

use abi::bootinfo::KERNEL_IMAGE_END_MAX;
/// What QEMU keeps above the initrd at the top of memory below 4 GiB (its
/// ACPI tables), and a page.
const FIRMWARE_TOP: u64 = 0x28000 + PAGE_SIZE;
/// The q35 machine's memory below 4 GiB when `-m` is this much or more:
/// the rest goes above 4 GiB.
const Q35_SPLIT_FROM: u64 = 0xb000_0000;
/// Root's capability table, bytes.
const ROOT_TABLE_BYTES: u64 = 1 << (abi::bootinfo::ROOT_CSPACE_BITS + abi::object::SLOT_BYTES_BITS);

/// Memory below 4 GiB of a q35 machine with more than [`Q35_SPLIT_FROM`].
const Q35_LOW: u64 = 0x8000_0000;
/// Where memory above 4 GiB starts.
const HIGH_START: u64 = 1 << 32;

impl RootMemory {
    /// The kernel's own memory at boot, at most: its frame reserve (1
    /// MiB), root's capability table ([`ROOT_TABLE_BYTES`]), the table of
    /// the boot image's frames (at most a slot per page and the header
    /// slot, rounded up to a power of two; twice that for its alignment
    /// gap), root's image and address space (twice the file's length
    /// covers segments, alignment and page tables), per-CPU stacks and
    /// tables (512 KiB each) and 2 MiB for alignment gaps.
    pub fn kernel_bound(&self) -> u64 {
        let rom_slots = (self.image_len.div_ceil(PAGE_SIZE) + 2).next_power_of_two();
        let rom_table = rom_slots << abi::object::SLOT_BYTES_BITS;
        (5 << 19)
            + ROOT_TABLE_BYTES
            + 2 * rom_table.max(PAGE_SIZE)
            + 2 * self.root_len
            + u64::from(self.smp) * (512 << 10)
    }

    /// The direct map's page tables below 4 GiB, at most: 8 KiB per GiB
    /// and 64 KiB.
    fn table_bound(&self) -> u64 {
        (64 << 10) + (self.memory_mib >> 10).saturating_add(1) * (8 << 10)
    }

    /// The memory root gets as untyped blocks, or a little less: the model takes
    /// away more than the kernel and QEMU take (the tests `memory-*`
    /// compare it with what root gets). Memory: QEMU's q35 layout — all
    /// below 4 GiB up to 2.75 GiB, else 2 GiB below and the rest from 4
    /// GiB — from [`KERNEL_IMAGE_END_MAX`] up; below the top of low memory
    /// QEMU's tables, the boot image and the kernel's page tables; the
    /// kernel's own memory ([`RootMemory::kernel_bound`]) at the top of
    /// the highest region, where its highest-fit allocator puts it.
    /// Empty ranges are `(0, 0)`.
    pub fn ranges(&self) -> [(u64, u64); 2] {
        let bytes = self.memory_mib.saturating_mul(1 << 20);
        let (low, high) = if bytes >= Q35_SPLIT_FROM {
            (Q35_LOW, bytes - Q35_LOW)
        } else {
            (bytes, 0)
        };
        let image = self.image_len.next_multiple_of(PAGE_SIZE);
        let mut low_end = low
            .saturating_sub(FIRMWARE_TOP)
            .saturating_sub(image)
            .saturating_sub(self.table_bound());
        let mut high_end = HIGH_START + high;
        if high == 0 {
            low_end = low_end.saturating_sub(self.kernel_bound());
        } else {
            high_end = high_end.saturating_sub(self.kernel_bound());
        }
        let mut ranges = [(KERNEL_IMAGE_END_MAX, low_end), (HIGH_START, high_end)];
        if high == 0 {
            ranges[1] = (0, 0);
        }
        ranges
    }

    /// The untyped blocks root gets, or a little less (see
    /// [`RootMemory::ranges`]).
    pub fn blocks(&self) -> Blocks {
        let mut blocks = Blocks::new();
        for (start, end) in self.ranges() {
            blocks.add_range(start, end);
        }
        blocks
    }

    /// Root's free slots, at least: its table less the slots below the
    /// first free one with the most untyped capabilities the kernel hands
    /// out.
    pub fn free_slots() -> u64 {
        (1u64 << abi::bootinfo::ROOT_CSPACE_BITS)
            - u64::from(abi::bootinfo::slot::UNTYPED_FIRST)
            - abi::bootinfo::MAX_UNTYPED as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{encode, ComponentSpec, CpuSet, OwnCaps, Restart, SharedEndpoint, Spec};
    use crate::slots::SlotAllocator;
    use crate::untyped::tests::Model;
    use crate::untyped::{AllocError, UntypedAllocator};
    use abi::bootinfo::UntypedInfo;
    use abi::caddr::{self, CapAddr};
    use alloc::format;
    use alloc::string::{String, ToString};
    use alloc::vec;
    use formats::test_rng::Rng;
    use std::collections::BTreeMap;

    /// Binaries by name: frames of segments.
    struct Pages(BTreeMap<String, u64>);

    impl Images for Pages {
        fn pages(&self, name: &str) -> u64 {
            self.0.get(name).copied().unwrap_or(0)
        }
    }

    /// Component `name` with an IRQ of its own (`irq`, below 16).
    fn component(
        name: &str,
        ram_mib: u32,
        caps: u32,
        provider: bool,
        irq: Option<u8>,
    ) -> ComponentSpec {
        ComponentSpec {
            name: name.into(),
            binary: name.into(),
            ram_mib,
            caps,
            priority: 90,
            cpu: 0,
            cpus: CpuSet::single(0),
            restart: Restart::Never,
            own: OwnCaps::NONE,
            shared_endpoint: SharedEndpoint::Call,
            killable: false,
            provides: if provider {
                vec!["Svc".to_string() + name]
            } else {
                vec![]
            },
            routes: vec![],
            devices: irq.map(Device::Irq).into_iter().collect(),
            config: vec![],
        }
    }

    fn rom_bytes(components: Vec<ComponentSpec>) -> Vec<u8> {
        encode(&Spec {
            parent_provides: vec![],
            components,
        })
        .unwrap()
    }

    /// The real allocator over `blocks` (address, log2 size) and the slot
    /// range `first..end`, against the kernel model.
    struct Real {
        kernel: Model,
        slots: SlotAllocator,
        untyped: UntypedAllocator,
        next_foreign: u64,
    }

    impl Real {
        fn new(blocks: &[(u64, u32)], first: u64, end: u64) -> Real {
            // The blocks' own slots lie far from the range.
            let caps: Vec<(u32, u64, u32)> = blocks
                .iter()
                .enumerate()
                .map(|(i, &(phys, bits))| ((1 << 20) + i as u32, phys, bits))
                .collect();
            let mut untyped = UntypedAllocator::new();
            for &(slot, phys, bits) in &caps {
                let info = UntypedInfo {
                    phys,
                    size_bits: bits as u8,
                    device: 0,
                    _reserved: [0; 6],
                };
                assert!(untyped.add(slot, &info));
            }
            Real {
                kernel: Model::with(&caps),
                slots: SlotAllocator::new(first, end).unwrap(),
                untyped,
                next_foreign: 0,
            }
        }

        /// `Resources::make`: a slot of the range, then the object.
        fn make(&mut self, kind: ObjectType, size_bits: u32) -> Result<(), AllocError> {
            let slot = self.slots.alloc().ok_or(AllocError::OutOfSlots)?;
            self.untyped.alloc(
                &mut self.kernel,
                &mut self.slots,
                kind,
                size_bits,
                caddr::own(slot),
            )
        }

        /// `Resources::make_at` into another table.
        fn make_at(&mut self, kind: ObjectType, size_bits: u32) -> Result<(), AllocError> {
            self.next_foreign += 1;
            let dst: CapAddr = caddr::in_table(9, self.next_foreign as u32);
            self.untyped
                .alloc(&mut self.kernel, &mut self.slots, kind, size_bits, dst)
        }

        fn slot(&mut self) -> Result<(), AllocError> {
            self.slots.alloc().map(|_| ()).ok_or(AllocError::OutOfSlots)
        }

        /// What `rt::spawn::spawn` makes, in its order (transcribed from
        /// its code, independently of [`component_steps`]).
        #[allow(clippy::too_many_arguments)]
        fn spawn(
            &mut self,
            cspace_bits: u32,
            pt_pool_bits: u32,
            untyped_bits: u32,
            segment_pages: u64,
            rom_pages: u64,
            notification: bool,
        ) -> Result<(), AllocError> {
            self.make(ObjectType::CapTable, cspace_bits)?;
            self.make(ObjectType::AddressSpace, pt_pool_bits)?;
            self.make(ObjectType::Thread, 0)?;
            self.make_at(ObjectType::Untyped, untyped_bits)?;
            for _ in 0..segment_pages + rom_pages {
                self.make(ObjectType::Frame4K, 0)?;
            }
            for _ in 0..16 {
                self.make(ObjectType::Frame4K, 0)?;
            }
            self.make(ObjectType::Frame4K, 0)?;
            if notification {
                self.make(ObjectType::Notification, 0)?;
            }
            self.slot()
        }
    }

    /// Init building component `c` in its block (`Builder::build`).
    fn replay_component(c: &Component<'_>, pages: u64, block: u32) -> Result<(), AllocError> {
        let first = u64::from(init::child_slots(0));
        let mut real = Real::new(&[(0, block)], first, first + u64::from(init::CHILD_SLOTS));
        if c.provides().next().is_some() {
            real.make(ObjectType::Endpoint, 0)?;
        }
        real.spawn(
            crate::init::cspace_bits(c.caps),
            16,
            crate::init::quota_bits(c.ram_mib),
            pages,
            0,
            c.devices().any(|d| matches!(d, Device::Irq(_))),
        )
    }

    /// Init taking over its pool and cutting the blocks (`Init::new`,
    /// `Init::launch`).
    fn replay_init(pieces: &[u32], blocks: &[u32]) -> Result<(), AllocError> {
        // Pieces at distinct addresses, each aligned to its size.
        let mut at = 0u64;
        let placed: Vec<(u64, u32)> = pieces
            .iter()
            .map(|&b| {
                let p = at.next_multiple_of(1 << b);
                at = p + (1 << b);
                (p, b)
            })
            .collect();
        let mut real = Real::new(
            &placed,
            u64::from(child::FIRST_FREE),
            u64::from(init::OWN_SLOTS_END),
        );
        real.make(ObjectType::Endpoint, 0)?;
        real.make(ObjectType::Endpoint, 0)?;
        for _ in 0..3 {
            real.slot()?;
        }
        for &b in blocks {
            real.make(ObjectType::Untyped, b)?;
        }
        Ok(())
    }

    /// Root building init (`children::run`, `start_init`).
    fn replay_root(
        ranges: &[(u64, u64)],
        slots: u64,
        init_pages: u64,
        pieces: &[u32],
    ) -> Result<(), AllocError> {
        let blocks: Vec<(u64, u32)> = ranges
            .iter()
            .flat_map(|&(s, e)| {
                abi::object::aligned_blocks(s, e, MIN_UNTYPED_BITS, MAX_UNTYPED_BITS)
            })
            .collect();
        let first = 1000u64;
        let mut real = Real::new(&blocks, first, first + slots);
        real.make(ObjectType::Endpoint, 0)?;
        real.make(ObjectType::Endpoint, 0)?;
        real.spawn(
            init::CSPACE_BITS,
            init::PT_POOL_BITS,
            pieces[0],
            init_pages,
            0,
            false,
        )?;
        for &p in &pieces[1..] {
            real.make_at(ObjectType::Untyped, p)?;
        }
        Ok(())
    }

    /// Which part failed, in the rule's order.
    #[derive(Debug, PartialEq, Eq)]
    enum Outcome {
        Starts,
        Component(String),
        Init,
        Root,
    }

    fn verdict(r: &Result<Verdict, Refusal<'_>>) -> Outcome {
        match r {
            Ok(_) => Outcome::Starts,
            Err(Refusal::Component { name, .. }) => Outcome::Component(name.to_string()),
            Err(Refusal::Init(_)) => Outcome::Init,
            Err(Refusal::Root(_)) => Outcome::Root,
        }
    }

    /// Thousands of random scenarios, machines and images: the rule's
    /// verdict is exactly what happens when root's and init's allocation
    /// sequences run on the real allocator against the kernel model.
    #[test]
    fn verdict_is_what_the_allocator_does() {
        let mut rng = Rng(0x05ee_d0f9_1a9b);
        let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
        for round in 0..3000 {
            let n = 1 + rng.below(12) as usize;
            let mut specs = Vec::new();
            let mut pages = BTreeMap::new();
            for i in 0..n {
                let name = format!("c{i}");
                let ram = match rng.below(4) {
                    0 => 1 + rng.below(4) as u32,
                    1 => 1 + rng.below(64) as u32,
                    2 => 1 << rng.below(9),
                    _ => 1 + rng.below(600) as u32,
                };
                let caps = 1 << (4 + rng.below(9));
                let image = match rng.below(8) {
                    0 => 700 + rng.below(400),
                    _ => rng.below(400),
                };
                pages.insert(name.clone(), image);
                let irq = (i != 2 && rng.below(5) == 0).then_some(i as u8);
                specs.push(component(&name, ram, caps, rng.below(3) == 0, irq));
            }
            let bytes = rom_bytes(specs);
            let rom = Rom::parse(&bytes).unwrap();
            let images = Pages(pages);
            let machine = RootMemory {
                memory_mib: match rng.below(3) {
                    0 => 12 + rng.below(120),
                    1 => 128 + rng.below(2048),
                    _ => 2048 + rng.below(8192),
                },
                smp: 1 + rng.below(8) as u32,
                image_len: rng.below(16 << 20),
                root_len: rng.below(2 << 20),
            };
            let root_slots = match rng.below(4) {
                0 => 1000 + rng.below(3000),
                _ => RootMemory::free_slots(),
            };
            let image = Image {
                binaries: &images,
                init_pages: rng.below(1200),
                len: machine.image_len,
            };
            let result = check(&machine.blocks(), root_slots, &image, &rom, None);
            let rule = verdict(&result);

            // The real thing, part by part in the rule's order.
            let mut real = Outcome::Starts;
            for c in rom.components() {
                let p = images.pages(c.binary);
                if replay_component(&c, p, block_bits(&c, p)).is_err() {
                    real = Outcome::Component(c.name.to_string());
                    break;
                }
            }
            let pieces = pool_pieces(&images, &rom, None);
            let blocks: Vec<u32> = blocks_of(&images, &rom, None).collect();
            if real == Outcome::Starts && replay_init(&pieces, &blocks).is_err() {
                real = Outcome::Init;
            }
            if real == Outcome::Starts
                && replay_root(&machine.ranges(), root_slots, image.init_pages, &pieces).is_err()
            {
                real = Outcome::Root;
            }
            assert_eq!(rule, real, "round {round}: {machine:?}, {result:?}");
            *outcomes
                .entry(format!("{real:?}").chars().take(9).collect())
                .or_default() += 1;
        }
        // The generator reaches every verdict often but init's: the pool
        // is the binary pieces of its blocks' sum, which always serve them
        // (the shortage condition holds), and its slots hold 64 blocks.
        for outcome in ["Starts", "Component", "Root"] {
            let n = outcomes.get(outcome).copied().unwrap_or(0);
            assert!(n >= 100, "{outcome}: only {n} of 3000 ({outcomes:?})");
        }
        assert_eq!(outcomes.len(), 3, "{outcomes:?}");
    }
}
