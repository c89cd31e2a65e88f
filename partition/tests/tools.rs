//! Tables written by the standard tools (`sfdisk` from util-linux,
//! `sgdisk` from gdisk) parse to the partitions those tools report
//! (`sfdisk --dump`). Skipped, with a printed line, where the tools are
//! missing.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use partition::{GptHeader, Guid, Kind, ReadBlock, ReadError, Scheme, Table, BLOCK};

/// A disk image file read block by block.
struct ImageFile(File);

impl ReadBlock for ImageFile {
    fn read_block(&mut self, lba: u64, buf: &mut [u8; BLOCK]) -> Result<(), ReadError> {
        self.0
            .seek(SeekFrom::Start(lba * BLOCK as u64))
            .and_then(|_| self.0.read_exact(buf))
            .map_err(|_| ReadError(1))
    }
}

fn tool(name: &str) -> Option<PathBuf> {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// A fresh sparse image of `mib` MiB.
fn image(tag: &str, mib: u64) -> PathBuf {
    let path = std::env::temp_dir().join(format!("partition-{tag}-{}.img", std::process::id()));
    let f = File::create(&path).unwrap();
    f.set_len(mib << 20).unwrap();
    path
}

fn read(path: &Path) -> Table {
    let blocks = std::fs::metadata(path).unwrap().len() / BLOCK as u64;
    partition::read_table(&mut ImageFile(File::open(path).unwrap()), blocks)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One partition as `sfdisk --dump` shows it: (number, start, size,
/// type, uuid, name).
type Dumped = (u32, u64, u64, String, Option<String>, Option<String>);

/// `\xNN` escapes (how sfdisk writes non-ASCII names) decoded.
fn unescape(text: &str) -> String {
    let mut bytes = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 3 < b.len() {
            bytes.push(u8::from_str_radix(&text[i + 2..i + 4], 16).unwrap());
            i += 4;
        } else {
            bytes.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).unwrap()
}

fn dump(sfdisk: &Path, path: &Path) -> Vec<Dumped> {
    let out = Command::new(sfdisk)
        .arg("--dump")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let name = path.display().to_string();
    let mut parts = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&name) else {
            continue;
        };
        let (number, fields) = rest.split_once(" : ").unwrap();
        let mut d: Dumped = (
            number.trim().parse().unwrap(),
            0,
            0,
            String::new(),
            None,
            None,
        );
        for field in fields.split(", ") {
            let (k, v) = field.split_once('=').unwrap();
            let v = v.trim();
            match k.trim() {
                "start" => d.1 = v.parse().unwrap(),
                "size" => d.2 = v.parse().unwrap(),
                "type" => d.3 = v.to_string(),
                "uuid" => d.4 = Some(v.to_string()),
                "name" => d.5 = Some(unescape(v.trim_matches('"'))),
                _ => {}
            }
        }
        parts.push(d);
    }
    parts
}

/// What we read, in `sfdisk --dump`'s terms.
fn ours(t: &Table) -> Vec<Dumped> {
    t.partitions
        .iter()
        .map(|p| match p.kind {
            Kind::Mbr { type_byte } => (
                p.number,
                p.first_lba,
                p.blocks,
                format!("{type_byte:x}"),
                None,
                None,
            ),
            Kind::Gpt {
                type_guid,
                unique_guid,
                name,
                ..
            } => (
                p.number,
                p.first_lba,
                p.blocks,
                Guid(type_guid).to_string(),
                Some(Guid(unique_guid).to_string()),
                (!name.units().is_empty()).then(|| name.to_string()),
            ),
        })
        .collect()
}

fn run(cmd: &mut Command, input: &str) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn sfdisk_mbr_with_logical_partitions() {
    let Some(sfdisk) = tool("sfdisk") else {
        println!("skipped: no sfdisk (apt-get install fdisk)");
        return;
    };
    let img = image("sfdisk-mbr", 64);
    run(
        Command::new(&sfdisk).arg("-q").arg(&img),
        "label: dos\nlabel-id: 0x12345678\n2048,20480,c\n,40960,83\n,,5\n,10000,83\n,10000,7\n\
         ,,83\n",
    );
    let t = read(&img);
    assert_eq!(t.scheme, Scheme::Mbr);
    // sfdisk lists the extended partition; we do not.
    let expected: Vec<Dumped> = dump(&sfdisk, &img)
        .into_iter()
        .filter(|d| !["5", "f", "85"].contains(&d.3.as_str()))
        .collect();
    assert_eq!(expected.len(), 5);
    assert_eq!(ours(&t), expected);
    std::fs::remove_file(&img).unwrap();
}

#[test]
fn sfdisk_gpt() {
    let Some(sfdisk) = tool("sfdisk") else {
        println!("skipped: no sfdisk (apt-get install fdisk)");
        return;
    };
    let img = image("sfdisk-gpt", 64);
    run(
        Command::new(&sfdisk).arg("-q").arg(&img),
        "label: gpt\nstart=2048, size=20480, type=U, name=boot\nsize=40960, type=L, \
         name=\"data one\"\ntype=L\n",
    );
    let t = read(&img);
    assert_eq!(t.scheme, Scheme::Gpt);
    assert_eq!(ours(&t), dump(&sfdisk, &img));
    std::fs::remove_file(&img).unwrap();
}

#[test]
fn sgdisk_gpt_and_its_backup() {
    let (Some(sgdisk), Some(sfdisk)) = (tool("sgdisk"), tool("sfdisk")) else {
        println!("skipped: no sgdisk or sfdisk (apt-get install gdisk fdisk)");
        return;
    };
    let img = image("sgdisk", 64);
    let status = Command::new(&sgdisk)
        .args([
            "-o",
            "-n",
            "1:2048:+10M",
            "-t",
            "1:EF00",
            "-c",
            "1:EFI system",
            "-n",
            "2:0:+20M",
            "-t",
            "2:8300",
            "-c",
            "2:root ü",
            "-n",
            "4:0:0",
            "-t",
            "4:0700",
        ])
        .arg(&img)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let t = read(&img);
    let expected = dump(&sfdisk, &img);
    assert_eq!(expected.len(), 3);
    assert_eq!(ours(&t), expected);
    assert_eq!(t.gpt.unwrap().header, GptHeader::Primary);
    // Wipe the primary header: the backup says the same.
    let mut f = std::fs::OpenOptions::new().write(true).open(&img).unwrap();
    f.seek(SeekFrom::Start(BLOCK as u64)).unwrap();
    f.write_all(&[0; BLOCK]).unwrap();
    drop(f);
    let t = read(&img);
    assert!(matches!(t.gpt.unwrap().header, GptHeader::Backup { .. }));
    assert_eq!(ours(&t), expected);
    std::fs::remove_file(&img).unwrap();
}
