//! Packing the boot image: the one file that carries the components (ELF
//! files) to the machine; QEMU hands it to the kernel with `-initrd`.
//!
//! The format has one definition, `formats::bootimage`, whose parser the
//! kernel uses; xtask packs with the same crate's writer and checks the
//! result with the same parser, so the two sides cannot drift apart.

use anyhow::{anyhow, Context, Result};
use formats::bootimage::{image_size, write_image as write_into, BootImage, LARGE};

/// How far below the top of memory below 4 GiB QEMU ends a page-aligned
/// initrd: its ACPI tables (`acpi_data_size`, 0x28000 bytes) are above
/// it, and it loads the initrd at `(initrd_max - size) & !4095` with
/// `initrd_max` one byte below the tables — a page lower for a size that
/// is whole pages (`ucore::plan` models the same gap, `FIRMWARE_TOP`;
/// measured: a 2 MiB-aligned image is loaded 2 MiB aligned).
pub const QEMU_INITRD_GAP: u64 = 0x28000 + 4096;

/// Pads `image` with zeros (past its `total_size`, which the format
/// allows) to whole pages such that QEMU, which loads it to end
/// [`QEMU_INITRD_GAP`] below a 2 MiB-aligned top of memory, loads it at a
/// 2 MiB boundary — when it has
/// an entry of 2 MiB or more (written 2 MiB aligned in the image): then
/// that entry is 2 MiB frames but for its last partial 2 MiB
/// (`formats::bootimage`, "Frames"), a slot each rather than one per
/// page. A padding of less than 2 MiB; an image without such an entry is
/// left alone. Nothing depends on it but the frames' count.
pub fn pad_for_large_frames(image: &mut Vec<u8>) {
    let Ok(parsed) = BootImage::parse(image) else {
        return;
    };
    if !parsed.entries().any(|e| e.data.len() as u64 >= LARGE) {
        return;
    }
    let len = (image.len() as u64).next_multiple_of(4096);
    let rest = (len + QEMU_INITRD_GAP) % LARGE;
    let padded = if rest == 0 { len } else { len + LARGE - rest };
    image.resize(padded as usize, 0);
}

/// Packs `entries` (name, contents) in the given order into a boot image.
/// Errors name the offending entry (too many, empty, too long, NUL-containing
/// or duplicate names).
pub fn write_image(entries: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    let names = || {
        entries
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let sizes: Vec<(&str, u64)> = entries.iter().map(|(n, d)| (*n, d.len() as u64)).collect();
    let size = image_size(&sizes)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("sizing the boot image for [{}]", names()))?;
    let mut image = vec![0u8; size];
    let written = write_into(entries, &mut image)
        .map_err(|e| anyhow!("{e}"))
        .with_context(|| format!("packing the boot image for [{}]", names()))?;
    image.truncate(written);
    BootImage::parse(&image)
        .map_err(|e| anyhow!("{e}"))
        .context("the packed boot image does not parse (a bug in formats::bootimage)")?;
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_image_parses_back_with_every_entry() {
        let root = vec![0x7fu8; 5000];
        let other = b"hello".to_vec();
        let image = write_image(&[("root", &root), ("other", &other)]).unwrap();
        let parsed = BootImage::parse(&image).unwrap();
        let entries: Vec<_> = parsed
            .entries()
            .map(|e| (e.name, e.data.to_vec()))
            .collect();
        assert_eq!(entries, vec![("root", root), ("other", other)]);
        assert_eq!(parsed.find("other").unwrap().offset % 4096, 0);
    }

    #[test]
    fn images_with_large_entries_are_padded_for_qemus_placement() {
        let big = vec![1u8; LARGE as usize];
        let mut image = write_image(&[("root", b"r"), ("big", &big)]).unwrap();
        let total = image.len();
        pad_for_large_frames(&mut image);
        assert_eq!((image.len() as u64 + QEMU_INITRD_GAP) % LARGE, 0);
        assert!(image.len() - total < LARGE as usize);
        let parsed = BootImage::parse(&image).unwrap();
        assert_eq!(parsed.len(), total);
        // QEMU's placement below 256 MiB: a 2 MiB boundary.
        let top = 256u64 << 20;
        let initrd_max = top - 0x28000 - 1;
        assert_eq!(((initrd_max - image.len() as u64) & !4095) % LARGE, 0);
        let mut small = write_image(&[("root", b"r")]).unwrap();
        let before = small.clone();
        pad_for_large_frames(&mut small);
        assert_eq!(small, before);
    }

    #[test]
    fn bad_entries_are_refused_with_the_names() {
        let err = write_image(&[("root", b"a"), ("root", b"b")]).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("root, root"), "{text}");
        assert!(write_image(&[("", b"a")]).is_err());
        let long = "x".repeat(60);
        assert!(write_image(&[(long.as_str(), b"a")]).is_err());
    }
}
