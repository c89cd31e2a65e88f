//! `cargo xtask`: Pecan's one entry point for building, running and testing.
//!
//! - `cargo xtask build` builds the kernel ELF and the components and packs
//!   the components into the boot image.
//! - `cargo xtask run [SCENARIO]` builds and boots a scenario in QEMU.
//! - `cargo xtask test [FILTER]` runs host tests, lints and scenario tests
//!   and closes with `N passed, M failed`.
//! - `cargo xtask bench [NAME...]` runs the benchmark lab (Pecan and Linux
//!   side by side, `target/bench/`).
//! - `cargo xtask trace SCENARIO [--seconds N]` boots a scenario on the
//!   trace kernel and writes its kernel trace as Perfetto JSON
//!   (`target/trace/SCENARIO.json`).
//!
//! See `docs/testing.md` for the test command and the scenario-test format.

mod accel;
mod actions;
mod bench;
mod blockcheck;
mod boot_test;
mod bootimage;
mod components;
mod config;
mod cpio;
mod debian;
mod devices;
mod fatcheck;
mod fixtures;
mod gendisk;
mod host;
mod httpcheck;
mod kernel;
mod kmod;
mod linux;
mod matcher;
mod memory;
mod netpeer;
mod pcicheck;
mod profile;
mod qemu;
mod qmp;
mod run;
mod scenario;
mod screenshot;
mod setup;
mod system;
mod testcmd;
mod testspec;
mod tomlfile;
mod trace;
mod util;
mod vmguest;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Build, run and test Pecan.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Build the kernel and the components and pack the boot image
    /// (target/x86_64-unknown-none/release/pecan-kernel, target/pecan/boot.img).
    Build,
    /// Build everything and boot a scenario in QEMU.
    Run(run::RunArgs),
    /// Run host tests, lints and scenario tests.
    Test(testcmd::TestArgs),
    /// Run the benchmarks on Pecan and Linux and report them side by side.
    Bench(bench::BenchArgs),
    /// Run the Linux side of the benchmarks alone (boots Debian's cloud
    /// kernel with bench-linux) and print its BENCH lines.
    BenchLinux(linux::BenchLinuxArgs),
    /// Count the instructions a run spends per kernel function (QEMU's
    /// execution trace under icount), optionally against a baseline run.
    Profile(profile::ProfileArgs),
    /// Compare the platform service's PCI device list in a serial log
    /// with QEMU's `info pci` in a monitor transcript (a scenario test's
    /// host check, tests/platform.toml).
    CheckPci {
        /// The serial log.
        serial: std::path::PathBuf,
        /// The monitor transcript holding an `info pci` answer.
        monitor: std::path::PathBuf,
    },
    /// Check a disk image for what the Block test client's write plan put
    /// there (a scenario test's host check, tests/block.toml).
    CheckBlocks(blockcheck::CheckBlocksArgs),
    /// Check a card image for what the FAT test wrote (fsck.fat, and every
    /// file through mtools; a scenario test's host check, tests/fat-test.toml).
    CheckFat(fatcheck::CheckFatArgs),
    /// Check the HTTP server behind a forwarded host port: pages,
    /// keep-alive, concurrent connections, malformed and slow requests (a
    /// scenario test's host check, tests/http.toml).
    CheckHttp(httpcheck::CheckHttpArgs),
    /// Load an HTTP server behind a host port with keep-alive GETs from
    /// several connections and print the requests per second.
    HttpLoad(httpcheck::HttpLoadArgs),
    /// Boot a scenario headless and write a PNG of its screen once a
    /// serial line matches (target/screenshots/SCENARIO.png).
    Screenshot(screenshot::ScreenshotArgs),
    /// Send a host command to a running network peer (`{peer.NIC}` in a
    /// test: its control port) and print its answer: `ping ADDR COUNT`,
    /// `results`, `stats` (docs/network.md, "The peer link").
    Peer {
        /// The peer's control port on 127.0.0.1.
        port: u16,
        /// The command's words.
        #[arg(required = true)]
        command: Vec<String>,
    },
    /// Boot a scenario on the kernel built with the `trace` feature and
    /// write its kernel trace as Chrome-trace/Perfetto JSON
    /// (target/trace/SCENARIO.json).
    Trace(trace::TraceArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Build => setup::ensure_target()
            .and_then(|()| system::build())
            .map(|system| {
                println!("==> kernel: {}", util::display_path(&system.kernel));
                true
            }),
        Command::Run(args) => run::run(args),
        Command::Screenshot(args) => screenshot::screenshot(args),
        Command::Test(args) => testcmd::run(args),
        Command::Bench(args) => bench::run(args),
        Command::BenchLinux(args) => linux::bench_linux_command(args),
        Command::Profile(args) => profile::run(args),
        Command::CheckPci { serial, monitor } => pcicheck::run(serial, monitor).map(|()| true),
        Command::CheckBlocks(args) => blockcheck::run(args).map(|()| true),
        Command::CheckFat(args) => fatcheck::run(args).map(|()| true),
        Command::CheckHttp(args) => httpcheck::run(args).map(|()| true),
        Command::HttpLoad(args) => httpcheck::load(args).map(|()| true),
        Command::Peer { port, command } => netpeer::command(*port, command).map(|()| true),
        Command::Trace(args) => trace::run(args),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {}", util::printable(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}
