//! `cargo xtask profile`: where the instructions go. Boots a scenario
//! under icount with QEMU's execution trace (`-d in_asm,exec,nochain`),
//! counts the guest instructions each executed translation block holds,
//! and adds them up per kernel function (the kernel ELF's symbol table,
//! demangled); user-mode code is one line, `[user]` (components share
//! virtual addresses, so a user PC names no one function).
//!
//! Under icount a tick is one instruction, so the table is the exact
//! path length per function of the whole run. To see one operation, run
//! twice — the operation many times and not at all (`--baseline`, a second
//! command line) — and divide the difference by the count (`--per`): boot,
//! root's checks and everything else cancel out. Example: what the 8-word
//! IPC (`ipc-intra-8w`, bench bit 3) adds over the 0-word one (bit 1),
//! per one-way call (1,111 calls each):
//!
//! ```text
//! cargo xtask profile kernel --cmdline 'pecan.start=bench-server@16+own+serve,bench:0x8@64+own' \
//!     --baseline 'pecan.start=bench-server@16+own+serve,bench:0x2@64+own' --per 1111
//! ```
//!
//! How the trace is read: QEMU prints each block it translates (`IN:` and
//! one line per guest instruction) before executing it, and each execution
//! as `Trace N: HOST [CS_BASE/PC/FLAGS/...]`. The host address names the
//! translation, so a block translated anew for another address space at
//! the same PC is counted with its own size: the size of a translation is
//! taken from the `IN:` block printed just before its first execution.
//! With `nochain` every execution is logged, so the counts are exact. The
//! trace of a run is large (about 1 GB for the benchmark scenario); it is
//! read while QEMU writes it, through a pipe, and never stored.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::accel::Accel;
use crate::qemu::Machine;
use crate::util::workspace_root;
use crate::{scenario, setup, system};

/// The options of `cargo xtask profile`.
#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// The scenario to boot (scenarios/SCENARIO.toml).
    #[arg(default_value = "kernel")]
    pub scenario: String,
    /// The kernel command line instead of the scenario's.
    #[arg(long)]
    pub cmdline: Option<String>,
    /// A second run with this command line, subtracted from the first.
    #[arg(long, value_name = "CMDLINE")]
    pub baseline: Option<String>,
    /// Divide the counts by N (the number of operations profiled).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub per: u64,
    /// Lines of the table.
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub top: usize,
    /// Also print each instruction of this function (its demangled name as
    /// the table shows it) with how often it ran.
    #[arg(long, value_name = "FUNCTION")]
    pub annotate: Option<String>,
}

/// The key of user-mode code.
const USER: &str = "[user]";
/// The key of kernel code no symbol covers.
const UNKNOWN: &str = "[kernel, no symbol]";
/// Kernel addresses start here (the higher half).
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;

/// Instructions per function.
type Counts = HashMap<String, u64>;

/// Runs `cargo xtask profile`.
pub fn run(args: &ProfileArgs) -> Result<bool> {
    setup::ensure_target()?;
    setup::ensure_qemu()?;
    if args.per == 0 {
        bail!("--per must be at least 1");
    }
    let root = workspace_root();
    let scenario = scenario::load(&root, &args.scenario)?;
    let system = system::build()?;
    let cmdline = args.cmdline.clone().unwrap_or(scenario.cmdline.clone());
    let image = system::scenario_image(
        &system,
        &scenario,
        &cmdline,
        &scenario.name,
        Some(scenario.machine),
    )?;
    let symbols = Symbols::read(&system.kernel)?;
    let mut machine = Machine::new(system.kernel.clone(), Some(image), cmdline, Accel::Tcg);
    machine.icount = true;
    machine.smp = scenario.machine.smp;
    machine.memory_mib = scenario.machine.memory_mib;
    let annotate = args.annotate.as_deref();
    let profile = profile_run(&machine, &symbols, annotate)?;
    let (table, lines) = match &args.baseline {
        None => (
            profile
                .functions
                .into_iter()
                .map(|(k, v)| (k, v as i64))
                .collect(),
            profile
                .lines
                .into_iter()
                .map(|(pc, (n, text))| (pc, (n as i64, text)))
                .collect(),
        ),
        Some(baseline) => {
            machine.cmdline = baseline.clone();
            let base = profile_run(&machine, &symbols, annotate)?;
            (
                difference(&profile.functions, &base.functions),
                line_difference(profile.lines, &base.lines),
            )
        }
    };
    if let Some(function) = annotate {
        print_lines(function, &lines, args.per);
    }
    print_table(&table, args.per, args.top);
    Ok(true)
}

