//! Against the real tools: Debian's dosfstools (`mkfs.fat`, `fsck.fat`)
//! and mtools (`mcopy`, `mdir`, `mtype`). Images the tools make are read
//! byte for byte; images this crate writes must pass `fsck.fat -n` and
//! show exactly our content through mtools. Each test prints a line and
//! passes when a tool is missing (`cargo test` on a machine without them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use fat::{format, DirCursor, FatKind, OpenMode, RamDisk, Volume};

/// The tool's path, looked up like `which` (plus the sbin directories,
/// where dosfstools lives but a user's PATH may not look).
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/sbin", "/sbin"])
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file());
    found
}

/// All the tools, or `None` after saying which is missing.
fn tools(test: &str) -> Option<[PathBuf; 5]> {
    let names = ["mkfs.fat", "fsck.fat", "mcopy", "mdir", "mtype"];
    let found: Vec<_> = names.iter().map(|n| tool(n)).collect();
    if let Some(i) = found.iter().position(Option::is_none) {
        println!(
            "{test}: skipped, {} not installed (dosfstools, mtools)",
            names[i]
        );
        return None;
    }
    let f: Vec<PathBuf> = found.into_iter().flatten().collect();
    Some([
        f[0].clone(),
        f[1].clone(),
        f[2].clone(),
        f[3].clone(),
        f[4].clone(),
    ])
}

/// A scratch directory of its own for each test.
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fat-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(cmd: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(cmd)
        .args(args)
        .env("MTOOLS_SKIP_CHECK", "1")
        .env("MTOOLS_NO_VFAT", "0")
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) as u8 ^ (i >> 11) as u8)
        .collect()
}

/// Every file under `dir` on our volume: path → contents (directories
/// with `None`).
fn walk(v: &mut Volume<RamDisk>, dir: &str, out: &mut BTreeMap<String, Option<Vec<u8>>>) {
    let mut c = DirCursor::default();
    while let Some((e, next)) = v.read_dir_at(dir, c).unwrap() {
        c = next;
        let path = format!("{}/{}", dir.trim_end_matches('/'), e.name);
        if e.metadata.is_dir {
            out.insert(path.clone(), None);
            walk(v, &path, out);
        } else {
            let h = v.open(&path, OpenMode::READ).unwrap();
            let mut data = vec![0u8; e.metadata.size as usize + 10];
            let mut n = 0;
            loop {
                let k = v.read(h, &mut data[n..]).unwrap();
                if k == 0 {
                    break;
                }
                n += k;
            }
            data.truncate(n);
            assert_eq!(n as u64, e.metadata.size, "{path}");
            v.close(h).unwrap();
            out.insert(path, Some(data));
        }
    }
}

/// The tree the host side holds: path → contents.
fn host_tree() -> BTreeMap<String, Option<Vec<u8>>> {
    let mut t = BTreeMap::new();
    t.insert("/hello.txt".into(), Some(b"hello, world\n".to_vec()));
    t.insert("/README".into(), Some(Vec::new()));
    t.insert("/A Long File Name.dat".into(), Some(pattern(100_000, 1)));
    t.insert("/Sub Dir".into(), None);
    t.insert("/Sub Dir/nested".into(), None);
    let long = "a name long enough to need five LFN slots, more than fifty.bin";
    t.insert(format!("/Sub Dir/nested/{long}"), Some(pattern(7000, 2)));
    t.insert(
        "/Sub Dir/Ünïcødé.txt".into(),
        Some("ü\n".as_bytes().to_vec()),
    );
    t.insert("/many".into(), None);
    for i in 0..120 {
        t.insert(
            format!("/many/file number {i}.txt"),
            Some(pattern(i * 37, i as u32)),
        );
    }
    t
}

fn write_host_tree(root: &Path, t: &BTreeMap<String, Option<Vec<u8>>>) {
    std::fs::create_dir_all(root).unwrap();
    for (p, c) in t {
        let full = root.join(&p[1..]);
        match c {
            None => std::fs::create_dir_all(&full).unwrap(),
            Some(data) => std::fs::write(&full, data).unwrap(),
        }
    }
}

