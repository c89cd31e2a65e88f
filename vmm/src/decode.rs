//! Decoding the instruction behind an MMIO exit. Without decode assists
//! (QEMU's TCG offers none) a nested page fault says only which
//! guest-physical address was touched: the VMM reads the instruction at
//! RIP and finds what it does — read or write, how wide, which register
//! or immediate — and its length, to step over it. Linux reaches device
//! memory with `readb/w/l/q` and `writeb/w/l/q`, which compile to plain
//! `mov`s; those are decoded, anything else is refused ([`None`]) and the
//! VMM stops the guest with a message rather than guess.
//!
//! Decoded: optional 0x66 (16-bit) and REX prefixes; `mov r/m, r` (88,
//! 89), `mov r, r/m` (8A, 8B), `mov r/m, imm` (C6, C7), `movzx r, r/m`
//! (0F B6, 0F B7); every ModRM and SIB form with 8- and 32-bit
//! displacements and RIP-relative addressing.

/// What a decoded instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Load `size` bytes into register `reg` (x86 number 0..16) as a
    /// `dest_size`-byte destination ([`merge_read`]).
    Read { reg: u8, size: u8, dest_size: u8 },
    /// Store `size` bytes of register `reg`.
    WriteReg { reg: u8, size: u8 },
    /// Store `size` bytes of an immediate.
    WriteImm { value: u64, size: u8 },
}

/// A decoded instruction: its access and length in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mmio {
    pub access: Access,
    pub len: u8,
}

/// Decodes `bytes` (the instruction at RIP, in 64-bit mode).
pub fn decode(bytes: &[u8]) -> Option<Mmio> {
    let mut i = 0;
    let mut opsize16 = false;
    while let Some(&b) = bytes.get(i) {
        match b {
            0x66 => opsize16 = true,
            // Segment overrides and LOCK (harmless for a mov).
            0x26 | 0x2e | 0x36 | 0x3e | 0x64 | 0x65 | 0xf0 => {}
            _ => break,
        }
        i += 1;
        if i > 4 {
            return None;
        }
    }
    let mut rex = 0u8;
    if let Some(&b) = bytes.get(i) {
        if b & 0xf0 == 0x40 {
            rex = b;
            i += 1;
        }
    }
    let w = rex & 8 != 0;
    let full = if w {
        8
    } else if opsize16 {
        2
    } else {
        4
    };
    let op = *bytes.get(i)?;
    i += 1;
    let (op, two_byte) = if op == 0x0f {
        let o = *bytes.get(i)?;
        i += 1;
        (o, true)
    } else {
        (op, false)
    };
    let modrm = *bytes.get(i)?;
    i += 1;
    let md = modrm >> 6;
    if md == 3 {
        return None; // a register operand: no memory access
    }
    let reg = (modrm >> 3 & 7) | (rex & 4) << 1;
    let rm = modrm & 7;
    // SIB and displacement.
    if rm == 4 {
        let sib = *bytes.get(i)?;
        i += 1;
        if md == 0 && sib & 7 == 5 {
            i += 4;
        }
    }
    i += match (md, rm) {
        (0, 5) => 4, // RIP-relative disp32
        (1, _) => 1,
        (2, _) => 4,
        _ => 0,
    };
    let access = match (two_byte, op) {
        (false, 0x88) => Access::WriteReg { reg, size: 1 },
        (false, 0x89) => Access::WriteReg { reg, size: full },
        (false, 0x8a) => Access::Read {
            reg,
            size: 1,
            dest_size: 1,
        },
        (false, 0x8b) => Access::Read {
            reg,
            size: full,
            dest_size: full,
        },
        (false, 0xc6) => {
            let value = u64::from(*bytes.get(i)?);
            i += 1;
            Access::WriteImm { value, size: 1 }
        }
        (false, 0xc7) => {
            let n = if opsize16 && !w { 2 } else { 4 };
            let imm = bytes.get(i..i + n)?;
            i += n;
            let mut v = [0u8; 4];
            v[..n].copy_from_slice(imm);
            // imm32 sign-extends to 64 bits with REX.W.
            let value = if n == 4 {
                i64::from(i32::from_le_bytes(v)) as u64
            } else {
                u64::from(u16::from_le_bytes([v[0], v[1]]))
            };
            let size = full;
            let value = if size == 8 {
                value
            } else {
                value & ((1u64 << (8 * size)) - 1)
            };
            Access::WriteImm { value, size }
        }
        (true, 0xb6) => Access::Read {
            reg,
            size: 1,
            dest_size: full,
        },
        (true, 0xb7) => Access::Read {
            reg,
            size: 2,
            dest_size: full,
        },
        _ => return None,
    };
    if i > bytes.len() || i > 15 {
        return None;
    }
    Some(Mmio {
        access,
        len: i as u8,
    })
}