/// Boots `machine` with the trace piped into the counter.
fn profile_run(machine: &Machine, symbols: &Symbols, annotate: Option<&str>) -> Result<Profile> {
    let out = workspace_root().join("target").join("profile");
    std::fs::create_dir_all(&out)?;
    let serial = out.join("serial.log");
    let mut args = machine.args();
    // The serial console to a file: stdout carries nothing then, and the
    // trace goes to stderr (`-D /dev/stderr` would be a file QEMU seeks).
    if let Some(i) = args.iter().position(|a| a == "stdio") {
        args[i] = format!("file:{}", serial.display());
    }
    args.extend(["-d", "in_asm,exec,nochain"].map(String::from));
    println!(
        "==> {} (trace piped, serial in {})",
        machine.cmdline,
        serial.display()
    );
    let mut child = Command::new(crate::qemu::QEMU)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting QEMU")?;
    let trace = child.stderr.take().context("QEMU's stderr")?;
    let profile = count(BufReader::with_capacity(1 << 20, trace), symbols, annotate)?;
    let status = child.wait()?;
    let exit = crate::qemu::GuestExit::from_status(status);
    if exit != crate::qemu::GuestExit::Success {
        bail!(
            "the guest did not end with success ({}); serial log: {}",
            exit.describe(),
            serial.display()
        );
    }
    Ok(profile)
}

/// What a trace says: instructions per function, and for the function
/// [`ProfileArgs::annotate`] names, executions per instruction.
#[derive(Debug, Default)]
pub struct Profile {
    pub functions: Counts,
    /// Address -> (executions, the instruction as QEMU printed it).
    pub lines: BTreeMap<u64, (u64, String)>,
}

/// Reads a trace (module doc) and adds up the instructions per function;
/// with `annotate`, also counts each instruction of that function.
pub fn count(trace: impl BufRead, symbols: &Symbols, annotate: Option<&str>) -> Result<Profile> {
    // A translated block's start and its instructions (address and text,
    // the text only when annotated), until its first execution.
    let mut pending: Option<(u64, Vec<(u64, String)>)> = None;
    // Host address of a translation -> (size, annotated instruction addresses).
    let mut blocks: HashMap<u64, (u64, Vec<u64>)> = HashMap::new();
    let mut profile = Profile::default();
    let mut by_pc: HashMap<u64, &str> = HashMap::new();
    let annotated = |pc: u64| annotate.is_some_and(|f| symbols.name(pc) == f);
    for line in trace.split(b'\n') {
        let line = line?;
        if line.starts_with(b"IN:") {
            pending = None;
        } else if line.starts_with(b"0x") {
            let Some(pc) = hex_prefix(&line[2..]) else {
                continue;
            };
            let text = match annotate {
                Some(_) if annotated(pc) => String::from_utf8_lossy(&line).trim_end().to_string(),
                _ => String::new(),
            };
            pending
                .get_or_insert_with(|| (pc, Vec::new()))
                .1
                .push((pc, text));
        } else if line.starts_with(b"Trace ") {
            let Some((host, pc)) = parse_exec(&line) else {
                continue;
            };
            let (size, instructions) = blocks.entry(host).or_insert_with(|| match pending.take() {
                Some((start, insns)) if start == pc => {
                    let mut mine = Vec::new();
                    for (at, text) in &insns {
                        if !text.is_empty() {
                            mine.push(*at);
                            profile.lines.entry(*at).or_insert((0, text.clone()));
                        }
                    }
                    (insns.len() as u64, mine)
                }
                other => {
                    pending = other;
                    (0, Vec::new())
                }
            });
            for at in instructions.iter() {
                if let Some(entry) = profile.lines.get_mut(at) {
                    entry.0 += 1;
                }
            }
            let name = *by_pc.entry(pc).or_insert_with(|| symbols.name(pc));
            *profile.functions.entry(name.to_string()).or_default() += *size;
        }
    }
    Ok(profile)
}

