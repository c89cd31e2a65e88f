//! A PCI bus behind configuration mechanism 1 (ports 0xcf8/0xcfc): a
//! host bridge at 00:00.0 and the VMM's devices, each a 256-byte type-0
//! configuration space with I/O BARs that Linux sizes and places the
//! usual way (write all ones, read back the size mask). The DSDT
//! describes no root bridge, so Linux scans bus 0 by probing
//! (`pci=lastbus=1` on its command line) and, finding no `_PRT`, takes
//! each device's interrupt from its Interrupt Line register — an ISA IRQ
//! of the 8259s, as a PC BIOS would have routed it.

use alloc::vec::Vec;

/// A device's configuration space and where its I/O BAR is.
#[derive(Clone, Debug)]
pub struct Function {
    config: [u8; 256],
    /// Per BAR: its size in bytes (a power of two), 0: none. I/O BARs
    /// only (bit 0 set in the register).
    bar_sizes: [u32; 6],
}

impl Function {
    /// A function with `vendor`, `device`, class code (class, subclass,
    /// interface), `subsystem` (vendor, id), its interrupt on `irq`
    /// (pin A; none if `None`).
    pub fn new(
        vendor: u16,
        device: u16,
        class: [u8; 3],
        subsystem: (u16, u16),
        irq: Option<u8>,
    ) -> Function {
        let mut c = [0u8; 256];
        c[0..2].copy_from_slice(&vendor.to_le_bytes());
        c[2..4].copy_from_slice(&device.to_le_bytes());
        // Status: none of the capabilities list.
        c[9] = class[2];
        c[10] = class[1];
        c[11] = class[0];
        c[0x2c..0x2e].copy_from_slice(&subsystem.0.to_le_bytes());
        c[0x2e..0x30].copy_from_slice(&subsystem.1.to_le_bytes());
        if let Some(line) = irq {
            c[0x3c] = line;
            c[0x3d] = 1; // INTA#
        }
        Function {
            config: c,
            bar_sizes: [0; 6],
        }
    }

    /// Gives BAR `n` an I/O range of `size` bytes (a power of two, at
    /// least 4) at `base` (aligned to `size`).
    pub fn with_io_bar(mut self, n: usize, size: u32, base: u16) -> Function {
        self.bar_sizes[n] = size;
        let at = 0x10 + 4 * n;
        self.config[at..at + 4].copy_from_slice(&(u32::from(base) | 1).to_le_bytes());
        self
    }

    /// Where I/O BAR `n` is now, if I/O decoding is on.
    pub fn io_bar(&self, n: usize) -> Option<(u16, u32)> {
        let size = self.bar_sizes[n];
        if size == 0 || self.config[4] & 1 == 0 {
            return None;
        }
        let at = 0x10 + 4 * n;
        let v = u32::from_le_bytes(self.config[at..at + 4].try_into().ok()?);
        Some(((v & 0xfffc) as u16, size))
    }

    /// The Interrupt Line register (what the guest set, or the VMM's).
    pub fn irq(&self) -> u8 {
        self.config[0x3c]
    }

    fn read(&self, offset: u8, width: u8) -> u32 {
        let o = usize::from(offset);
        (0..usize::from(width)).fold(0u32, |v, i| {
            v | u32::from(self.config[(o + i) & 0xff]) << (8 * i)
        })
    }

    fn write(&mut self, offset: u8, width: u8, value: u32) {
        for i in 0..usize::from(width) {
            let o = (usize::from(offset) + i) & 0xff;
            let byte = (value >> (8 * i)) as u8;
            match o {
                // Command: I/O and memory space, bus master, INTx disable.
                0x04 => self.config[o] = byte & 0x07,
                0x05 => self.config[o] = byte & 0x04,
                0x10..=0x27 => {
                    let n = (o - 0x10) / 4;
                    let size = self.bar_sizes[n];
                    if size == 0 {
                        continue;
                    }
                    // Bits below the size stay 0, bit 0 says I/O.
                    let mask = !(size - 1);
                    let shift = 8 * ((o - 0x10) % 4);
                    let cur = u32::from_le_bytes(
                        self.config[0x10 + 4 * n..0x14 + 4 * n]
                            .try_into()
                            .unwrap_or([0; 4]),
                    );
                    let new = (cur & !(0xff << shift)) | (u32::from(byte) << shift);
                    let new = (new & mask & 0xffff) | 1;
                    self.config[0x10 + 4 * n..0x14 + 4 * n].copy_from_slice(&new.to_le_bytes());
                }
                0x3c => self.config[o] = byte,
                // Everything else reads as the VMM set it.
                _ => {}
            }
        }
    }
}

/// Configuration mechanism 1 and the functions of bus 0 (device number
/// = index, function 0).
#[derive(Clone, Debug)]
pub struct Bus {
    address: u32,
    slots: Vec<Function>,
}

impl Bus {
    /// A bus with the host bridge (an i440FX's IDs) at 00:00.0.
    pub fn new() -> Bus {
        Bus {
            address: 0,
            slots: alloc::vec![Function::new(
                0x8086,
                0x1237,
                [0x06, 0x00, 0x00],
                (0, 0),
                None
            )],
        }
    }