#[test]
fn reads_images_made_by_mkfs_fat_and_mcopy() {
    let Some([mkfs, fsck, mcopy, _, _]) = tools("reads_images_made_by_mkfs_fat_and_mcopy") else {
        return;
    };
    let dir = scratch("read");
    let src = dir.join("src");
    let tree = host_tree();
    write_host_tree(&src, &tree);
    for (kind, bits, kib, extra) in [
        (FatKind::Fat12, "12", "2048", &[][..]),
        (FatKind::Fat16, "16", "16384", &[][..]),
        (FatKind::Fat32, "32", "40960", &["-s", "1"][..]),
    ] {
        let img = dir.join(format!("fat{bits}.img"));
        let img_s = img.to_str().unwrap();
        let mut args = vec!["-F", bits, "-C", img_s, kib];
        args.splice(2..2, extra.iter().copied());
        let (ok, out) = run(&mkfs, &args);
        assert!(ok, "{out}");
        let entries: Vec<String> = std::fs::read_dir(&src)
            .unwrap()
            .map(|e| e.unwrap().path().to_str().unwrap().to_owned())
            .collect();
        let mut args = vec!["-i", img_s, "-s"];
        args.extend(entries.iter().map(String::as_str));
        args.push("::/");
        let (ok, out) = run(&mcopy, &args);
        assert!(ok, "{out}");
        let (ok, out) = run(&fsck, &["-n", img_s]);
        assert!(ok, "mtools' image is not clean: {out}");

        let mut v = Volume::mount(RamDisk::from_bytes(std::fs::read(&img).unwrap())).unwrap();
        assert_eq!(v.kind(), kind);
        let mut got = BTreeMap::new();
        walk(&mut v, "/", &mut got);
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            tree.keys().collect::<Vec<_>>()
        );
        assert!(got == tree, "contents differ on FAT{bits}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Builds our tree with every kind of change on `v`; returns what it
/// should hold.
fn scribble(v: &mut Volume<RamDisk>) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut t = BTreeMap::new();
    let put = |v: &mut Volume<RamDisk>, p: &str, data: &[u8]| {
        let h = v.open(p, OpenMode::CREATE).unwrap();
        assert_eq!(v.write(h, data).unwrap(), data.len());
        v.close(h).unwrap();
    };
    for d in [
        "/Projects",
        "/Projects/Pecan Kernel",
        "/Projects/Pecan Kernel/src",
        "/old",
    ] {
        v.mkdir(d).unwrap();
    }
    put(
        v,
        "/Projects/Pecan Kernel/src/main file.rs",
        &pattern(20_000, 3),
    );
    put(v, "/Projects/notes.TXT", b"short name, upper case\n");
    put(
        v,
        "/Projects/Notes for the rename test.md",
        &pattern(3000, 4),
    );
    put(v, "/old/to be deleted.bin", &pattern(50_000, 5));
    put(v, "/old/truncated.log", &pattern(40_000, 6));
    put(v, "/appended.txt", b"first line\n");
    for i in 0..40 {
        put(v, &format!("/old/churn {i:02}.tmp"), &pattern(i * 100, 7));
    }
    for i in (0..40).step_by(2) {
        v.unlink(&format!("/old/churn {i:02}.tmp")).unwrap();
    }
    v.unlink("/old/to be deleted.bin").unwrap();
    let h = v.open("/old/truncated.log", OpenMode::READ_WRITE).unwrap();
    v.truncate(h, 1000).unwrap();
    v.close(h).unwrap();
    let h = v.open("/appended.txt", OpenMode::APPEND).unwrap();
    v.write(h, b"second line\n").unwrap();
    v.close(h).unwrap();
    v.rename(
        "/Projects/Notes for the rename test.md",
        "/old/Renamed across directories.md",
    )
    .unwrap();
    v.rename("/Projects/Pecan Kernel/src", "/Moved Source Directory")
        .unwrap();
    v.rename("/Projects/notes.TXT", "/Projects/NOTES2.TXT")
        .unwrap();
    // Seek past the end: a zero-filled gap.
    let h = v.open("/sparse.bin", OpenMode::CREATE).unwrap();
    v.write(h, b"A").unwrap();
    v.seek(h, fat::SeekFrom::Start(10_000)).unwrap();
    v.write(h, b"Z").unwrap();
    v.close(h).unwrap();
    // Counted, so FAT32's FSInfo gets an exact free count for fsck to check.
    v.free_clusters().unwrap();
    v.sync().unwrap();

    t.insert("/Projects".into(), None);
    t.insert("/Projects/Pecan Kernel".into(), None);
    t.insert("/Moved Source Directory".into(), None);
    t.insert(
        "/Moved Source Directory/main file.rs".into(),
        Some(pattern(20_000, 3)),
    );
    t.insert(
        "/Projects/NOTES2.TXT".into(),
        Some(b"short name, upper case\n".to_vec()),
    );
    t.insert("/old".into(), None);
    t.insert(
        "/old/Renamed across directories.md".into(),
        Some(pattern(3000, 4)),
    );
    t.insert(
        "/old/truncated.log".into(),
        Some(pattern(40_000, 6)[..1000].to_vec()),
    );
    t.insert(
        "/appended.txt".into(),
        Some(b"first line\nsecond line\n".to_vec()),
    );
    for i in (1..40).step_by(2) {
        t.insert(format!("/old/churn {i:02}.tmp"), Some(pattern(i * 100, 7)));
    }
    let mut sparse = vec![0u8; 10_001];
    sparse[0] = b'A';
    sparse[10_000] = b'Z';
    t.insert("/sparse.bin".into(), Some(sparse));
    t
}

/// Checks image `img` with fsck.fat, then compares mtools' view with `t`.
fn check_with_tools(tools: &[PathBuf; 5], img: &Path, t: &BTreeMap<String, Option<Vec<u8>>>) {
    let [_, fsck, _, mdir, mtype] = tools;
    let img_s = img.to_str().unwrap();
    let (ok, out) = run(fsck, &["-n", img_s]);
    assert!(ok && !out.contains("differ"), "fsck.fat: {out}");
    let (ok, out) = run(mdir, &["-i", img_s, "-/", "-b", "::/"]);
    assert!(ok, "{out}");
    let listed: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("::"))
        .map(|l| l.trim_end_matches('/').to_owned())
        .collect();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort();
    assert_eq!(
        listed_sorted,
        t.keys().cloned().collect::<Vec<_>>(),
        "mdir: {out}"
    );
    for (p, c) in t {
        if let Some(data) = c {
            let out = Command::new(mtype)
                .args(["-i", img_s, &format!("::{p}")])
                .env("MTOOLS_SKIP_CHECK", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "mtype {p}");
            assert!(&out.stdout == data, "mtype {p}: contents differ");
        }
    }
}

