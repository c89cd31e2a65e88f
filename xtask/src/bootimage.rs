//! Writing the boot image: the one file that carries the components (ELF
//! files) to the machine; QEMU hands it to the kernel with `-initrd`.
//!
//! This is xtask's own small writer of format version 1; the reader (and a
//! `no_std` writer) is `kcore::bootimage`, which a later cleanup lets xtask
//! use directly. The format, all integers little-endian:
//!
//! ```text
//! header, 32 bytes: magic b"PECANIMG", version u32 = 1, count u32 (<= 64),
//!                   total_size u64 (= file size), reserved u64 = 0
//! count entries, 64 bytes each: name [u8; 48] UTF-8, NUL-padded
//!                   (non-empty, unique, <= 47 bytes), offset u64 (from the
//!                   image start, a multiple of 4096), size u64
//! data: each entry's bytes at its 4096-aligned offset, entries in table
//!       order, no overlap; zero padding between them and up to the end,
//!       which is rounded up to 4096 (total_size is the padded file size)
//! ```

use std::collections::HashSet;

use anyhow::{bail, ensure, Result};

/// The first eight bytes of every boot image.
pub const MAGIC: [u8; 8] = *b"PECANIMG";
/// The format version written.
pub const VERSION: u32 = 1;
/// Most entries an image may carry.
pub const MAX_ENTRIES: usize = 64;
/// Bytes in the header.
pub const HEADER_SIZE: usize = 32;
/// Bytes in one entry-table record.
pub const ENTRY_SIZE: usize = 64;
/// Bytes in the name field of a record.
pub const NAME_FIELD: usize = 48;
/// Longest name: the field keeps at least one NUL.
pub const MAX_NAME_LEN: usize = NAME_FIELD - 1;
/// Alignment of every entry's data, and of the image's size.
pub const ALIGN: usize = 4096;