    /// Adds `f` at the next device number; returns it.
    pub fn add(&mut self, f: Function) -> u8 {
        self.slots.push(f);
        (self.slots.len() - 1) as u8
    }

    pub fn function(&self, device: u8) -> Option<&Function> {
        self.slots.get(usize::from(device))
    }

    pub fn owns(port: u16) -> bool {
        (0xcf8..=0xcff).contains(&port)
    }

    /// The function the address register selects (enabled, bus 0,
    /// function 0) and the register offset.
    fn selected(&mut self) -> Option<(&mut Function, u8)> {
        let a = self.address;
        if a & 0x8000_0000 == 0 || (a >> 16) & 0xff != 0 || (a >> 8) & 7 != 0 {
            return None;
        }
        let device = ((a >> 11) & 0x1f) as usize;
        let offset = (a & 0xfc) as u8;
        self.slots.get_mut(device).map(|f| (f, offset))
    }

    /// A read of `width` bytes at `port`.
    pub fn read(&mut self, port: u16, width: u8) -> u32 {
        match port {
            0xcf8 if width == 4 => self.address,
            0xcfc..=0xcff => {
                let byte = (port - 0xcfc) as u8;
                match self.selected() {
                    Some((f, offset)) => f.read(offset + byte, width),
                    None => u32::MAX >> (32 - 8 * u32::from(width.min(4))),
                }
            }
            // Mechanism 2's byte registers: absent.
            _ => 0,
        }
    }

    /// A write of `width` bytes at `port`.
    pub fn write(&mut self, port: u16, width: u8, value: u32) {
        match port {
            0xcf8 if width == 4 => self.address = value,
            0xcfc..=0xcff => {
                let byte = (port - 0xcfc) as u8;
                if let Some((f, offset)) = self.selected() {
                    f.write(offset + byte, width, value);
                }
            }
            _ => {}
        }
    }
}

impl Default for Bus {
    fn default() -> Bus {
        Bus::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(bus: &mut Bus, dev: u32, offset: u32) {
        bus.write(0xcf8, 4, 0x8000_0000 | dev << 11 | offset);
    }

    #[test]
    fn linux_finds_and_sizes_a_device() {
        let mut bus = Bus::new();
        let blk = Function::new(0x1af4, 0x1001, [0x01, 0x00, 0x00], (0x1af4, 2), Some(10))
            .with_io_bar(0, 64, 0xc040);
        assert_eq!(bus.add(blk), 1);
        // Linux's type-1 check: the address register reads back.
        bus.write(0xcf8, 4, 0x8000_0000);
        assert_eq!(bus.read(0xcf8, 4), 0x8000_0000);
        // The host bridge, then our device.
        cfg(&mut bus, 0, 0);
        assert_eq!(bus.read(0xcfc, 4), 0x1237_8086);
        cfg(&mut bus, 0, 8);
        assert_eq!(bus.read(0xcfe, 2), 0x0600);
        cfg(&mut bus, 1, 0);
        assert_eq!(bus.read(0xcfc, 4), 0x1001_1af4);
        cfg(&mut bus, 1, 0x2c);
        assert_eq!(bus.read(0xcfe, 2), 2, "subsystem id: block");
        // No device at 2: all ones.
        cfg(&mut bus, 2, 0);
        assert_eq!(bus.read(0xcfc, 4), u32::MAX);
        assert_eq!(bus.read(0xcfc, 2), 0xffff);
        // Sizing BAR 0.
        cfg(&mut bus, 1, 0x10);
        bus.write(0xcfc, 4, u32::MAX);
        assert_eq!(bus.read(0xcfc, 4), 0xffc1);
        bus.write(0xcfc, 4, 0xc080);
        assert_eq!(bus.read(0xcfc, 4), 0xc081);
        assert_eq!(bus.function(1).unwrap().io_bar(0), None, "I/O decoding off");
        cfg(&mut bus, 1, 4);
        bus.write(0xcfc, 2, 0x0005);
        assert_eq!(bus.function(1).unwrap().io_bar(0), Some((0xc080, 64)));
        // The interrupt line.
        cfg(&mut bus, 1, 0x3c);
        assert_eq!(bus.read(0xcfc, 2), 0x010a);
        // Read-only fields stay.
        cfg(&mut bus, 1, 0);
        bus.write(0xcfc, 4, 0);
        assert_eq!(bus.read(0xcfc, 4), 0x1001_1af4);
    }

    #[test]
    fn any_access_any_value() {
        let mut bus = Bus::new();
        bus.add(Function::new(1, 2, [0, 0, 0], (0, 0), Some(11)).with_io_bar(0, 32, 0xc000));
        for a in [
            0u32,
            0x8000_0000,
            0x8000_08fc,
            0x80ff_ffff,
            0x8000_0810,
            u32::MAX,
        ] {
            bus.write(0xcf8, 4, a);
            for port in 0xcf8..=0xcff {
                for w in [1, 2, 4] {
                    bus.write(port, w, 0xdead_beef);
                    let _ = bus.read(port, w);
                }
            }
        }
    }
}