#[test]
fn images_we_write_pass_fsck_and_read_in_mtools() {
    let Some(tools) = tools("images_we_write_pass_fsck_and_read_in_mtools") else {
        return;
    };
    let dir = scratch("write");
    for (bits, kib, extra) in [
        ("12", "2048", &[][..]),
        ("12", "1440", &["-s", "2", "-r", "224"][..]),
        ("16", "16384", &[][..]),
        ("16", "32768", &["-s", "8", "-f", "1"][..]),
        ("32", "40960", &["-s", "1"][..]),
        ("32", "300000", &["-s", "4", "-f", "1"][..]),
    ] {
        // On an image mkfs.fat made.
        let img = dir.join(format!("mkfs{bits}-{kib}.img"));
        let img_s = img.to_str().unwrap();
        let mut args = vec!["-F", bits, "-C", img_s, kib];
        args.splice(2..2, extra.iter().copied());
        let (ok, out) = run(&tools[0], &args);
        assert!(ok, "{out}");
        let mut v = Volume::mount(RamDisk::from_bytes(std::fs::read(&img).unwrap())).unwrap();
        let t = scribble(&mut v);
        std::fs::write(&img, v.into_device().into_bytes()).unwrap();
        check_with_tools(&tools, &img, &t);
    }
    for (kind, blocks) in [
        (FatKind::Fat12, 4096u64),
        (FatKind::Fat16, 32768),
        (FatKind::Fat32, 81920),
    ] {
        // On an image we formatted.
        let img = dir.join(format!("ours{kind:?}.img"));
        let mut d = RamDisk::new(blocks);
        format(&mut d, Some(kind), "PECAN").unwrap();
        let mut v = Volume::mount(d).unwrap();
        let t = scribble(&mut v);
        std::fs::write(&img, v.into_device().into_bytes()).unwrap();
        check_with_tools(&tools, &img, &t);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn our_format_passes_fsck() {
    let Some(tools) = tools("our_format_passes_fsck") else {
        return;
    };
    let dir = scratch("format");
    for (kind, blocks, label) in [
        (Some(FatKind::Fat12), 360u64, ""),
        (Some(FatKind::Fat12), 2880, "FLOPPY"),
        (Some(FatKind::Fat12), 16000, "LABEL"),
        (Some(FatKind::Fat16), 8200, ""),
        (Some(FatKind::Fat16), 200_000, "DATA"),
        (Some(FatKind::Fat32), 67_000, "SMALL32"),
        (Some(FatKind::Fat32), 600_000, ""),
        (None, 4096, "AUTO"),
    ] {
        let img = dir.join("f.img");
        let mut d = RamDisk::new(blocks);
        format(&mut d, kind, label).unwrap();
        let v = Volume::mount(d).unwrap();
        if let Some(k) = kind {
            assert_eq!(v.kind(), k);
        }
        std::fs::write(&img, v.into_device().into_bytes()).unwrap();
        let (ok, out) = run(&tools[1], &["-n", img.to_str().unwrap()]);
        assert!(ok && !out.contains("differ"), "{kind:?} {blocks}: {out}");
        let (ok, out) = run(&tools[3], &["-i", img.to_str().unwrap(), "::/"]);
        assert!(ok, "{out}");
        if !label.is_empty() {
            assert!(
                out.contains(&format!("Volume in drive : is {label}")),
                "{out}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
