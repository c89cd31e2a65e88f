//! The block-device check's plan, shared by the guest and the host: the
//! random writes a test client (`test-block`) makes through a Block
//! session, and the bytes each written block must hold afterwards — which
//! xtask checks in the disk image after the run (`cargo xtask
//! check-blocks`), so "written" means "on the disk", not "acknowledged".
//!
//! The device is cut into [`Plan::requests`] equal regions; request `i`
//! writes a random run of blocks inside region `i` (so no two requests
//! overlap: with many in flight the device may do them in any order, and
//! the final content is still one thing). Each byte is a function of its
//! block number and offset ([`byte`]), with the plan's seed mixed in, so
//! a block written by another run (another seed) or left stale reads
//! differently.

use crate::packet_stream::traffic::Rng;

/// One write of the plan: `blocks` blocks from block `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Write {
    pub first: u64,
    pub blocks: u32,
}

/// The plan: `requests` writes of at most `max_blocks` blocks each over a
/// device of `block_count` blocks, from `seed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub seed: u64,
    pub block_count: u64,
    pub requests: u32,
    pub max_blocks: u32,
}

impl Plan {
    /// The writes, in submission order; empty when the device has fewer
    /// blocks than requests.
    pub fn writes(&self) -> impl Iterator<Item = Write> + '_ {
        let region = self.block_count / u64::from(self.requests.max(1));
        let mut rng = Rng::new(self.seed);
        (0..self.requests)
            .filter(move |_| region > 0)
            .map(move |i| {
                let most = region.min(u64::from(self.max_blocks.max(1)));
                let blocks = 1 + rng.below(most);
                let first = u64::from(i) * region + rng.below(region - blocks + 1);
                Write {
                    first,
                    blocks: blocks as u32,
                }
            })
    }
}

/// Byte `j` of block `block` as a plan with `seed` writes it.
pub fn byte(seed: u64, block: u64, j: usize) -> u8 {
    let x = block
        .wrapping_mul(0x9e37_79b9)
        .wrapping_add(j as u64 * 31)
        .wrapping_add(seed);
    (x ^ (x >> 8) ^ (x >> 19)) as u8
}

/// Fills `buf` (whole blocks of `block_size` bytes from block `first`)
/// with the plan's bytes.
pub fn fill(seed: u64, first: u64, block_size: usize, buf: &mut [u8]) {
    for (i, chunk) in buf.chunks_mut(block_size.max(1)).enumerate() {
        for (j, b) in chunk.iter_mut().enumerate() {
            *b = byte(seed, first + i as u64, j);
        }
    }
}

/// The first byte of `buf` (blocks from `first`) that is not the plan's:
/// `(block, offset, found, wanted)`.
pub fn mismatch(
    seed: u64,
    first: u64,
    block_size: usize,
    buf: &[u8],
) -> Option<(u64, usize, u8, u8)> {
    for (i, chunk) in buf.chunks(block_size.max(1)).enumerate() {
        let block = first + i as u64;
        for (j, &b) in chunk.iter().enumerate() {
            let want = byte(seed, block, j);
            if b != want {
                return Some((block, j, b, want));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn writes_stay_in_their_regions_and_never_overlap() {
        let plan = Plan {
            seed: 7,
            block_count: 2048,
            requests: 64,
            max_blocks: 256,
        };
        let writes: Vec<Write> = plan.writes().collect();
        assert_eq!(writes.len(), 64);
        for (i, w) in writes.iter().enumerate() {
            let region = 2048 / 64;
            assert!(w.blocks >= 1 && u64::from(w.blocks) <= region);
            assert!(w.first >= i as u64 * region);
            assert!(w.first + u64::from(w.blocks) <= (i as u64 + 1) * region);
        }
        // The same plan twice: the same writes (host and guest agree).
        assert_eq!(writes, plan.writes().collect::<Vec<_>>());
    }

    #[test]
    fn fill_and_mismatch_agree() {
        let mut buf = vec![0u8; 4 * 512];
        fill(3, 100, 512, &mut buf);
        assert_eq!(mismatch(3, 100, 512, &buf), None);
        assert!(mismatch(4, 100, 512, &buf).is_some());
        buf[700] ^= 1;
        assert_eq!(
            mismatch(3, 100, 512, &buf).map(|m| (m.0, m.1)),
            Some((101, 188))
        );
    }

    #[test]
    fn a_tiny_device_has_no_plan() {
        let plan = Plan {
            seed: 1,
            block_count: 3,
            requests: 8,
            max_blocks: 4,
        };
        assert_eq!(plan.writes().count(), 0);
    }
}