/// The hexadecimal number at the start of `bytes`.
fn hex_prefix(bytes: &[u8]) -> Option<u64> {
    let end = bytes
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).ok()?;
    u64::from_str_radix(text, 16).ok()
}

/// `Trace N: 0xHOST [CS_BASE/PC/...]` -> (host, PC).
fn parse_exec(line: &[u8]) -> Option<(u64, u64)> {
    let colon = line.iter().position(|&b| b == b':')?;
    let rest = &line[colon + 1..];
    let start = rest.windows(2).position(|w| w == b"0x")?;
    let host = hex_prefix(&rest[start + 2..])?;
    let bracket = rest.iter().position(|&b| b == b'[')?;
    let fields = &rest[bracket + 1..];
    let slash = fields.iter().position(|&b| b == b'/')?;
    let pc = hex_prefix(&fields[slash + 1..])?;
    Some((host, pc))
}

/// `a - b` per function.
fn difference(a: &Counts, b: &Counts) -> HashMap<String, i64> {
    let mut d: HashMap<String, i64> = a.iter().map(|(k, &v)| (k.clone(), v as i64)).collect();
    for (k, &v) in b {
        *d.entry(k.clone()).or_default() -= v as i64;
    }
    d.retain(|_, v| *v != 0);
    d
}

/// Per instruction `a - b` (an instruction only `b` ran counts negative).
fn line_difference(
    a: BTreeMap<u64, (u64, String)>,
    b: &BTreeMap<u64, (u64, String)>,
) -> BTreeMap<u64, (i64, String)> {
    let mut d: BTreeMap<u64, (i64, String)> = a
        .into_iter()
        .map(|(pc, (n, text))| (pc, (n as i64, text)))
        .collect();
    for (pc, (n, text)) in b {
        d.entry(*pc).or_insert((0, text.clone())).0 -= *n as i64;
    }
    d
}

/// Prints `function`'s instructions with their counts divided by `per`.
fn print_lines(function: &str, lines: &BTreeMap<u64, (i64, String)>, per: u64) {
    if lines.is_empty() {
        println!("\n{function}: no instruction of it ran (is the name as the table prints it?)");
        return;
    }
    println!(
        "\n{function}, executions per instruction{}:",
        if per > 1 {
            format!(" / {per}")
        } else {
            String::new()
        }
    );
    for (n, text) in lines.values() {
        println!("{:>10.1}  {text}", *n as f64 / per as f64);
    }
}

/// Prints the `top` largest entries (by magnitude) divided by `per`.
fn print_table(table: &HashMap<String, i64>, per: u64, top: usize) {
    let total: i64 = table.values().sum();
    let mut rows: Vec<(&String, &i64)> = table.iter().collect();
    rows.sort_by(|a, b| {
        b.1.unsigned_abs()
            .cmp(&a.1.unsigned_abs())
            .then(a.0.cmp(b.0))
    });
    let per_f = per as f64;
    println!();
    println!(
        "| instructions{} | share | function |",
        if per > 1 {
            format!(" / {per}")
        } else {
            String::new()
        }
    );
    println!("|---:|---:|---|");
    for (name, &n) in rows.iter().take(top) {
        let share = if total != 0 {
            100.0 * n as f64 / total as f64
        } else {
            0.0
        };
        println!("| {:.1} | {share:.1} % | {name} |", n as f64 / per_f);
    }
    println!("| {:.1} | 100 % | total |", total as f64 / per_f);
}

