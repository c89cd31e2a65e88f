//! Disk benchmarks, measured with the lab's I/O method ([`bench::soak`]):
//! a soaker thread at `SCHED_IDLE` on the benchmark's CPU counts what
//! would have been idle time, and each run's CPU cost is its busy ticks per
//! KiB moved.
//!
//! `blk-read-64k-linux` reads the whole virtio disk `/dev/vda` (a fresh
//! sparse raw image the lab attaches, see `xtask/src/linux.rs`) in 64 KiB
//! `pread`s with `O_DIRECT` — no page cache, every read goes to the device
//! — into one physically contiguous buffer (a transparent huge page), once
//! unrecorded, then [`RUNS`] recorded runs.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::soaker::SoakerThread;
use crate::sys;

/// The disk the lab attaches (the first virtio-blk device).
pub const DISK: &str = "/dev/vda";
/// Recorded runs (whole-disk passes) per benchmark.
pub const RUNS: usize = 8;

/// What an I/O benchmark measured: per run, the elapsed ticks and the
/// soaker's iterations, and the bytes each run moved.
#[derive(Debug, Default)]
pub struct IoRuns {
    pub bytes: u64,
    pub elapsed: Vec<u64>,
    pub soaked: Vec<u64>,
}

/// `open(path, O_RDONLY | O_DIRECT)`.
fn open_direct(path: &str) -> io::Result<OwnedFd> {
    open_direct_mode(path, libc::O_RDONLY)
}

/// `open(path, access | O_DIRECT)`.
fn open_direct_mode(path: &str, access: libc::c_int) -> io::Result<OwnedFd> {
    let c = std::ffi::CString::new(path).map_err(io::Error::other)?;
    // SAFETY: c is a NUL-terminated path; open has no other arguments.
    let fd = unsafe { libc::open(c.as_ptr(), access | libc::O_DIRECT | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("open {path}: {e}")));
    }
    // SAFETY: open just returned this descriptor and nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The size of the device behind `fd`.
fn device_size(fd: RawFd) -> io::Result<u64> {
    // SAFETY: lseek only moves the file offset of a descriptor we own.
    let end = unsafe { libc::lseek(fd, 0, libc::SEEK_END) };
    if end < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(end as u64)
}

/// One `pread` of a whole buffer at `offset`.
fn pread_all(fd: RawFd, buf: &mut [u8], offset: u64) -> io::Result<()> {
    // SAFETY: the kernel writes at most buf.len() bytes into buf, which we
    // borrow mutably for the call.
    let n = unsafe {
        libc::syscall(
            libc::SYS_pread64,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            offset as libc::off_t,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("pread at {offset}: {e}")));
    }
    if n as usize != buf.len() {
        return Err(io::Error::other(format!(
            "pread at {offset}: {n} of {} bytes",
            buf.len()
        )));
    }
    Ok(())
}

/// Sequential reads of `block` bytes (at most 2 MiB) covering the device,
/// with `O_DIRECT` into a buffer in a transparent huge page (physically
/// contiguous, as Pecan's DMA buffers are: [`sys::Mapping::huge`]):
/// [`RUNS`] recorded runs after one unrecorded, the soaker counting.
pub fn sequential_read(path: &str, block: usize) -> io::Result<IoRuns> {
    let disk = open_direct(path)?;
    let fd = disk.as_raw_fd();
    let size = device_size(fd)?;
    let blocks = size / block as u64;
    if blocks == 0 {
        return Err(io::Error::other(format!(
            "{path} has {size} bytes, less than one block of {block}"
        )));
    }
    let mut buffer = sys::Mapping::huge(block)?;
    let buf = buffer.bytes();
    if sys::physically_contiguous(buf)? == Some(false) {
        return Err(io::Error::other(
            "the read buffer is not physically contiguous: no transparent huge page \
             (the guest's /init sets /sys/kernel/mm/transparent_hugepage/enabled to madvise)",
        ));
    }
    let pass = |buf: &mut [u8]| -> io::Result<()> {
        for i in 0..blocks {
            pread_all(fd, buf, i * block as u64)?;
        }
        Ok(())
    };
    measure(blocks * block as u64, RUNS, || Ok(()), || pass(buf))
}

