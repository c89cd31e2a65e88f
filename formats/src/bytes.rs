//! Bounds-checked little-endian reads from untrusted byte slices (ACPI
//! tables, boot images, ELF files, and in `ucore` the config ROM): a read
//! past the end, or at an offset whose end overflows, is `None` — never a
//! panic.

pub fn read_u8(bytes: &[u8], at: usize) -> Option<u8> {
    bytes.get(at).copied()
}

pub fn read_u16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes(b.try_into().ok()?))
}

pub fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(b.try_into().ok()?))
}

pub fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let b = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(b.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_bounds_and_refuses_past_the_end() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(read_u8(&b, 8), Some(9));
        assert_eq!(read_u16(&b, 0), Some(0x0201));
        assert_eq!(read_u32(&b, 5), Some(0x0908_0706));
        assert_eq!(read_u64(&b, 1), Some(0x0908_0706_0504_0302));
        assert_eq!(read_u8(&b, 9), None);
        assert_eq!(read_u32(&b, 6), None);
        assert_eq!(read_u64(&b, usize::MAX), None);
    }
}
