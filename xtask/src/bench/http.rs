//! The HTTP benchmarks' runs (`bench::httpload`): the guest serves, the
//! host measures. Pecan boots `scenarios/http.toml` (its `http-server`
//! behind the switch and the virtio-net driver); Linux boots its
//! benchmark guest with `bench-linux http-serve` (`crate::linux`,
//! "HTTP"). Both in the lab's machine — q35, `-cpu max`, one vCPU, the
//! lab's memory, TCG — always **without icount** (the figure is requests
//! per second of the host's clock), with one `virtio-net-pci` NIC on
//! QEMU's user network (`restrict=on`) whose guest port 80 is forwarded
//! from a free port on 127.0.0.1.
//!
//! [`measure`] starts QEMU paused with a QMP socket, learns the forwarded
//! port (`info usernet`), lets the guest run, waits until a `GET /` is
//! answered (QEMU accepts connections before the guest listens), then
//! runs each benchmark's load (`crate::httpcheck::run_windows`: its
//! keep-alive connections opened once, every response checked) — an
//! unrecorded warm-up of `WARM_UP_SECS`, then `RUNS` windows of
//! `RUN_SECS` on the same connections, each a sample in requests per
//! second — and stops QEMU. The serial output and
//! QEMU's messages go to the log.

use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use bench::httpload;

use super::results::BenchResult;
use crate::devices::Attached;
use crate::qemu::{self, Machine};
use crate::util::display_path;

/// The guest port the servers listen on.
pub const GUEST_PORT: u16 = 80;
/// How long a guest may take from its start to answering `GET /`.
const SERVING_TIMEOUT: Duration = Duration::from_secs(300);

/// What the result lines say the figures are, after the catalog's words.
fn what(name: &str, server: &str) -> String {
    let c = httpload::connections(name).unwrap_or(0);
    format!(
        "HTTP requests per second: {c} keep-alive connection{} from the host (cargo xtask \
         http-load, one thread each, GET {} — a 1 KiB body — then the whole response before \
         the next request, every response checked) to {server}, through QEMU's user network \
         (restrict=on) and a forward from 127.0.0.1; wall clock, QEMU TCG without icount, one \
         vCPU; the connections opened once, {} windows of {} s after {} s unrecorded: requests \
         per second (higher is better)",
        if c == 1 { "" } else { "s" },
        httpload::PATH,
        httpload::RUNS,
        httpload::RUN_SECS,
        httpload::WARM_UP_SECS
    )
}

/// Pecan's server, for the result lines.
pub const PECAN_SERVER: &str = "Pecan's http-server (scenarios/http.toml: behind the switch and \
     the virtio-net driver, smoltcp and net::conn linked in)";
/// Linux's server, for the result lines.
pub const LINUX_SERVER: &str = "the same request handling built for Linux (bench-linux \
     http-serve: net::conn, net::serve, net::pattern over std::net, a thread per connection, \
     TCP_NODELAY) on Linux's virtio_net and TCP/IP stack";

/// Boots `machine` with `attached` devices (a NIC `nic` forwarding guest
/// port [`GUEST_PORT`]), measures the HTTP benchmarks `names` against
/// `server` and stops the guest; the log goes to `log`.
pub fn measure(
    machine: &Machine,
    attached: &mut Attached,
    nic: &str,
    names: &[&str],
    server: &str,
    log: &Path,
) -> Result<Vec<BenchResult>> {
    let mut machine = machine.clone();
    machine.icount = false;
    let socket = crate::qmp::socket_path();
    machine.qmp = Some(socket.clone());
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = File::create(log).with_context(|| format!("creating {}", display_path(log)))?;
    writeln!(file, "$ {}", machine.command_line())?;
    let mut child = machine
        .command()
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file.try_clone()?)
        .spawn()
        .with_context(|| format!("starting {}", qemu::QEMU))?;
    let result = serve_and_load(&mut child, attached, nic, names, server, &socket);
    qemu::terminate(&mut child);
    let _ = std::fs::remove_file(&socket);
    result.with_context(|| format!("serial log: {}", display_path(log)))
}