/// The lab's I/O method around `pass`, which moves `bytes`: the soaker
/// started, one unrecorded run, then `recorded` runs, each its elapsed
/// ticks and the soaker's turns; `prepare` runs before every run,
/// untimed (dropping the page cache, say).
pub fn measure(
    bytes: u64,
    recorded: usize,
    mut prepare: impl FnMut() -> io::Result<()>,
    mut pass: impl FnMut() -> io::Result<()>,
) -> io::Result<IoRuns> {
    let soaker = SoakerThread::start()?;
    prepare()?;
    pass()?;
    let mut runs = IoRuns {
        bytes,
        ..IoRuns::default()
    };
    for _ in 0..recorded {
        prepare()?;
        let c0 = soaker.count();
        let t0 = bench::now();
        pass()?;
        let t1 = bench::now();
        let c1 = soaker.count();
        runs.elapsed.push(t1.wrapping_sub(t0));
        runs.soaked.push(c1.wrapping_sub(c0));
    }
    drop(soaker);
    Ok(runs)
}

/// One `pwrite` of a whole buffer at `offset`.
fn pwrite_all(fd: RawFd, buf: &[u8], offset: u64) -> io::Result<()> {
    // SAFETY: the kernel reads at most buf.len() bytes from buf, which we
    // borrow for the call.
    let n = unsafe {
        libc::syscall(
            libc::SYS_pwrite64,
            fd,
            buf.as_ptr(),
            buf.len(),
            offset as libc::off_t,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("pwrite at {offset}: {e}")));
    }
    if n as usize != buf.len() {
        return Err(io::Error::other(format!(
            "pwrite at {offset}: {n} of {} bytes",
            buf.len()
        )));
    }
    Ok(())
}

/// The raw block benchmarks (`bench::blockio`, as `dd` with
/// `iflag=direct`/`oflag=direct` on [`DISK`]): [`bench::blockio::run_bytes`]
/// bytes per run in sequential requests of `size` bytes, one at a time,
/// with `O_DIRECT` from or into a buffer in a transparent huge page;
/// [`bench::blockio::RUNS`] recorded runs after one unrecorded, the
/// soaker counting.
pub fn raw(size: usize, write: bool) -> io::Result<IoRuns> {
    let access = if write { libc::O_RDWR } else { libc::O_RDONLY };
    let disk = open_direct_mode(DISK, access)?;
    let fd = disk.as_raw_fd();
    let bytes = bench::blockio::run_bytes(size as u32);
    let requests = bytes / size as u64;
    if device_size(fd)? < bytes {
        return Err(io::Error::other(format!(
            "{DISK} is smaller than {bytes} bytes"
        )));
    }
    let mut buffer = sys::Mapping::huge(size)?;
    let buf = buffer.bytes();
    buf.fill(0x5a);
    let pass = |buf: &mut [u8]| -> io::Result<()> {
        for i in 0..requests {
            match write {
                true => pwrite_all(fd, buf, i * size as u64)?,
                false => pread_all(fd, buf, i * size as u64)?,
            }
        }
        Ok(())
    };
    measure(bytes, bench::blockio::RUNS, || Ok(()), || pass(buf))
}

/// `blk-read-64k-linux`.
pub fn blk_read_64k() -> io::Result<IoRuns> {
    sequential_read(DISK, 64 * 1024)
}

/// The card's third partition (the second disk the lab attaches, xtask's
/// `card-mbr`): the FAT32 volume Pecan's file benchmarks use too.
pub const CARD_PARTITION: &str = "/dev/vdb3";
/// Where it is mounted.
pub const MOUNT: &str = "/mnt";

