//! Packing the boot image: the one file that carries the components (ELF
//! files) to the machine; QEMU hands it to the kernel with `-initrd`.
//!
//! The format has one definition, `formats::bootimage`, whose parser the
//! kernel uses; xtask packs with the same crate's writer and checks the
//! result with the same parser, so the two sides cannot drift apart.

use anyhow::{anyhow, Context, Result};
use formats::bootimage::{image_size, write_image as write_into, BootImage};

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
    fn bad_entries_are_refused_with_the_names() {
        let err = write_image(&[("root", b"a"), ("root", b"b")]).unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("root, root"), "{text}");
        assert!(write_image(&[("", b"a")]).is_err());
        let long = "x".repeat(60);
        assert!(write_image(&[(long.as_str(), b"a")]).is_err());
    }
}
