//! The memory rule (`ucore::plan`, docs/scenarios.md "Memory") applied to
//! a scenario for a machine: whether root can build init and init every
//! component with the memory and slots they will have.
//!
//! It runs twice: before anything is built, with binaries of no pages and
//! an empty boot image (so it refuses only what cannot start whatever the
//! binaries are: `Scenario::check_memory`), and on the scenario's boot
//! image once it is packed (`system::scenario_image`), with the real page
//! counts and image length. A refusal names what is short and the least
//! `memory_mib` with which the scenario starts, when there is one.

use formats::bootimage::BootImage;
use ucore::config::Rom;
use ucore::plan::{self, Image, Images, NoImages, Refusal, RootMemory};

use crate::config::Machine;
use crate::qemu;

/// The boot image the rule sees: its bytes, or none yet.
#[derive(Clone, Copy)]
pub enum Built<'a> {
    /// Before the build: binaries of no pages, an image of 0 bytes and a
    /// root of 0 bytes.
    Nothing,
    /// The packed boot image.
    Image(&'a [u8]),
}

/// Checks the config ROM `rom` (and its `update`) for `machine`; the
/// message of a refusal.
pub fn check(
    rom: &[u8],
    update: Option<&[u8]>,
    machine: Machine,
    built: Built<'_>,
) -> Result<(), String> {
    let rom = Rom::parse(rom).map_err(|e| format!("the config ROM does not parse: {e}"))?;
    let update = match update.map(Rom::parse) {
        Some(Err(e)) => return Err(format!("the config update does not parse: {e}")),
        Some(Ok(u)) => Some(u),
        None => None,
    };
    let verdict = |memory_mib: u32| -> Result<(), String> {
        match built {
            Built::Nothing => rule(
                &rom,
                update.as_ref(),
                memory_mib,
                machine.smp,
                &NoImages,
                0,
                0,
                0,
            ),
            Built::Image(bytes) => {
                let image = BootImage::parse(bytes)
                    .map_err(|e| format!("the boot image does not parse: {e}"))?;
                let init_pages = image
                    .find("init")
                    .and_then(|e| plan::image_pages(e.data))
                    .ok_or("the boot image has no loadable init")?;
                let root_len = image.find("root").map_or(0, |e| e.data.len() as u64);
                rule(
                    &rom,
                    update.as_ref(),
                    memory_mib,
                    machine.smp,
                    &image,
                    init_pages,
                    bytes.len() as u64,
                    root_len,
                )
            }
        }
    };
    let Err(why) = verdict(machine.memory_mib) else {
        return Ok(());
    };
    let least = least_memory(machine.memory_mib, |m| verdict(m).is_ok());
    let hint = match (least, built) {
        // Binaries of no pages: the least memory for any binaries.
        (Some(m), Built::Nothing) => format!("; it needs memory_mib = {m} at least"),
        (Some(m), Built::Image(_)) => format!("; it starts with memory_mib = {m}"),
        (None, _) => String::new(),
    };
    Err(format!(
        "the scenario cannot start on a machine of {} MiB: {why}{hint}; the blocks are {} \
         (docs/scenarios.md, \"Memory\")",
        machine.memory_mib,
        blocks_list(&rom, update.as_ref(), built)
    ))
}

/// The least memory with which the rule accepts `rom` (and `update`) on
/// the boot image `image` with `smp` CPUs (from the smallest machine up).
pub fn least_for_image(rom: &[u8], update: Option<&[u8]>, smp: u32, image: &[u8]) -> Option<u32> {
    let starts = |memory_mib| {
        let machine = Machine { smp, memory_mib };
        check(rom, update, machine, Built::Image(image)).is_ok()
    };
    if starts(qemu::MIN_MEMORY_MIB) {
        return Some(qemu::MIN_MEMORY_MIB);
    }
    least_memory(qemu::MIN_MEMORY_MIB, starts)
}

/// `NAME SIZE, ...` for each component's block, then init's own.
fn blocks_list(rom: &Rom<'_>, update: Option<&Rom<'_>>, built: Built<'_>) -> String {
    let sizes: Vec<u32> = match built.image() {
        Some(image) => plan::blocks_of(&image, rom, update).collect(),
        None => plan::blocks_of(&NoImages, rom, update).collect(),
    };
    let names = rom
        .components()
        .chain(update.into_iter().flat_map(|u| u.components()))
        .map(|c| c.name);
    let mut parts: Vec<String> = names
        .zip(sizes)
        .map(|(name, bits)| format!("{name} {}", plan::Size(1 << bits)))
        .collect();
    parts.push(format!(
        "init's own {}",
        plan::Size(1 << ucore::init::OWN_BITS)
    ));
    parts.join(", ")
}