/// The register value after a read of `size` bytes `data` into a register
/// of `dest_size` bytes that held `old`.
pub fn merge_read(old: u64, data: u64, size: u8, dest_size: u8) -> u64 {
    let data = if size >= 8 {
        data
    } else {
        data & ((1u64 << (8 * size)) - 1)
    };
    match dest_size {
        // 8- and 16-bit destinations keep the register's other bits.
        1 => old & !0xff | data,
        2 => old & !0xffff | data,
        // A 32-bit destination zero-extends.
        _ => data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_readl_writel() {
        // mov eax, [rdi + 0x10]  (8b 47 10)
        assert_eq!(
            decode(&[0x8b, 0x47, 0x10, 0x90]),
            Some(Mmio {
                access: Access::Read {
                    reg: 0,
                    size: 4,
                    dest_size: 4
                },
                len: 3
            })
        );
        // mov [rdx], esi  (89 32)
        assert_eq!(
            decode(&[0x89, 0x32]),
            Some(Mmio {
                access: Access::WriteReg { reg: 6, size: 4 },
                len: 2
            })
        );
        // mov r8d, [r9 + 0x12345678]  (45 8b 81 78 56 34 12)
        assert_eq!(
            decode(&[0x45, 0x8b, 0x81, 0x78, 0x56, 0x34, 0x12]),
            Some(Mmio {
                access: Access::Read {
                    reg: 8,
                    size: 4,
                    dest_size: 4
                },
                len: 7
            })
        );
        // mov rax, [rip + disp32]  (48 8b 05 xx xx xx xx)
        assert_eq!(
            decode(&[0x48, 0x8b, 0x05, 1, 2, 3, 4]).map(|m| (m.access, m.len)),
            Some((
                Access::Read {
                    reg: 0,
                    size: 8,
                    dest_size: 8
                },
                7
            ))
        );
        // mov word [rax + rbx*4 + 8], cx  (66 89 4c 98 08)
        assert_eq!(
            decode(&[0x66, 0x89, 0x4c, 0x98, 0x08]),
            Some(Mmio {
                access: Access::WriteReg { reg: 1, size: 2 },
                len: 5
            })
        );
        // movzx eax, byte [rdi]  (0f b6 07)
        assert_eq!(
            decode(&[0x0f, 0xb6, 0x07]),
            Some(Mmio {
                access: Access::Read {
                    reg: 0,
                    size: 1,
                    dest_size: 4
                },
                len: 3
            })
        );
        // mov dword [rdi + 4], 0x80000000  (c7 47 04 00 00 00 80)
        assert_eq!(
            decode(&[0xc7, 0x47, 0x04, 0, 0, 0, 0x80]),
            Some(Mmio {
                access: Access::WriteImm {
                    value: 0x8000_0000,
                    size: 4
                },
                len: 7
            })
        );
        // mov byte [rax], 1  (c6 00 01)
        assert_eq!(
            decode(&[0xc6, 0x00, 0x01]),
            Some(Mmio {
                access: Access::WriteImm { value: 1, size: 1 },
                len: 3
            })
        );
        // SIB with no base: mov eax, [rcx*8 + disp32]  (8b 04 cd 00 10 00 00)
        assert_eq!(
            decode(&[0x8b, 0x04, 0xcd, 0, 0x10, 0, 0]).map(|m| m.len),
            Some(7)
        );
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        assert_eq!(decode(&[]), None);
        assert_eq!(decode(&[0x8b]), None, "truncated");
        assert_eq!(decode(&[0x8b, 0xc0]), None, "register operand");
        assert_eq!(decode(&[0xf3, 0xa5]), None, "rep movs");
        assert_eq!(decode(&[0x0f, 0x0b]), None);
        assert_eq!(
            decode(&[0xc7, 0x47, 0x04, 0, 0]),
            None,
            "truncated immediate"
        );
        assert_eq!(decode(&[0x66; 8]), None);
        // Any bytes: never a panic.
        for a in 0..=255u8 {
            for b in [0u8, 0x05, 0x44, 0x84, 0xc0, 0xff] {
                let _ = decode(&[a, b, 0x24, 1, 2, 3, 4, 5]);
                let _ = decode(&[0x48, a, b]);
                let _ = decode(&[0x0f, a, b]);
            }
        }
    }

    #[test]
    fn reads_merge_into_registers() {
        assert_eq!(
            merge_read(0xffff_ffff_ffff_ffff, 0x12, 1, 1),
            0xffff_ffff_ffff_ff12
        );
        assert_eq!(
            merge_read(0xffff_ffff_ffff_ffff, 0x1234, 2, 2),
            0xffff_ffff_ffff_1234
        );
        assert_eq!(
            merge_read(0xffff_ffff_ffff_ffff, 0x1234_5678, 4, 4),
            0x1234_5678
        );
        assert_eq!(merge_read(u64::MAX, 0xab, 1, 4), 0xab, "movzx to 32 bits");
        assert_eq!(merge_read(0, u64::MAX, 8, 8), u64::MAX);
    }
}
