//! `cargo xtask run FILE` refuses each broken scenario under
//! `tests/fixtures/scenarios/` with exactly its error, before it builds
//! anything: one fixture per error class of the scenario checker
//! (`docs/scenarios.md`; the unit tests in `src/config/tests.rs` cover the
//! variants of each class).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The fixtures, relative to the workspace root.
const DIR: &str = "xtask/tests/fixtures/scenarios";

fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// Runs `xtask run` on fixture `name` and checks that it fails with
/// `error: FILE:LINE:COL: message` and nothing else.
fn refuses(name: &str, line_col: &str, message: &str) {
    let file = format!("{DIR}/{name}.toml");
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["run", &file, "--headless"])
        .current_dir(workspace_root())
        .output()
        .expect("running xtask");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr,
        format!("error: {file}:{line_col}: {message}\n"),
        "{name}"
    );
    assert_eq!(output.status.code(), Some(1), "{name}");
    assert!(
        output.stdout.is_empty(),
        "{name}: printed {:?}",
        output.stdout
    );
}

/// (fixture, line:column, message).
const CASES: &[(&str, &str, &str)] = &[
    (
        "platform-not-provider",
        "6:12",
        "component \"platform\": platform: the platform service provides Platform (provides = \
         [\"Platform\"])",
    ),
    (
        "platform-with-ports",
        "8:12",
        "component \"platform\": platform: the platform service has no io_ports or irqs of its \
         own (it gets the PCI devices' ports and interrupts)",
    ),
    (
        "platform-window-ports",
        "13:13",
        "component \"hello\": io_ports[0]: ports 0xc100..=0xc10f: already given to component \
         \"platform\" (platform = the PCI platform (with ports 0xc000..=0xffff), line 7): a \
         device has one driver",
    ),
    (
        "platform-policy-reserved",
        "8:1",
        "component \"platform\": config.policy: reserved: the platform service's policy is \
         written from the drivers' devices keys",
    ),
    (
        "devices-no-route",
        "13:12",
        "component \"hello\": devices: a driver reaches its devices through a Platform session: \
         route Platform to the component with platform = true",
    ),
    (
        "devices-bad-match",
        "13:20",
        "component \"hello\": devices[0].pci: at character 5: expected ':' between vendor and \
         device ID, found '-'",
    ),
    (
        "device-assigned-twice",
        "23:12",
        "component \"blk2\": devices[0]: \"class=01:00@00:02.0\": may select the device already \
         given to component \"blk\" (devices[0] = \"class=01\", line 14): a device has one \
         driver",
    ),
    (
        "partition-no-route",
        "13:13",
        "component \"hello\": partition: a client reaches its partition through a Block \
         session: route Block to a component running the partitions binary",
    ),
    (
        "partition-missing",
        "14:1",
        "component \"hello\": route Block -> \"parts\": a client of the partition service \
         needs partition = N (the partition it gets, 1 to 1024)",
    ),
    (
        "partition-twice",
        "23:13",
        "component \"fat2\": partition: partition 3 of \"parts\": already given to component \
         \"fat\" (partition = 3, line 14): a partition has one client",
    ),
    (
        "partition-out-of-range",
        "13:13",
        "component \"hello\": partition: 0 is not from 1 to 1024",
    ),
    (
        "partition-policy-reserved",
        "8:1",
        "component \"parts\": config.policy: reserved: the partition service's policy is \
         written from its clients' partition keys",
    ),
    (
        "unknown-key",
        "7:1",
        "component \"hello\": unknown field `colour`, expected one of `name`, `binary`, \
         `ram_mib`, `caps`, `priority`, `cpu`, `cpus`, `provides`, `restart`, `routes`, \
         `config`, `io_ports`, `irqs`, `own`, `shared_endpoint`, `killable`, `platform`, `devices`, \
         `partition`",
    ),
    (
        "wrong-type",
        "5:11",
        "component \"hello\": ram_mib: invalid type: string \"1\", expected u32",
    ),
    (
        "missing-key",
        "3:1",
        "component \"hello\": missing field `caps`",
    ),
    (
        "bad-name",
        "4:8",
        "component \"hello world\": name: must be 1 to 48 ASCII letters, digits, '-', '_' or '.'",
    ),
    (
        "reserved-name",
        "4:8",
        "component \"parent\": name: \"parent\" is reserved (a route to \"parent\" means the parent)",
    ),
    (
        "duplicate-name",
        "9:8",
        "component \"hello\": name: the component at line 3 has this name too",
    ),
    (
        "missing-binary",
        "5:10",
        "component \"timer\": binary: no component \"timer-driver\" in components/",
    ),
    (
        "root-binary",
        "5:10",
        "component \"second-root\": binary: \"root\" is the root task, which the kernel starts; \
         it cannot be a component",
    ),
    (
        "init-binary",
        "5:10",
        "component \"second-init\": binary: \"init\" is the init that root starts for the \
         scenario; it cannot be a component",
    ),
    (
        "route-to-nothing",
        "11:1",
        "component \"fs\": route Block -> \"sd\": no component \"sd\"",
    ),
    (
        "route-to-non-provider",
        "23:1",
        "component \"fs\": route Block -> \"timer\": \"timer\" does not provide Block (provided \
         by \"sd\")",
    ),
    (
        "service-nobody-provides",
        "16:1",
        "component \"net\": route Nic -> \"sd\": no component provides Nic",
    ),
    (
        "parent-lacks-service",
        "10:1",
        "component \"hello\": route Timer -> parent: the parent does not provide Timer \
         (parent_provides: Log, Rom)",
    ),
    (
        "routing-cycle",
        "19:1",
        "component \"b\": route Block -> \"a\": routing cycle: \"b\" -Block-> \"a\" -Log-> \"b\"",
    ),
    (
        "bad-session-type",
        "7:13",
        "component \"hello\": provides: \"Block device\" is not a session type (1 to 32 ASCII \
         letters, digits and '_', starting with a letter)",
    ),
    (
        "ram-over-total",
        "2:14",
        "the scenario cannot start on a machine of 128 MiB: root cannot start init: 128 MiB in \
         blocks of 128 MiB or more are needed, 0 bytes are there (first missing: init's memory \
         for the components); it needs memory_mib = 261 at least; the blocks are echo 128 MiB, \
         hello 64 MiB, init's own 1 MiB (docs/scenarios.md, \"Memory\")",
    ),
    (
        "caps-not-power-of-two",
        "6:8",
        "component \"hello\": caps: 100 is not a power of two from 16 to 65536",
    ),
    (
        "caps-over-total",
        "12:8",
        "component \"hello\": caps: the capability quotas add up to 65552 with this component, \
         more than the maximum of 65536",
    ),
    (
        "priority-above-init",
        "7:12",
        "component \"hello\": priority: 200 is above init's priority (150)",
    ),
    (
        "cpu-out-of-range",
        "8:7",
        "component \"hello\": cpu: 2 does not exist: the machine has 2 CPUs (smp = 2)",
    ),
    (
        "cpus-out-of-range",
        "8:12",
        "component \"hello\": cpus[1]: 2 does not exist: the machine has 2 CPUs (smp = 2)",
    ),
    (
        "cpus-duplicate",
        "8:15",
        "component \"hello\": cpus[2]: 1 is listed twice",
    ),
    (
        "cpus-empty",
        "8:8",
        "component \"hello\": cpus: empty: a component needs at least one CPU",
    ),
    (
        "cpu-not-in-cpus",
        "8:7",
        "component \"hello\": cpu: 3 is not in cpus = [1, 2]: the CPU it starts on must be one \
         of its CPUs",
    ),
    (
        "cpus-wrong-type",
        "8:8",
        "component \"hello\": cpus: invalid type: integer `1`, expected a sequence",
    ),
    (
        "bad-restart-policy",
        "7:22",
        "component \"hello\": restart: unknown policy \"sometimes\" (expected \"never\" or \
         \"always\")",
    ),
    (
        "config-datetime",
        "8:9",
        "component \"hello\": config.since: a date or time cannot be put in a config ROM (use a \
         string)",
    ),
    ("bad-machine", "2:7", "smp: 0 is not from 1 to 255"),
    // Was accepted, and the component saw arg = 0.
    (
        "config-arg-not-integer",
        "8:7",
        "component \"hello\": config.arg: must be an integer (it becomes the component's \
         argument word)",
    ),
    // Was `recursion limit` without a line.
    ("deep-key", "8:128", "a key of more than 64 parts (a.b.c...)"),
    // Was `component.ram_mib` without the component.
    (
        "huge-integer",
        "5:11",
        "component \"hello\": ram_mib: invalid type: integer `99999999999999999999999` as i128, \
         expected u32",
    ),
    (
        // The escape is shown as \u{1b}, never sent to the terminal.
        "control-characters",
        "4:8",
        "component \"a\\u{1b}[2Jb\": name: must be 1 to 48 ASCII letters, digits, '-', '_' or '.'",
    ),
    (
        "memory-too-large",
        "2:14",
        "memory_mib: 2000000 is not from 12 to 1048576 (1 TiB)",
    ),
    (
        "update-self",
        "2:10",
        "update: update-self names an update of its own (one update per scenario)",
    ),
    (
        "update-loop-a",
        "2:10",
        "update: update-loop-b names an update of its own (one update per scenario)",
    ),
    (
        "update-loop-b",
        "2:10",
        "update: update-loop-a names an update of its own (one update per scenario)",
    ),
    (
        "update-missing",
        "2:10",
        "update: no scenario file xtask/tests/fixtures/scenarios/no-such-update.toml (the \
         update is a scenario of the same directory, named without .toml)",
    ),
    (
        "bad-io-ports",
        "7:13",
        "component \"hello\": io_ports[0]: 0xfff0 + 32 ports go past 0xffff, the last I/O port",
    ),
    (
        "kernel-ports",
        "7:13",
        "component \"hello\": io_ports[0]: ports 0x3f8..=0x3ff reach 0x3f8..=0x3ff, COM1, the \
         kernel's serial console: no component may have them",
    ),
    (
        "bad-irq",
        "7:9",
        "component \"hello\": irqs[0]: 24 is not an ISA IRQ (0 to 15)",
    ),
    (
        "device-shared",
        "15:9",
        "component \"other\": irqs[0]: IRQ 0: already given to component \"hello\" (irqs[0] = \
         IRQ 0, line 8): a device has one driver",
    ),
    (
        "own-unknown",
        "7:18",
        "component \"hello\": own[1]: unknown \"memory\" (expected \"thread\", \"cspace\" or \
         \"vspace\")",
    ),
    (
        "own-duplicate",
        "7:28",
        "component \"hello\": own[2]: \"vspace\" is listed twice",
    ),
    (
        "own-wrong-type",
        "7:7",
        "component \"hello\": own: invalid type: boolean `true`, expected a sequence",
    ),
    (
        "shared-endpoint-unknown",
        "8:19",
        "component \"echo\": shared_endpoint: unknown value \"receive\" (expected \"call\" or \
         \"serve\")",
    ),
    (
        "shared-endpoint-provider",
        "10:19",
        "component \"echo\": shared_endpoint: not for a component that provides sessions \
         (provides = [\"Echo\"]): it finds an endpoint of its own in the shared endpoint's slot",
    ),
    (
        "too-many-devices",
        "12:5",
        "component \"hello\": io_ports: 5 entries, at most 4",
    ),
    (
        "disk-bad-name",
        "4:8",
        "disk \"Data\": name: must be 1 to 32 of a-z, 0-9, '_' and '-'",
    ),
    (
        "disk-duplicate",
        "8:8",
        "disk \"data\": name: the disk at line 4 has this name too",
    ),
    (
        "disk-no-source",
        "3:1",
        "disk \"data\": needs size_mib (a blank disk of that many MiB), image (a copy of that \
         raw image file) or build (a generated image: \"card-mbr\" or \"card-gpt\")",
    ),
    (
        "disk-size-and-image",
        "6:9",
        "disk \"data\": size_mib and image: give one of them (a blank disk of size_mib MiB, or \
         a copy of the image file)",
    ),
    (
        "disk-build-and-size",
        "6:9",
        "disk \"card\": size_mib and build: give one of size_mib (a blank disk), image (a copy \
         of an image file) and build (a generated image)",
    ),
    (
        "disk-build-unknown",
        "5:9",
        "disk \"card\": build: unknown recipe \"card-fat\" (expected \"card-mbr\", \
         \"card-gpt\" or \"card-mbr-bad-first\")",
    ),
    (
        "disk-size-out-of-range",
        "5:12",
        "disk \"data\": size_mib: 0 is not from 1 to 65536",
    ),
    (
        "disk-image-missing",
        "5:9",
        "disk \"data\": image: no file disks/no-such.img (a raw disk image, relative to the \
         repository)",
    ),
    (
        "too-many-disks",
        "35:1",
        "disk \"d8\": a scenario has at most 8 disks",
    ),
    (
        "nic-bad-name",
        "4:8",
        "nic \"net.0\": name: must be 1 to 32 of a-z, 0-9, '_' and '-'",
    ),
    (
        "nic-duplicate",
        "7:8",
        "nic \"net0\": name: the NIC at line 4 has this name too",
    ),
    (
        "nic-forward-zero",
        "5:22",
        "nic \"net0\": forward[0].guest: 0 is not a TCP port (1 to 65535)",
    ),
    (
        "nic-forward-twice",
        "5:38",
        "nic \"net0\": forward[1].guest: port 80 is forwarded twice",
    ),
    (
        "nic-link-unknown",
        "5:8",
        "nic \"net0\": link: unknown \"tap\" (expected \"user\" or \"peer\")",
    ),
    (
        "nic-peer-forward",
        "6:8",
        "nic \"net0\": link: a peer link forwards no ports (forward is for the user network)",
    ),
    (
        "too-many-nics",
        "15:1",
        "nic \"n4\": a scenario has at most 4 NICs",
    ),
    (
        "bad-display",
        "2:11",
        "display: unknown \"vga\" (expected \"virtio-gpu\", \"std\" or \"bochs\")",
    ),
    (
        "display-in-a-table",
        "6:1",
        "nic: unknown field `display`, expected one of `name`, `forward`, `link` (display is a \
         top-level \
         key: write it before the first [[component]], [[disk]] or [[nic]] table)",
    ),
    (
        "killable-without-asker",
        "7:12",
        "component \"hello\": killable: no component could ask for the kill: none has a \
         Reconfig session (routes.Reconfig = \"parent\")",
    ),
];

