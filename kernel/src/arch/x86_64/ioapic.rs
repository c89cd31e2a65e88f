//! IOAPIC: placeholder until the IOAPIC driver lands (branch `ioapic`):
//! reports no lines, so no IRQ capabilities are handed out.

pub const VECTOR_BASE: u8 = 0x30;

pub fn line_count() -> u32 {
    0
}

pub fn route_default(_gsi: u32, _vector: u8) -> Result<(), ()> {
    Err(())
}

pub fn mask(_gsi: u32) {}

pub fn unmask(_gsi: u32) {}
