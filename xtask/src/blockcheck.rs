//! `cargo xtask check-blocks DISK --seed S --requests N --max-blocks M
//! [--block-size B] [--offset BYTES] [--blocks COUNT]`: does the disk
//! image hold what the Block test client (`test-block`) wrote through the
//! driver? The plan is `ucore::blockcheck`'s, replayed here with the same
//! seed and device size, so the check sees every block of every write on
//! the disk itself — acknowledged is not enough. A scenario test runs it
//! as a host command at the end (`tests/block.toml`). The device may be a
//! window of the image (a partition): `--offset` and `--blocks`.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{bail, Context, Result};
use ucore::blockcheck::{mismatch, Plan};

/// What to check: the plan's parameters and where the device lies.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckBlocksArgs {
    /// The disk image.
    pub disk: std::path::PathBuf,
    /// The plan's seed (the test client's `arg`).
    #[arg(long)]
    pub seed: u64,
    /// Writes in the plan.
    #[arg(long)]
    pub requests: u32,
    /// The most blocks one write moves.
    #[arg(long)]
    pub max_blocks: u32,
    /// Bytes per block.
    #[arg(long, default_value_t = 512)]
    pub block_size: u32,
    /// Where the device starts in the image, in bytes.
    #[arg(long, default_value_t = 0)]
    pub offset: u64,
    /// Blocks of the device (default: to the image's end).
    #[arg(long)]
    pub blocks: Option<u64>,
}

/// Runs the check: prints what it compared, fails on the first wrong
/// block.
pub fn run(args: &CheckBlocksArgs) -> Result<()> {
    let (writes, bytes) = check(args)?;
    println!(
        "check-blocks: {writes} writes ({} KiB) found on {} byte for byte",
        bytes / 1024,
        args.disk.display()
    );
    Ok(())
}

/// The writes and bytes compared.
pub fn check(args: &CheckBlocksArgs) -> Result<(u32, u64)> {
    let bs = u64::from(args.block_size);
    if bs == 0 || !bs.is_power_of_two() {
        bail!("block size {bs} is not a power of two");
    }
    let mut file = std::fs::File::open(&args.disk)
        .with_context(|| format!("opening {}", args.disk.display()))?;
    let len = file.metadata()?.len();
    let block_count = match args.blocks {
        Some(b) => b,
        None => len.saturating_sub(args.offset) / bs,
    };
    let plan = Plan {
        seed: args.seed,
        block_count,
        requests: args.requests,
        max_blocks: args.max_blocks,
    };
    let (mut writes, mut bytes) = (0u32, 0u64);
    for w in plan.writes() {
        let mut buf = vec![0u8; (u64::from(w.blocks) * bs) as usize];
        file.seek(SeekFrom::Start(args.offset + w.first * bs))?;
        file.read_exact(&mut buf)
            .with_context(|| format!("reading blocks {}+{}", w.first, w.blocks))?;
        if let Some((block, j, got, want)) = mismatch(args.seed, w.first, bs as usize, &buf) {
            bail!(
                "{}: block {block} byte {j} is {got:#04x}, the plan wrote {want:#04x} \
                 (write of {} blocks from block {})",
                display(&args.disk),
                w.blocks,
                w.first
            );
        }
        writes += 1;
        bytes += buf.len() as u64;
    }
    if writes != args.requests {
        bail!(
            "the plan has {writes} writes, not {}: the device ({block_count} blocks) is too small",
            args.requests
        );
    }
    Ok((writes, bytes))
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ucore::blockcheck::fill;

    fn args(disk: std::path::PathBuf, seed: u64) -> CheckBlocksArgs {
        CheckBlocksArgs {
            disk,
            seed,
            requests: 8,
            max_blocks: 16,
            block_size: 512,
            offset: 4096,
            blocks: Some(512),
        }
    }

    #[test]
    fn finds_the_plan_and_a_changed_byte() {
        let dir = std::env::temp_dir().join(format!("pecan-check-blocks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let disk = dir.join("d.img");
        let mut image = vec![0u8; 4096 + 512 * 512];
        let a = args(disk.clone(), 5);
        let plan = Plan {
            seed: 5,
            block_count: 512,
            requests: 8,
            max_blocks: 16,
        };
        for w in plan.writes() {
            let at = 4096 + (w.first * 512) as usize;
            fill(
                5,
                w.first,
                512,
                &mut image[at..at + w.blocks as usize * 512],
            );
        }
        std::fs::write(&disk, &image).unwrap();
        assert_eq!(check(&a).unwrap().0, 8);
        assert!(check(&args(disk.clone(), 6)).is_err());
        let w = plan.writes().last().unwrap();
        image[4096 + (w.first * 512) as usize + 3] ^= 0x40;
        std::fs::write(&disk, &image).unwrap();
        let e = check(&a).unwrap_err().to_string();
        assert!(e.contains(&format!("block {} byte 3", w.first)), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