fn serve_and_load(
    child: &mut std::process::Child,
    attached: &mut Attached,
    nic: &str,
    names: &[&str],
    server: &str,
    socket: &Path,
) -> Result<Vec<BenchResult>> {
    let start = Instant::now();
    let mut q = crate::qmp::Qmp::connect(socket, start + Duration::from_secs(10))
        .context("QEMU's QMP socket")?;
    let usernet = q.human("info usernet")?;
    attached.learn_ports(&usernet)?;
    let port = attached
        .port(nic, GUEST_PORT)
        .with_context(|| format!("no forward to guest port {GUEST_PORT} of NIC {nic}"))?;
    q.resume()?;
    loop {
        if let Some(status) = child.try_wait()? {
            bail!("the guest stopped before it served ({status})");
        }
        if crate::run::http_answers(port) {
            break;
        }
        ensure!(
            start.elapsed() < SERVING_TIMEOUT,
            "nothing answered GET / on 127.0.0.1:{port} within {} s",
            SERVING_TIMEOUT.as_secs()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    println!(
        "==> serving on 127.0.0.1:{port} after {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let mut results = Vec::new();
    for name in names {
        let connections = httpload::connections(name)
            .with_context(|| format!("`{name}` is not an HTTP benchmark"))?;
        let (cpu0, t0) = (qemu_cpu_seconds(child.id()), Instant::now());
        let rates = crate::httpcheck::run_windows(
            port,
            (httpload::PATH, httpload::BODY),
            connections,
            Duration::from_secs(httpload::WARM_UP_SECS),
            (httpload::RUNS, Duration::from_secs(httpload::RUN_SECS)),
        )
        .with_context(|| format!("{name}: the load of {connections} connections"))?;
        let samples: Vec<u64> = rates.iter().map(|r| r.round() as u64).collect();
        // How busy QEMU was (its vCPU thread runs while the guest does; a
        // guest waiting in halt leaves it asleep): a diagnostic for the
        // log, not a figure of the table.
        let busy = match (cpu0, qemu_cpu_seconds(child.id())) {
            (Some(a), Some(b)) => format!(
                "; QEMU used {:.0} % of a host CPU meanwhile",
                100.0 * (b - a) / t0.elapsed().as_secs_f64()
            ),
            _ => String::new(),
        };
        let mut sorted = samples.clone();
        let stats = bench::stats(&mut sorted);
        println!(
            "==> {name}: {} requests/s (median; runs {samples:?}){busy}",
            stats.median
        );
        results.push(BenchResult {
            name: name.to_string(),
            what: what(name, server),
            unit: bench::Unit::RequestsPerSecond.as_str().to_string(),
            min: stats.min,
            median: stats.median,
            max: stats.max,
            samples,
            io: None,
            vm_exits: None,
        });
    }
    Ok(results)
}

/// The CPU time process `pid` has used so far (user and system), from
/// `/proc/PID/stat`, in seconds.
fn qemu_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name in parentheses: state is field 3, utime
    // and stime fields 14 and 15 (clock ticks of 1/100 s on Linux).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_of_this_process() {
        let t = qemu_cpu_seconds(std::process::id()).unwrap();
        assert!(t >= 0.0);
        assert!(qemu_cpu_seconds(u32::MAX).is_none());
    }

    #[test]
    fn what_names_the_figure() {
        let w = what("http-rps-16-linux", LINUX_SERVER);
        assert!(w.contains("16 keep-alive connections"), "{w}");
        assert!(
            w.contains("wall clock") && w.contains("without icount"),
            "{w}"
        );
        assert!(what("http-rps-1", PECAN_SERVER).contains("1 keep-alive connection from"));
    }
}