/// Mounts [`CARD_PARTITION`] as vfat on [`MOUNT`] (once).
fn mount_card() -> io::Result<()> {
    static MOUNTED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    MOUNTED
        .get_or_init(|| {
            std::fs::create_dir_all(MOUNT).map_err(|e| format!("mkdir {MOUNT}: {e}"))?;
            let c = |s: &str| std::ffi::CString::new(s).map_err(|e| e.to_string());
            let (dev, dir, kind) = (c(CARD_PARTITION)?, c(MOUNT)?, c("vfat")?);
            // SAFETY: NUL-terminated strings that outlive the call; no data.
            let r = unsafe {
                libc::mount(
                    dev.as_ptr(),
                    dir.as_ptr(),
                    kind.as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            if r != 0 {
                return Err(format!(
                    "mount -t vfat {CARD_PARTITION} {MOUNT}: {}",
                    io::Error::last_os_error()
                ));
            }
            Ok(())
        })
        .clone()
        .map_err(io::Error::other)
}

/// Writes dirty pages back and drops the page cache (as
/// `sync; echo 3 > /proc/sys/vm/drop_caches`).
fn drop_caches() -> io::Result<()> {
    // SAFETY: sync takes no arguments.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3")
}

/// The file benchmarks (`bench::blockio`, through the file system): a
/// file of [`bench::blockio::run_bytes`] bytes on the vfat mount of the
/// card's third partition, written (created, written in requests of
/// `size` bytes, `fsync`'d — the fsync timed) or read (in requests of
/// `size` bytes, the page cache dropped before each run, untimed);
/// [`bench::blockio::RUNS`] recorded runs after one unrecorded, the
/// soaker counting.
pub fn fat(size: usize, write: bool) -> io::Result<IoRuns> {
    use std::io::{Read, Write};
    mount_card()?;
    let path = format!("{MOUNT}/bench.bin");
    let bytes = bench::blockio::run_bytes(size as u32);
    let requests = bytes / size as u64;
    let mut buf = vec![0x5au8; size];
    if !write {
        let mut f = std::fs::File::create(&path)?;
        let chunk = vec![0x3cu8; 1 << 20];
        let mut left = bytes as usize;
        while left > 0 {
            let n = left.min(chunk.len());
            f.write_all(&chunk[..n])?;
            left -= n;
        }
        f.sync_all()?;
    }
    let pass = |buf: &mut [u8]| -> io::Result<()> {
        if write {
            let mut f = std::fs::File::create(&path)?;
            for _ in 0..requests {
                f.write_all(buf)?;
            }
            f.sync_all()
        } else {
            let mut f = std::fs::File::open(&path)?;
            for _ in 0..requests {
                f.read_exact(buf)?;
            }
            Ok(())
        }
    };
    let prepare = || match write {
        true => Ok(()),
        false => drop_caches(),
    };
    measure(bytes, bench::blockio::RUNS, prepare, || pass(&mut buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The method runs end to end on a file (no O_DIRECT guarantee there,
    /// but the same code): every run is recorded.
    #[test]
    fn sequential_read_of_a_file() {
        let path = std::env::temp_dir().join(format!("bench-linux-io-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 256 * 1024]).unwrap();
        let r = sequential_read(path.to_str().unwrap(), 64 * 1024);
        let _ = std::fs::remove_file(&path);
        let r = match r {
            // A file system without O_DIRECT (tmpfs before Linux 6.6).
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => return,
            // A host whose transparent huge pages are off.
            Err(e) if e.to_string().contains("not physically contiguous") => return,
            r => r.unwrap(),
        };
        assert_eq!(r.bytes, 256 * 1024);
        assert_eq!((r.elapsed.len(), r.soaked.len()), (RUNS, RUNS));
        assert!(sequential_read("/nonexistent/disk", 4096).is_err());
    }
}
