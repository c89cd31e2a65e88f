//! `cargo xtask check-fat DISK --partition N [--rounds R]`: does the
//! card image hold what the FAT test (`fat-test`) wrote on partition N,
//! as the host's own tools see it? `fsck.fat -n` must find the partition
//! clean (no warning), and every round's file (`ucore::fattest`) must be
//! there byte for byte, read with mtools — an implementation that is not
//! ours — along with the partition's original file. A scenario test runs
//! it as a host command at the end (`tests/fat-test.toml`).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use ucore::fattest;

use crate::gendisk::{self, CARD_PARTITIONS};

/// What to check.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckFatArgs {
    /// The card image (`build = "card-mbr"` or `"card-gpt"`).
    pub disk: std::path::PathBuf,
    /// The partition the test ran on (1 to 3).
    #[arg(long)]
    pub partition: usize,
    /// Rounds whose files must be there (from round 1).
    #[arg(long, default_value_t = fattest::ROUNDS)]
    pub rounds: u32,
    /// Accept lost clusters (allocated, reachable from no file: what an
    /// interrupted write may leave) and a stale free count; nothing else.
    #[arg(long)]
    pub allow_lost_clusters: bool,
}

/// Runs the check; prints what it found.
pub fn run(args: &CheckFatArgs) -> Result<()> {
    crate::setup::ensure_disk_tools()?;
    let p = args
        .partition
        .checked_sub(1)
        .and_then(|i| CARD_PARTITIONS.get(i))
        .with_context(|| format!("the card has partitions 1 to {}", CARD_PARTITIONS.len()))?;
    let work = args.disk.parent().unwrap_or(Path::new("."));
    match args.allow_lost_clusters {
        false => gendisk::fsck(&args.disk, p, work)?,
        true => fsck_lost_only(&args.disk, p, work)?,
    }
    let original = read(&args.disk, p, &format!("/{}", p.file))?;
    if original != p.text.as_bytes() {
        bail!("{} on partition {} changed", p.file, args.partition);
    }
    let mut bytes = 0;
    for r in 1..=args.rounds {
        let path = format!("/{}/{}", fattest::dir(r), fattest::file(r));
        let data = read(&args.disk, p, &path)?;
        let want = fattest::len(r);
        if data.len() != want {
            bail!("{path}: {} bytes, the test wrote {want}", data.len());
        }
        if let Some(j) = (0..want).find(|&j| data[j] != fattest::byte(r, j)) {
            bail!(
                "{path}: byte {j} is {:#04x}, the test wrote {:#04x}",
                data[j],
                fattest::byte(r, j)
            );
        }
        bytes += want;
    }
    println!(
        "check-fat: partition {} ({}) clean by fsck.fat{}; {} files of the test ({bytes} bytes) and {} found byte for byte by mtools",
        args.partition,
        p.label,
        if args.allow_lost_clusters {
            " (lost clusters allowed)"
        } else {
            ""
        },
        args.rounds,
        p.file
    );
    Ok(())
}

/// `fsck.fat -n` on partition `p`: clean, or nothing worse than lost
/// clusters and a wrong free-cluster count (every line of its report is
/// one of those, its header or its summary).
fn fsck_lost_only(image: &Path, p: &gendisk::CardPartition, work: &Path) -> Result<()> {
    let region = gendisk::extract(image, p, work)?;
    let output = Command::new(gendisk::tool("fsck.fat")?)
        .arg("-n")
        .arg(&region)
        .stdin(Stdio::null())
        .output()
        .context("running fsck.fat");
    let _ = std::fs::remove_file(&region);
    let output = output?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let harmless = |line: &str| {
        let l = line.trim();
        l.is_empty()
            || l.starts_with("fsck.fat ")
            || l.contains(" files, ")
            || l.starts_with("Leaving filesystem unchanged")
            || l.starts_with("Checking for unused clusters")
            || l.starts_with("Reclaimed ")
            || l.contains("unused clusters")
            || l.starts_with("Free cluster summary")
            || l.starts_with("Auto-correcting")
            || l.starts_with("Perform changes")
    };
    if let Some(bad) = text.lines().find(|l| !harmless(l)) {
        bail!(
            "fsck.fat -n on partition {} of {} finds more than lost clusters (`{}`):\n{text}",
            p.label,
            image.display(),
            bad.trim()
        );
    }
    if !output.status.success() {
        println!(
            "check-fat: fsck.fat -n finds lost clusters only:\n{}",
            text.trim_end()
        );
    }
    Ok(())
}

/// File `path` of partition `p`, read by mtools (`mcopy ... -`).
fn read(image: &Path, p: &gendisk::CardPartition, path: &str) -> Result<Vec<u8>> {
    let output = Command::new(gendisk::tool("mcopy")?)
        .env("MTOOLS_SKIP_CHECK", "1")
        .args(["-n", "-i", &gendisk::mtools_target(image, p)])
        .arg(format!("::{path}"))
        .arg("-")
        .stdin(Stdio::null())
        .output()
        .context("running mcopy")?;
    if !output.status.success() {
        bail!(
            "mcopy of {path} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(output.stdout)
}