/// The kernel's function symbols, sorted by address.
pub struct Symbols {
    /// (start, end, demangled name).
    functions: Vec<(u64, u64, String)>,
}

impl Symbols {
    /// The function symbols of the ELF file at `path`.
    pub fn read(path: &Path) -> Result<Symbols> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Symbols::parse(&bytes).with_context(|| format!("the symbol table of {}", path.display()))
    }

    /// The function symbols of an ELF64 little-endian file.
    pub fn parse(elf: &[u8]) -> Result<Symbols> {
        let u16_at = |o: usize| -> Option<u64> {
            Some(u16::from_le_bytes(elf.get(o..o + 2)?.try_into().ok()?).into())
        };
        let u32_at = |o: usize| -> Option<u64> {
            Some(u32::from_le_bytes(elf.get(o..o + 4)?.try_into().ok()?).into())
        };
        let u64_at = |o: usize| -> Option<u64> {
            Some(u64::from_le_bytes(elf.get(o..o + 8)?.try_into().ok()?))
        };
        if elf.get(..6) != Some(b"\x7fELF\x02\x01") {
            bail!("not an ELF64 little-endian file");
        }
        let shoff = u64_at(0x28).context("header")? as usize;
        let shentsize = u16_at(0x3a).context("header")? as usize;
        let shnum = u16_at(0x3c).context("header")? as usize;
        let section = |i: usize| -> Option<(u64, usize, usize, usize, usize)> {
            let at = shoff.checked_add(i.checked_mul(shentsize)?)?;
            Some((
                u32_at(at + 4)?,             // type
                u64_at(at + 0x18)? as usize, // offset
                u64_at(at + 0x20)? as usize, // size
                u32_at(at + 0x28)? as usize, // link
                u64_at(at + 0x38)? as usize, // entry size
            ))
        };
        const SHT_SYMTAB: u64 = 2;
        let symtab = (0..shnum)
            .filter_map(section)
            .find(|s| s.0 == SHT_SYMTAB)
            .context("no .symtab (a stripped kernel?)")?;
        let (_, sym_off, sym_size, link, entsize) = symtab;
        let (_, str_off, str_size, _, _) = section(link).context("no string table")?;
        let strings = elf
            .get(str_off..str_off + str_size)
            .context("string table")?;
        let mut functions = Vec::new();
        for i in 0..sym_size / entsize.max(1) {
            let at = sym_off + i * entsize;
            let (Some(name), Some(info), Some(value), Some(size)) = (
                u32_at(at),
                elf.get(at + 4).copied(),
                u64_at(at + 8),
                u64_at(at + 16),
            ) else {
                continue;
            };
            const STT_FUNC: u8 = 2;
            const STT_NOTYPE: u8 = 0;
            let kind = info & 0xf;
            if (kind != STT_FUNC && kind != STT_NOTYPE) || value < KERNEL_HALF {
                continue;
            }
            let raw = strings.get(name as usize..).unwrap_or_default();
            let raw = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
            let raw = String::from_utf8_lossy(raw);
            if raw.is_empty() || raw.starts_with(".L") {
                continue;
            }
            let name = format!("{:#}", rustc_demangle::demangle(&raw));
            functions.push((value, value + size, name));
        }
        functions.sort();
        // A symbol without a size (assembly labels) reaches to the next.
        for i in 0..functions.len() {
            if functions[i].1 == functions[i].0 {
                functions[i].1 = functions.get(i + 1).map_or(u64::MAX, |f| f.0);
            }
        }
        Ok(Symbols { functions })
    }

    /// The function that holds `pc`.
    pub fn name(&self, pc: u64) -> &str {
        if pc < KERNEL_HALF {
            return USER;
        }
        let i = self.functions.partition_point(|f| f.0 <= pc);
        match i.checked_sub(1).map(|i| &self.functions[i]) {
            Some((_, end, name)) if pc < *end => name,
            _ => UNKNOWN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols() -> Symbols {
        Symbols {
            functions: vec![
                (
                    0xffff_ffff_8000_1000,
                    0xffff_ffff_8000_1040,
                    "kernel::a".into(),
                ),
                (
                    0xffff_ffff_8000_1040,
                    0xffff_ffff_8000_1100,
                    "kernel::b".into(),
                ),
            ],
        }
    }

    #[test]
    fn counts_each_execution_with_its_translations_size() {
        let trace = "\
IN: 
0xffffffff80001000:  mov rax, rbx
0xffffffff80001003:  add rax, 1
0xffffffff80001007:  jmp 0xffffffff80001040

Trace 0: 0x7f0000000100 [00000000/ffffffff80001000/00000000/ff020000] 
Trace 0: 0x7f0000000100 [00000000/ffffffff80001000/00000000/ff020000] 
IN: 
0x0000000000201000:  syscall

Trace 0: 0x7f0000000200 [00000000/0000000000201000/00000000/ff020000] 
IN: 
0x0000000000201000:  nop
0x0000000000201001:  nop

Trace 0: 0x7f0000000300 [00000000/0000000000201000/00000000/ff020000] 
Trace 0: 0x7f0000000200 [00000000/0000000000201000/00000000/ff020000] 
IN: 
0xffffffff80001050:  ret

Trace 0: 0x7f0000000400 [00000000/ffffffff80001050/00000000/ff020000] 
Trace 0: 0x7f0000000500 [00000000/ffffffff90000000/00000000/ff020000] 
";
        let counts = count(trace.as_bytes(), &symbols(), None).unwrap().functions;
        assert_eq!(counts["kernel::a"], 6);
        // Two translations at the same user PC keep their own sizes.
        assert_eq!(counts[USER], 1 + 2 + 1);
        assert_eq!(counts["kernel::b"], 1);
        // An execution whose translation was never printed counts 0.
        assert_eq!(counts[UNKNOWN], 0);
        let lines = count(trace.as_bytes(), &symbols(), Some("kernel::a"))
            .unwrap()
            .lines;
        let got: Vec<(u64, u64)> = lines.iter().map(|(&pc, (n, _))| (pc, *n)).collect();
        assert_eq!(
            got,
            [
                (0xffff_ffff_8000_1000, 2),
                (0xffff_ffff_8000_1003, 2),
                (0xffff_ffff_8000_1007, 2)
            ]
        );
        assert!(lines[&0xffff_ffff_8000_1003].1.ends_with("add rax, 1"));
    }

    #[test]
    fn names_and_differences() {
        let s = symbols();
        assert_eq!(s.name(0x1000), USER);
        assert_eq!(s.name(0xffff_ffff_8000_1000), "kernel::a");
        assert_eq!(s.name(0xffff_ffff_8000_10ff), "kernel::b");
        assert_eq!(s.name(0xffff_ffff_8000_1100), UNKNOWN);
        let a = Counts::from([("x".into(), 10), ("y".into(), 5)]);
        let b = Counts::from([("x".into(), 4), ("y".into(), 5), ("z".into(), 1)]);
        let d = difference(&a, &b);
        assert_eq!(d.len(), 2);
        assert_eq!((d["x"], d["z"]), (6, -1));
    }

    #[test]
    fn reads_the_kernels_symbols_when_built() {
        // The real kernel, if a build left it (not required for the test).
        let path = workspace_root().join("target/x86_64-unknown-none/release/pecan-kernel");
        if let Ok(s) = Symbols::read(&path) {
            assert!(s.functions.iter().any(|f| f.2.contains("syscall")));
        }
        assert!(Symbols::parse(b"not an elf").is_err());
    }
}