impl<'a> Built<'a> {
    /// The parsed image, if there is one and it parses.
    fn image(self) -> Option<BootImage<'a>> {
        match self {
            Built::Nothing => None,
            Built::Image(bytes) => BootImage::parse(bytes).ok(),
        }
    }
}

/// The rule for a machine of `memory_mib` MiB and `smp` CPUs.
#[allow(clippy::too_many_arguments)]
fn rule(
    rom: &Rom<'_>,
    update: Option<&Rom<'_>>,
    memory_mib: u32,
    smp: u32,
    binaries: &impl Images,
    init_pages: u64,
    image_len: u64,
    root_len: u64,
) -> Result<(), String> {
    let machine = RootMemory {
        memory_mib: memory_mib.into(),
        smp,
        image_len,
        root_len,
    };
    let image = Image {
        binaries,
        init_pages,
        len: image_len,
    };
    plan::check(
        &machine.blocks(),
        RootMemory::free_slots(),
        &image,
        rom,
        update,
    )
    .map(drop)
    .map_err(|refusal: Refusal<'_>| refusal.to_string())
}

/// The line root logs with the untyped blocks it got.
const ROOT_BLOCKS: &str = "root: untyped blocks: ";

/// Checks root's line `root: untyped blocks: BITS:COUNT ...` in `serial`
/// against the rule's model for `machine` and its boot image: for every
/// size, root must hold at least as many bytes in blocks of that size or
/// more as the model says (so whatever the rule accepts, root can build).
pub fn check_root_blocks(serial: &str, machine: &qemu::Machine) -> Result<(), String> {
    let line = serial
        .lines()
        .find_map(|l| l.trim_end().strip_prefix(ROOT_BLOCKS))
        .ok_or_else(|| format!("no line `{}...` in the output", ROOT_BLOCKS.trim_end()))?;
    let mut actual = plan::Blocks::new();
    for pair in line.split_whitespace() {
        let parsed = pair
            .split_once(':')
            .and_then(|(b, n)| Some((b.parse::<u32>().ok()?, n.parse::<u64>().ok()?)));
        let (bits, count) = parsed.ok_or_else(|| format!("bad block `{pair}` in `{line}`"))?;
        actual.add(bits, count);
    }
    let image_path = machine
        .initrd
        .as_ref()
        .ok_or("the test boots no boot image")?;
    let bytes = std::fs::read(image_path).map_err(|e| format!("reading the boot image: {e}"))?;
    let image =
        BootImage::parse(&bytes).map_err(|e| format!("the boot image does not parse: {e}"))?;
    let model = RootMemory {
        memory_mib: machine.memory_mib.into(),
        smp: machine.smp,
        image_len: bytes.len() as u64,
        root_len: image.find("root").map_or(0, |e| e.data.len() as u64),
    }
    .blocks();
    if let Some(bits) = actual.short_of(&model) {
        return Err(format!(
            "root got {} in blocks of {} or more, the memory rule's model of a {} MiB machine \
             counts on {} (model: {model}; root: {actual}): the model \
             (ucore::plan::RootMemory) must take away more",
            plan::Size(actual.bytes_from(bits)),
            plan::Size(1 << bits),
            machine.memory_mib,
            plan::Size(model.bytes_from(bits))
        ));
    }
    Ok(())
}

/// The least memory above `refused` MiB (up to `qemu::MAX_MEMORY_MIB`)
/// for which `starts` holds, if any: a binary search, as more memory never
/// gives root fewer bytes in blocks of any size.
fn least_memory(refused: u32, starts: impl Fn(u32) -> bool) -> Option<u32> {
    let (mut low, mut high) = (refused, qemu::MAX_MEMORY_MIB);
    if !starts(high) {
        return None;
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if starts(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Some(high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_memory_searches_upwards() {
        assert_eq!(least_memory(256, |m| m >= 300), Some(300));
        assert_eq!(least_memory(256, |_| false), None);
        assert_eq!(least_memory(256, |m| m >= 257), Some(257));
    }
}
