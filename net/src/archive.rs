//! Files of a `newc` cpio archive (the format xtask packs a scenario's
//! `archives` directories in, `xtask/src/cpio.rs`), looked up in place:
//! the HTTP server's static files from a ROM module.
//!
//! An entry is a 110-byte ASCII header — `070701` and thirteen 8-digit
//! hexadecimal fields, of which mode (field 1), filesize (6) and namesize
//! (11, with the NUL) matter here — the NUL-terminated name padded to a
//! multiple of 4 from the header's start, then the data padded to 4.
//! `TRAILER!!!` ends it. The archive is untrusted input: every field is
//! checked, and a malformed archive is an error value, never a panic.

/// Why an archive was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Not an entry header where one should be.
    BadHeader,
    /// An entry runs past the archive's end.
    Truncated,
    /// A name that is not UTF-8 or not NUL-terminated.
    BadName,
}

const HEADER: usize = 110;
const S_IFMT: u32 = 0o170000;
const S_IFREG: u32 = 0o100000;

/// One file of the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct File<'a> {
    /// Its path, without a leading `/`.
    pub name: &'a str,
    /// Its bytes.
    pub data: &'a [u8],
}

fn hex(field: &[u8]) -> Option<u32> {
    core::str::from_utf8(field)
        .ok()
        .and_then(|s| u32::from_str_radix(s, 16).ok())
}

fn pad4(n: usize) -> Option<usize> {
    n.checked_add(3).map(|n| n & !3)
}

/// The regular files of `archive`, in order; `Err` at the first
/// malformed entry.
pub fn files(archive: &[u8]) -> impl Iterator<Item = Result<File<'_>, Error>> {
    let mut at = 0usize;
    let mut done = false;
    core::iter::from_fn(move || loop {
        if done {
            return None;
        }
        let entry = (|| {
            let head = archive.get(at..at + HEADER).ok_or(Error::Truncated)?;
            if &head[..6] != b"070701" {
                return Err(Error::BadHeader);
            }
            let field = |i: usize| hex(&head[6 + 8 * i..14 + 8 * i]).ok_or(Error::BadHeader);
            let (mode, size, namesize) = (field(1)?, field(6)? as usize, field(11)? as usize);
            let name_end = (at + HEADER)
                .checked_add(namesize)
                .ok_or(Error::Truncated)?;
            let name = archive
                .get(at + HEADER..name_end)
                .ok_or(Error::Truncated)?
                .strip_suffix(&[0])
                .ok_or(Error::BadName)?;
            let name = core::str::from_utf8(name).map_err(|_| Error::BadName)?;
            let data_at = at + pad4(name_end - at).ok_or(Error::Truncated)?;
            let data_end = data_at.checked_add(size).ok_or(Error::Truncated)?;
            let data = archive.get(data_at..data_end).ok_or(Error::Truncated)?;
            at = data_at + pad4(size).ok_or(Error::Truncated)?;
            Ok((mode, name, data))
        })();
        match entry {
            Err(e) => {
                done = true;
                return Some(Err(e));
            }
            Ok((_, "TRAILER!!!", _)) => {
                done = true;
                return None;
            }
            Ok((mode, name, data)) if mode & S_IFMT == S_IFREG => {
                return Some(Ok(File { name, data }))
            }
            // Directories and the rest: not served.
            Ok(_) => {}
        }
    })
}

/// The file at `path` (with or without a leading `/`), if the archive has
/// it and is well-formed up to it.
pub fn find<'a>(archive: &'a [u8], path: &str) -> Option<&'a [u8]> {
    let path = path.trim_start_matches('/');
    files(archive)
        .map_while(Result::ok)
        .find(|f| f.name == path)
        .map(|f| f.data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;
    use alloc::vec::Vec;

    fn entry(out: &mut Vec<u8>, name: &str, mode: u32, data: &[u8]) {
        let h = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            1,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        let start = out.len();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        while !(out.len() - start).is_multiple_of(4) {
            out.push(0);
        }
        out.extend_from_slice(data);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
    }

    fn sample() -> Vec<u8> {
        let mut a = Vec::new();
        entry(&mut a, "css", 0o040755, b"");
        entry(&mut a, "css/a.css", 0o100644, b"body{}");
        entry(&mut a, "hello.txt", 0o100644, b"hello, world\n");
        entry(&mut a, "TRAILER!!!", 0, b"");
        a
    }

    #[test]
    fn finds_files() {
        let a = sample();
        assert_eq!(find(&a, "/hello.txt"), Some(&b"hello, world\n"[..]));
        assert_eq!(find(&a, "css/a.css"), Some(&b"body{}"[..]));
        assert_eq!(find(&a, "css"), None);
        assert_eq!(files(&a).count(), 2);
    }

    #[test]
    fn malformed_is_an_error_at_every_cut_and_flip() {
        let a = sample();
        for cut in 0..a.len() {
            // Never panics; a cut inside an entry is an error or a shorter list.
            let _ = files(&a[..cut]).count();
            let _ = find(&a[..cut], "hello.txt");
        }
        for i in 0..a.len() {
            for bit in 0..8 {
                let mut b = a.clone();
                b[i] ^= 1 << bit;
                let _ = files(&b).count();
            }
        }
        assert_eq!(files(b"070701zz").next(), Some(Err(Error::Truncated)));
        let mut bad = sample();
        bad[0] = b'1';
        assert_eq!(files(&bad).next(), Some(Err(Error::BadHeader)));
    }
}