/// Packs `entries` (name, contents) in the given order into a boot image.
/// Errors name the offending entry: too many entries, an empty, too long,
/// NUL-containing or duplicate name.
pub fn write_image(entries: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    ensure!(
        entries.len() <= MAX_ENTRIES,
        "a boot image holds at most {MAX_ENTRIES} entries, not {}",
        entries.len()
    );
    let mut seen = HashSet::new();
    for (name, _) in entries {
        if name.is_empty() {
            bail!("boot image entry names must not be empty");
        }
        if name.len() > MAX_NAME_LEN {
            bail!(
                "boot image entry name `{name}` is {} bytes long; at most {MAX_NAME_LEN} fit",
                name.len()
            );
        }
        if name.contains('\0') {
            bail!("boot image entry name {name:?} contains a NUL byte");
        }
        if !seen.insert(*name) {
            bail!("boot image entry name `{name}` appears twice");
        }
    }

    let table_end = HEADER_SIZE + entries.len() * ENTRY_SIZE;
    let mut offsets = Vec::with_capacity(entries.len());
    let mut cursor = table_end;
    for (_, data) in entries {
        let offset = cursor.next_multiple_of(ALIGN);
        offsets.push(offset);
        cursor = offset + data.len();
    }
    let total_size = cursor.next_multiple_of(ALIGN);

    let mut image = vec![0u8; total_size];
    image[0..8].copy_from_slice(&MAGIC);
    image[8..12].copy_from_slice(&VERSION.to_le_bytes());
    image[12..16].copy_from_slice(&(entries.len() as u32).to_le_bytes());
    image[16..24].copy_from_slice(&(total_size as u64).to_le_bytes());
    // Bytes 24..32, reserved, stay zero.
    for (index, ((name, data), &offset)) in entries.iter().zip(&offsets).enumerate() {
        let record = HEADER_SIZE + index * ENTRY_SIZE;
        image[record..record + name.len()].copy_from_slice(name.as_bytes());
        let numbers = record + NAME_FIELD;
        image[numbers..numbers + 8].copy_from_slice(&(offset as u64).to_le_bytes());
        image[numbers + 8..numbers + 16].copy_from_slice(&(data.len() as u64).to_le_bytes());
        image[offset..offset + data.len()].copy_from_slice(data);
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn layout_follows_the_format() {
        let big = vec![0xabu8; 5000];
        let image = write_image(&[("root", b"ELF-root"), ("init", &big), ("empty", b"")]).unwrap();

        // Header.
        assert_eq!(&image[0..8], b"PECANIMG");
        assert_eq!(u32_at(&image, 8), 1);
        assert_eq!(u32_at(&image, 12), 3);
        assert_eq!(u64_at(&image, 16), image.len() as u64);
        assert_eq!(u64_at(&image, 24), 0);

        // root at the first page after the table, init at the next page
        // after root, the empty entry right after init's two pages; the
        // file ends at the next page boundary after init's data.
        let entry = |i: usize| {
            let r = HEADER_SIZE + i * ENTRY_SIZE;
            let field = &image[r..r + NAME_FIELD];
            let len = field.iter().position(|&b| b == 0).unwrap();
            assert!(field[len..].iter().all(|&b| b == 0), "NUL-padded");
            (
                std::str::from_utf8(&field[..len]).unwrap().to_string(),
                u64_at(&image, r + NAME_FIELD) as usize,
                u64_at(&image, r + NAME_FIELD + 8) as usize,
            )
        };
        assert_eq!(entry(0), ("root".to_string(), 4096, 8));
        assert_eq!(entry(1), ("init".to_string(), 8192, 5000));
        assert_eq!(entry(2), ("empty".to_string(), 16384, 0));
        assert_eq!(image.len(), 16384);
        assert_eq!(&image[4096..4104], b"ELF-root");
        assert!(image[4104..8192].iter().all(|&b| b == 0), "zero padding");
        assert_eq!(&image[8192..13192], &big[..]);
        assert!(
            image[13192..].iter().all(|&b| b == 0),
            "zero padding to the end"
        );
    }

    #[test]
    fn empty_image_is_one_page() {
        let image = write_image(&[]).unwrap();
        assert_eq!(image.len(), ALIGN);
        assert_eq!(u32_at(&image, 12), 0);
        assert_eq!(u64_at(&image, 16), ALIGN as u64);
    }

    #[test]
    fn data_ending_on_a_page_boundary_adds_no_page() {
        let page = vec![1u8; ALIGN];
        let image = write_image(&[("a", &page)]).unwrap();
        assert_eq!(image.len(), 2 * ALIGN);
    }

    #[test]
    fn a_full_table_spills_into_the_second_page() {
        let names: Vec<String> = (0..MAX_ENTRIES).map(|i| format!("c{i}")).collect();
        let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
        let image = write_image(&entries).unwrap();
        // 32 + 64 * 64 = 4128 bytes of table: the first data page is the third.
        assert_eq!(u64_at(&image, HEADER_SIZE + NAME_FIELD), 8192);
        assert_eq!(image.len(), (2 + MAX_ENTRIES) * ALIGN);
    }

    #[test]
    fn bad_entries_are_refused() {
        let err = |entries: &[(&str, &[u8])]| format!("{:#}", write_image(entries).unwrap_err());
        assert!(err(&[("", b"x")]).contains("empty"));
        let long = "n".repeat(MAX_NAME_LEN + 1);
        assert!(err(&[(&long, b"x")]).contains("48 bytes long"));
        assert!(write_image(&[(&long[1..], b"x")]).is_ok(), "47 bytes fit");
        assert!(err(&[("a\0b", b"x")]).contains("NUL"));
        assert!(err(&[("a", b"x"), ("b", b"y"), ("a", b"z")]).contains("`a` appears twice"));
        let names: Vec<String> = (0..=MAX_ENTRIES).map(|i| format!("c{i}")).collect();
        let entries: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        assert!(err(&entries).contains("at most 64 entries"));
    }
}