macro_rules! fixture_tests {
    ($($test:ident: $name:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let (_, line_col, message) = CASES
                    .iter()
                    .find(|(n, _, _)| *n == $name)
                    .expect("a case for this fixture");
                refuses($name, line_col, message);
            }
        )*

        /// Every fixture file has a case and a test, and every case a file.
        #[test]
        fn every_fixture_is_tested() {
            let tested = [$($name),*];
            let mut files: Vec<String> = std::fs::read_dir(workspace_root().join(DIR))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
                .collect();
            files.sort();
            let mut cases: Vec<&str> = CASES.iter().map(|(n, _, _)| *n).collect();
            cases.sort();
            let mut tested = tested.to_vec();
            tested.sort();
            assert_eq!(files, cases);
            assert_eq!(cases, tested);
        }
    };
}

fixture_tests! {
    update_missing: "update-missing",
    config_arg_not_integer: "config-arg-not-integer",
    deep_key: "deep-key",
    huge_integer: "huge-integer",
    control_characters: "control-characters",
    memory_too_large: "memory-too-large",
    update_self: "update-self",
    update_loop_a: "update-loop-a",
    update_loop_b: "update-loop-b",
    unknown_key: "unknown-key",
    wrong_type: "wrong-type",
    missing_key: "missing-key",
    bad_name: "bad-name",
    reserved_name: "reserved-name",
    duplicate_name: "duplicate-name",
    missing_binary: "missing-binary",
    root_binary: "root-binary",
    init_binary: "init-binary",
    route_to_nothing: "route-to-nothing",
    route_to_non_provider: "route-to-non-provider",
    service_nobody_provides: "service-nobody-provides",
    parent_lacks_service: "parent-lacks-service",
    routing_cycle: "routing-cycle",
    bad_session_type: "bad-session-type",
    ram_over_total: "ram-over-total",
    caps_not_power_of_two: "caps-not-power-of-two",
    caps_over_total: "caps-over-total",
    priority_above_init: "priority-above-init",
    cpu_out_of_range: "cpu-out-of-range",
    cpus_out_of_range: "cpus-out-of-range",
    cpus_duplicate: "cpus-duplicate",
    cpus_empty: "cpus-empty",
    cpu_not_in_cpus: "cpu-not-in-cpus",
    cpus_wrong_type: "cpus-wrong-type",
    bad_restart_policy: "bad-restart-policy",
    config_datetime: "config-datetime",
    bad_machine: "bad-machine",
    bad_io_ports: "bad-io-ports",
    kernel_ports: "kernel-ports",
    bad_irq: "bad-irq",
    device_shared: "device-shared",
    too_many_devices: "too-many-devices",
    own_unknown: "own-unknown",
    own_duplicate: "own-duplicate",
    own_wrong_type: "own-wrong-type",
    shared_endpoint_unknown: "shared-endpoint-unknown",
    shared_endpoint_provider: "shared-endpoint-provider",
    platform_not_provider: "platform-not-provider",
    platform_with_ports: "platform-with-ports",
    platform_window_ports: "platform-window-ports",
    platform_policy_reserved: "platform-policy-reserved",
    devices_no_route: "devices-no-route",
    devices_bad_match: "devices-bad-match",
    device_assigned_twice: "device-assigned-twice",
    partition_no_route: "partition-no-route",
    partition_missing: "partition-missing",
    partition_twice: "partition-twice",
    partition_out_of_range: "partition-out-of-range",
    partition_policy_reserved: "partition-policy-reserved",
    disk_bad_name: "disk-bad-name",
    disk_duplicate: "disk-duplicate",
    disk_no_source: "disk-no-source",
    disk_size_and_image: "disk-size-and-image",
    disk_build_and_size: "disk-build-and-size",
    disk_build_unknown: "disk-build-unknown",
    disk_size_out_of_range: "disk-size-out-of-range",
    disk_image_missing: "disk-image-missing",
    too_many_disks: "too-many-disks",
    nic_bad_name: "nic-bad-name",
    nic_duplicate: "nic-duplicate",
    nic_forward_zero: "nic-forward-zero",
    nic_forward_twice: "nic-forward-twice",
    nic_link_unknown: "nic-link-unknown",
    nic_peer_forward: "nic-peer-forward",
    too_many_nics: "too-many-nics",
    bad_display: "bad-display",
    display_in_a_table: "display-in-a-table",
    killable_without_asker: "killable-without-asker",
}
