//! The decoder: [`Rom::parse`] checks every rule of the format once;
//! the accessors then read the validated bytes, still bounds-checked.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use abi::cpu::CpuSet;
use formats::bytes::{
    read_u16 as u16_at, read_u32 as u32_at, read_u64 as u64_at, read_u8 as u8_at,
};

use super::value::{self, Table, Value};
use super::write::{ComponentSpec, RouteSpec, Spec};
use super::{
    valid_caps, valid_name, valid_service, Device, Fault, Field, List, OwnCaps, Place, Restart,
    Rom, RomError, SharedEndpoint, COMPONENT_SIZE, DEVICE_SIZE, HEADER_SIZE, MAGIC, MAX_COMPONENTS,
    MAX_CONFIG_BYTES, MAX_CPUS, MAX_IO_RANGES, MAX_IRQS, MAX_PRIORITY, MAX_RAM_MIB, MAX_SERVICES,
    MAX_TOTAL_CAPS, PARENT, ROUTE_SIZE, SERVICE_SIZE, VERSION,
};

/// Where the parts of a ROM are, from its header's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) components: usize,
    pub(super) services: usize,
    pub(super) parent: usize,
    pub(super) provides: usize,
    pub(super) routes: usize,
    pub(super) devices: usize,
    pub(super) config_len: usize,
}

impl Layout {
    pub(super) fn component_table(&self) -> usize {
        HEADER_SIZE
    }

    pub(super) fn service_table(&self) -> usize {
        self.component_table() + self.components * COMPONENT_SIZE
    }

    pub(super) fn parent_list(&self) -> usize {
        self.service_table() + self.services * SERVICE_SIZE
    }

    pub(super) fn provides_list(&self) -> usize {
        self.parent_list() + self.parent * 2
    }

    pub(super) fn route_table(&self) -> usize {
        self.provides_list() + self.provides * 2
    }

    pub(super) fn device_table(&self) -> usize {
        self.route_table() + self.routes * ROUTE_SIZE
    }

    pub(super) fn config_area(&self) -> usize {
        self.device_table() + self.devices * DEVICE_SIZE
    }

    /// Where the string pool starts (the config area's end); `None` on
    /// overflow.
    pub(super) fn pool(&self) -> Option<usize> {
        self.config_area().checked_add(self.config_len)
    }
}

/// A component record's fields, undecoded.
struct Record {
    name: (u32, u16),
    binary: (u32, u16),
    ram_mib: u32,
    caps: u32,
    priority: u8,
    restart: u8,
    cpu: u16,
    cpus: u64,
    restart_max: u32,
    backoff_ms: u32,
    provides: (u16, u16),
    routes: (u16, u16),
    config: (u32, u32),
    devices: (u16, u16),
    own: u8,
    shared_endpoint: u8,
    flags: u8,
    reserved_zero: bool,
}

fn record(rom: &[u8], layout: &Layout, index: usize) -> Option<Record> {
    let start = layout.component_table() + index.checked_mul(COMPONENT_SIZE)?;
    let r = rom.get(start..start.checked_add(COMPONENT_SIZE)?)?;
    Some(Record {
        name: (u32_at(r, 0)?, u16_at(r, 4)?),
        binary: (u32_at(r, 6)?, u16_at(r, 10)?),
        ram_mib: u32_at(r, 12)?,
        caps: u32_at(r, 16)?,
        priority: u8_at(r, 20)?,
        restart: u8_at(r, 21)?,
        cpu: u16_at(r, 22)?,
        restart_max: u32_at(r, 24)?,
        backoff_ms: u32_at(r, 28)?,
        provides: (u16_at(r, 32)?, u16_at(r, 34)?),
        routes: (u16_at(r, 36)?, u16_at(r, 38)?),
        config: (u32_at(r, 40)?, u32_at(r, 44)?),
        devices: (u16_at(r, 48)?, u16_at(r, 50)?),
        cpus: u64_at(r, 52)?,
        own: u8_at(r, 60)?,
        shared_endpoint: u8_at(r, 61)?,
        flags: u8_at(r, 62)?,
        reserved_zero: u8_at(r, 63)? == 0,
    })
}

/// The string at (offset, length) of the pool.
fn string<'a>(rom: &'a [u8], layout: &Layout, (offset, len): (u32, u16)) -> Option<&'a str> {
    let start = layout.pool()?.checked_add(offset as usize)?;
    let bytes = rom.get(start..start.checked_add(usize::from(len))?)?;
    core::str::from_utf8(bytes).ok()
}

/// Service index `index` of the list starting at `list`.
fn list_entry(rom: &[u8], list: usize, index: usize) -> Option<u16> {
    u16_at(rom, list.checked_add(index.checked_mul(2)?)?)
}

/// Route record `index`: (service, target).
fn route_record(rom: &[u8], layout: &Layout, index: usize) -> Option<(u16, u16)> {
    let at = layout.route_table() + index.checked_mul(ROUTE_SIZE)?;
    Some((u16_at(rom, at)?, u16_at(rom, at + 2)?))
}

/// Device record `index`, decoded; `None` when it breaks the rules of
/// its kind.
fn device_record(rom: &[u8], layout: &Layout, index: usize) -> Option<Device> {
    let at = layout.device_table() + index.checked_mul(DEVICE_SIZE)?;
    if u8_at(rom, at + 1)? != 0 {
        return None;
    }
    Device::from_raw(u8_at(rom, at)?, u16_at(rom, at + 2)?, u16_at(rom, at + 4)?)
}

/// The config tree at (offset, length) of the config area.
fn config_tree<'a>(rom: &'a [u8], layout: &Layout, (offset, len): (u32, u32)) -> Option<&'a [u8]> {
    let start = layout.config_area().checked_add(offset as usize)?;
    let end = start.checked_add(len as usize)?;
    if end > layout.pool()? {
        return None;
    }
    rom.get(start..end)
}

/// Whether `first + count` stays within a list of `len` entries.
fn range_fits((first, count): (u16, u16), len: usize) -> bool {
    usize::from(first) + usize::from(count) <= len
}

impl<'a> Rom<'a> {
    /// Checks every rule of the format and borrows the ROM. Bytes after the
    /// header's `size` are ignored.
    pub fn parse(bytes: &'a [u8]) -> Result<Rom<'a>, RomError> {
        let header_fault = |fault| RomError {
            place: Place::Header,
            fault,
        };
        let prefix = bytes.len().min(MAGIC.len());
        if bytes.get(..prefix) != MAGIC.get(..prefix) {
            return Err(header_fault(Fault::BadMagic));
        }
        let header = bytes
            .get(..HEADER_SIZE)
            .ok_or(header_fault(Fault::Truncated {
                need: HEADER_SIZE as u64,
                have: bytes.len() as u64,
            }))?;
        let field16 = |at| u16_at(header, at).map_or(0, usize::from);
        let version = u32_at(header, 8).unwrap_or(0);
        let size = u32_at(header, 12).unwrap_or(0) as usize;
        let layout = Layout {
            components: field16(16),
            services: field16(18),
            parent: field16(20),
            provides: field16(22),
            routes: field16(24),
            devices: field16(26),
            config_len: u32_at(header, 28).unwrap_or(0) as usize,
        };
        if version != VERSION {
            return Err(header_fault(Fault::UnsupportedVersion(version)));
        }
        if layout.components > MAX_COMPONENTS {
            return Err(header_fault(Fault::TooMany(layout.components)));
        }
        if layout.services > MAX_SERVICES {
            return Err(header_fault(Fault::TooMany(layout.services)));
        }
        if size > bytes.len() {
            return Err(header_fault(Fault::SizeMismatch {
                header: size as u64,
                actual: bytes.len() as u64,
            }));
        }
        let pool = layout.pool().ok_or(header_fault(Fault::Truncated {
            need: u64::MAX,
            have: size as u64,
        }))?;
        if pool > size {
            return Err(header_fault(Fault::Truncated {
                need: pool as u64,
                have: size as u64,
            }));
        }
        // size <= bytes.len(): the slice exists.
        let rom = bytes.get(..size).ok_or(header_fault(Fault::SizeMismatch {
            header: size as u64,
            actual: bytes.len() as u64,
        }))?;
        check_services(rom, &layout)?;
        check_parent_list(rom, &layout)?;
        check_components(rom, &layout)?;
        check_routes(rom, &layout)?;
        check_devices(rom, &layout)?;
        Ok(Rom { bytes: rom, layout })
    }

    /// Size of the ROM in bytes (the header's `size`).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The ROM's bytes.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Number of components.
    pub fn component_count(&self) -> usize {
        self.layout.components
    }

    /// The components in start order.
    pub fn components(&self) -> Components<'a> {
        Components {
            rom: *self,
            next: 0,
        }
    }

    /// Component `index`, if there is one.
    pub fn component(&self, index: usize) -> Option<Component<'a>> {
        if index >= self.layout.components {
            return None;
        }
        let r = record(self.bytes, &self.layout, index)?;
        let (config, tree) = if r.config.1 == 0 {
            (Table::EMPTY, &[][..])
        } else {
            let tree = config_tree(self.bytes, &self.layout, r.config)?;
            (value::root_table(tree)?, tree)
        };
        Some(Component {
            rom: *self,
            index,
            name: string(self.bytes, &self.layout, r.name)?,
            binary: string(self.bytes, &self.layout, r.binary)?,
            ram_mib: r.ram_mib,
            caps: r.caps,
            priority: r.priority,
            cpu: r.cpu,
            cpus: CpuSet(r.cpus),
            restart: Restart::from_raw(r.restart, r.restart_max, r.backoff_ms)?,
            own: OwnCaps::from_bits(r.own)?,
            shared_endpoint: SharedEndpoint::from_raw(r.shared_endpoint)?,
            killable: r.flags & super::FLAG_KILLABLE != 0,
            provides: r.provides,
            routes: r.routes,
            devices: r.devices,
            config,
            tree,
        })
    }

    /// The component called `name`, if any (names are unique).
    pub fn find(&self, name: &str) -> Option<Component<'a>> {
        self.components().find(|c| c.name == name)
    }

    /// The session types the parent provides.
    pub fn parent_provides(&self) -> Services<'a> {
        Services {
            rom: *self,
            list: self.layout.parent_list(),
            next: 0,
            end: self.layout.parent,
        }
    }

    /// The owned form of the whole ROM; encoding it gives these bytes
    /// again.
    pub fn to_spec(&self) -> Spec {
        Spec {
            parent_provides: self.parent_provides().map(String::from).collect(),
            components: self.components().map(|c| c.to_spec()).collect(),
        }
    }

    fn service(&self, index: u16) -> Option<&'a str> {
        service_name(self.bytes, &self.layout, index)
    }
}

fn service_name<'a>(rom: &'a [u8], layout: &Layout, index: u16) -> Option<&'a str> {
    let at = layout.service_table() + usize::from(index) * SERVICE_SIZE;
    string(rom, layout, (u32_at(rom, at)?, u16_at(rom, at + 4)?))
}

fn check_services(rom: &[u8], layout: &Layout) -> Result<(), RomError> {
    for index in 0..layout.services {
        let fault = |fault| RomError {
            place: Place::Service(index),
            fault,
        };
        let name = service_name(rom, layout, index as u16).ok_or(fault(Fault::BadString))?;
        if !valid_service(name) {
            return Err(fault(Fault::BadName));
        }
        if (0..index).any(|other| service_name(rom, layout, other as u16) == Some(name)) {
            return Err(fault(Fault::DuplicateName));
        }
    }
    Ok(())
}

fn check_parent_list(rom: &[u8], layout: &Layout) -> Result<(), RomError> {
    let list = layout.parent_list();
    for index in 0..layout.parent {
        let fault = |fault| RomError {
            place: Place::Parent(index),
            fault,
        };
        let service = list_entry(rom, list, index).ok_or(fault(Fault::Truncated {
            need: layout.provides_list() as u64,
            have: rom.len() as u64,
        }))?;
        if usize::from(service) >= layout.services {
            return Err(fault(Fault::BadService(service)));
        }
        if (0..index).any(|other| list_entry(rom, list, other) == Some(service)) {
            return Err(fault(Fault::DuplicateService(service)));
        }
    }
    Ok(())
}

fn check_components(rom: &[u8], layout: &Layout) -> Result<(), RomError> {
    let mut total_caps = 0u64;
    for index in 0..layout.components {
        let fault = |fault| RomError {
            place: Place::Component(index),
            fault,
        };
        // The table lies inside the ROM (checked against the pool start).
        let r = record(rom, layout, index).ok_or(fault(Fault::Truncated {
            need: layout.service_table() as u64,
            have: rom.len() as u64,
        }))?;
        let name = string(rom, layout, r.name).ok_or(fault(Fault::BadString))?;
        if !valid_name(name) {
            return Err(fault(Fault::BadName));
        }
        let earlier =
            |other| record(rom, layout, other).and_then(|o: Record| string(rom, layout, o.name));
        if (0..index).any(|other| earlier(other) == Some(name)) {
            return Err(fault(Fault::DuplicateName));
        }
        let binary = string(rom, layout, r.binary).ok_or(fault(Fault::BadString))?;
        if !valid_name(binary) {
            return Err(fault(Fault::BadBinary));
        }
        let field_checks = [
            (Field::RamMib, (1..=MAX_RAM_MIB).contains(&r.ram_mib)),
            (Field::Caps, valid_caps(r.caps)),
            (Field::Priority, r.priority <= MAX_PRIORITY),
            (Field::Cpu, u32::from(r.cpu) < MAX_CPUS),
            (Field::Cpus, CpuSet(r.cpus).contains(r.cpu.into())),
            (
                Field::Restart,
                Restart::from_raw(r.restart, r.restart_max, r.backoff_ms).is_some(),
            ),
            (Field::Own, OwnCaps::from_bits(r.own).is_some()),
            (
                Field::SharedEndpoint,
                match SharedEndpoint::from_raw(r.shared_endpoint) {
                    Some(SharedEndpoint::Call) => true,
                    Some(SharedEndpoint::Serve) => r.provides.1 == 0,
                    None => false,
                },
            ),
            (Field::Flags, r.flags & !super::FLAG_KILLABLE == 0),
            (Field::Reserved, r.reserved_zero),
        ];
        if let Some((field, _)) = field_checks.iter().find(|(_, ok)| !ok) {
            return Err(fault(Fault::BadField(*field)));
        }
        total_caps += u64::from(r.caps);
        if total_caps > u64::from(MAX_TOTAL_CAPS) {
            return Err(fault(Fault::TooManyCaps));
        }
        if !range_fits(r.provides, layout.provides) {
            return Err(fault(Fault::BadRange(List::Provides)));
        }
        let list = layout.provides_list();
        let first = usize::from(r.provides.0);
        for i in first..first + usize::from(r.provides.1) {
            let service = list_entry(rom, list, i).ok_or(fault(Fault::BadRange(List::Provides)))?;
            if usize::from(service) >= layout.services {
                return Err(fault(Fault::BadService(service)));
            }
            if (first..i).any(|other| list_entry(rom, list, other) == Some(service)) {
                return Err(fault(Fault::DuplicateService(service)));
            }
        }
        if !range_fits(r.routes, layout.routes) {
            return Err(fault(Fault::BadRange(List::Routes)));
        }
        if r.config.1 as usize > MAX_CONFIG_BYTES {
            return Err(fault(Fault::BadRange(List::Config)));
        }
        if r.config.1 != 0 {
            let tree =
                config_tree(rom, layout, r.config).ok_or(fault(Fault::BadRange(List::Config)))?;
            value::check_tree(tree).map_err(|(at, f)| fault(Fault::BadValue { at, fault: f }))?;
        }
    }
    Ok(())
}

/// Whether component `index` (already checked) provides `service`.
fn component_provides(rom: &[u8], layout: &Layout, index: usize, service: u16) -> bool {
    let Some(r) = record(rom, layout, index) else {
        return false;
    };
    let first = usize::from(r.provides.0);
    (first..first + usize::from(r.provides.1))
        .any(|i| list_entry(rom, layout.provides_list(), i) == Some(service))
}

/// The routes, once every component's provides list is known to be good.
fn check_routes(rom: &[u8], layout: &Layout) -> Result<(), RomError> {
    for index in 0..layout.components {
        let fault = |fault| RomError {
            place: Place::Component(index),
            fault,
        };
        let r = record(rom, layout, index).ok_or(fault(Fault::BadRange(List::Routes)))?;
        let first = usize::from(r.routes.0);
        for i in first..first + usize::from(r.routes.1) {
            let (service, target) =
                route_record(rom, layout, i).ok_or(fault(Fault::BadRange(List::Routes)))?;
            if usize::from(service) >= layout.services {
                return Err(fault(Fault::BadService(service)));
            }
            if (first..i).any(|o| route_record(rom, layout, o).is_some_and(|(s, _)| s == service)) {
                return Err(fault(Fault::DuplicateService(service)));
            }
            let provided = if target == PARENT {
                (0..layout.parent)
                    .any(|p| list_entry(rom, layout.parent_list(), p) == Some(service))
            } else if usize::from(target) < layout.components && usize::from(target) != index {
                component_provides(rom, layout, usize::from(target), service)
            } else {
                return Err(fault(Fault::BadTarget(target)));
            };
            if !provided {
                return Err(fault(Fault::NotProvided { service, target }));
            }
        }
    }
    Ok(())
}

/// The device table, component by component: the components' ranges tile
/// the table in order (so each record has exactly one owner), each record
/// is well formed, I/O ports come before IRQs within the per-component
/// limits, and no record shares a port or IRQ with an earlier one or
/// reaches the kernel's ports.
fn check_devices(rom: &[u8], layout: &Layout) -> Result<(), RomError> {
    let mut next = 0usize;
    for index in 0..layout.components {
        let fault = |fault| RomError {
            place: Place::Component(index),
            fault,
        };
        let r = record(rom, layout, index).ok_or(fault(Fault::BadRange(List::Devices)))?;
        if usize::from(r.devices.0) != next || !range_fits(r.devices, layout.devices) {
            return Err(fault(Fault::BadRange(List::Devices)));
        }
        next += usize::from(r.devices.1);
        let (mut ports, mut irqs, mut platform) = (0, 0, false);
        for i in usize::from(r.devices.0)..next {
            let device = device_record(rom, layout, i).ok_or(fault(Fault::BadDevice(i)))?;
            match device {
                _ if platform => return Err(fault(Fault::TooManyDevices)),
                Device::IoPorts { .. } if irqs == 0 => ports += 1,
                Device::IoPorts { .. } => return Err(fault(Fault::TooManyDevices)),
                Device::Irq(_) => irqs += 1,
                Device::Platform if ports + irqs == 0 => platform = true,
                Device::Platform => return Err(fault(Fault::TooManyDevices)),
            }
            if ports > MAX_IO_RANGES || irqs > MAX_IRQS {
                return Err(fault(Fault::TooManyDevices));
            }
            if device.kernel_conflict().is_some() {
                return Err(fault(Fault::KernelPorts(i)));
            }
            if (0..i).any(|o| device_record(rom, layout, o).is_some_and(|d| d.overlaps(&device))) {
                return Err(fault(Fault::DeviceShared(i)));
            }
        }
    }
    if next != layout.devices {
        return Err(RomError {
            place: Place::Header,
            fault: Fault::BadRange(List::Devices),
        });
    }
    Ok(())
}

/// Who serves a routed session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The parent (init, or what init asks its own parent for).
    Parent,
    /// The component with this index.
    Component(usize),
}

/// One route: the session type and who serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<'a> {
    pub service: &'a str,
    pub target: Target,
}

/// A component of a parsed ROM.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Component<'a> {
    rom: Rom<'a>,
    /// Position in the start order, from 0; a route's
    /// [`Target::Component`] names it.
    pub index: usize,
    pub name: &'a str,
    pub binary: &'a str,
    pub ram_mib: u32,
    pub caps: u32,
    pub priority: u8,
    pub cpu: u16,
    /// The CPUs it may place its threads on (holds `cpu`).
    pub cpus: CpuSet,
    pub restart: Restart,
    /// Its own capabilities (scenario key `own`).
    pub own: OwnCaps,
    /// What it gets of the shared service endpoint (scenario key
    /// `shared_endpoint`; always `Call` for a component that provides
    /// services, which gets an endpoint of its own instead).
    pub shared_endpoint: SharedEndpoint,
    /// Whether init kills it when a client of its Reconfig session asks
    /// (scenario key `killable`).
    pub killable: bool,
    provides: (u16, u16),
    routes: (u16, u16),
    devices: (u16, u16),
    /// Its own configuration (empty when the scenario gives none).
    pub config: Table<'a>,
    /// The bytes of `config`'s tree (none without a config).
    tree: &'a [u8],
}

impl<'a> Component<'a> {
    /// Its config tree as bytes (see the module doc; none when the
    /// scenario gives no `config`): what init serves as the component's
    /// `config` ROM, read back with [`super::parse_tree`].
    pub fn config_tree(&self) -> &'a [u8] {
        self.tree
    }

    /// The session types it provides.
    pub fn provides(&self) -> Services<'a> {
        Services {
            rom: self.rom,
            list: self.rom.layout.provides_list(),
            next: usize::from(self.provides.0),
            end: usize::from(self.provides.0) + usize::from(self.provides.1),
        }
    }

    /// Whether it provides `service`.
    pub fn provides_service(&self, service: &str) -> bool {
        self.provides().any(|s| s == service)
    }

    /// The devices it is given, in the order of the ROM: its I/O-port
    /// ranges, then its IRQs.
    pub fn devices(&self) -> Devices<'a> {
        Devices {
            rom: self.rom,
            next: usize::from(self.devices.0),
            end: usize::from(self.devices.0) + usize::from(self.devices.1),
        }
    }

    /// Its routes, in the order of the ROM.
    pub fn routes(&self) -> Routes<'a> {
        Routes {
            rom: self.rom,
            next: usize::from(self.routes.0),
            end: usize::from(self.routes.0) + usize::from(self.routes.1),
        }
    }

    /// Who serves its sessions of type `service`; `None` when the config
    /// does not route that type (init refuses the request).
    pub fn route(&self, service: &str) -> Option<Target> {
        self.routes()
            .find(|r| r.service == service)
            .map(|r| r.target)
    }

    /// The name of the component `target` names in this component's ROM
    /// (`None` for the parent): routes are followed by name, so a route
    /// still finds its provider after a config update moved it.
    pub fn target_name(&self, target: Target) -> Option<&'a str> {
        match target {
            Target::Parent => None,
            Target::Component(i) => self.rom.component(i).map(|c| c.name),
        }
    }

    /// Its argument word (`rdi` at its start): the integer `arg` of its
    /// config table (a negative one as its two's complement), 0 without
    /// one. Any other value is an error: xtask's checker refuses such a
    /// scenario, and a ROM made otherwise must not start the component
    /// with an argument it was not given.
    pub fn arg(&self) -> Result<u64, ArgError<'a>> {
        match self.config.get(ARG_KEY) {
            None => Ok(0),
            Some(Value::Integer(arg)) => Ok(arg as u64),
            Some(value) => Err(ArgError { value }),
        }
    }

    /// The owned form (route targets by name).
    pub fn to_spec(&self) -> ComponentSpec {
        let routes = self
            .routes()
            .map(|r| {
                let target = match r.target {
                    Target::Parent => RouteSpec::Parent,
                    Target::Component(i) => RouteSpec::Component(
                        self.rom
                            .component(i)
                            .map_or_else(String::new, |c| String::from(c.name)),
                    ),
                };
                (String::from(r.service), target)
            })
            .collect::<Vec<_>>();
        ComponentSpec {
            name: String::from(self.name),
            binary: String::from(self.binary),
            ram_mib: self.ram_mib,
            caps: self.caps,
            priority: self.priority,
            cpu: self.cpu,
            cpus: self.cpus,
            restart: self.restart,
            own: self.own,
            shared_endpoint: self.shared_endpoint,
            killable: self.killable,
            provides: self.provides().map(String::from).collect(),
            routes,
            devices: self.devices().collect(),
            config: self.config.to_entries(),
        }
    }
}

/// The config key whose integer value is a component's argument word
/// ([`Component::arg`]).
pub const ARG_KEY: &str = "arg";

/// A component's config `arg` that is not an integer ([`Component::arg`]).
/// Displays as `config arg: VALUE is not an integer`, a string quoted
/// with its control characters escaped and cut after
/// [`ArgError::SHOWN_CHARS`] characters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArgError<'a> {
    /// The value found.
    pub value: Value<'a>,
}

impl ArgError<'_> {
    /// Characters of a string value the message shows.
    pub const SHOWN_CHARS: usize = 32;
}

impl fmt::Display for ArgError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("config arg: ")?;
        match self.value {
            Value::String(s) => match s.char_indices().nth(Self::SHOWN_CHARS) {
                Some((cut, _)) => write!(f, "{:?}... ({} bytes)", &s[..cut], s.len())?,
                None => write!(f, "{s:?}")?,
            },
            Value::Bool(b) => write!(f, "{b}")?,
            Value::Float(x) => write!(f, "{x:?}")?,
            Value::Integer(i) => write!(f, "{i}")?,
            Value::Array(_) => f.write_str("an array")?,
            Value::Table(_) => f.write_str("a table")?,
        }
        f.write_str(" is not an integer")
    }
}

/// Iterator over the components of a ROM.
#[derive(Clone, Debug)]
pub struct Components<'a> {
    rom: Rom<'a>,
    next: usize,
}

impl<'a> Iterator for Components<'a> {
    type Item = Component<'a>;

    fn next(&mut self) -> Option<Component<'a>> {
        let c = self.rom.component(self.next)?;
        self.next += 1;
        Some(c)
    }
}

/// Iterator over a list of session types.
#[derive(Clone, Debug)]
pub struct Services<'a> {
    rom: Rom<'a>,
    list: usize,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Services<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.next >= self.end {
            return None;
        }
        let service = self
            .rom
            .service(list_entry(self.rom.bytes, self.list, self.next)?)?;
        self.next += 1;
        Some(service)
    }
}

/// Iterator over a component's devices.
#[derive(Clone, Debug)]
pub struct Devices<'a> {
    rom: Rom<'a>,
    next: usize,
    end: usize,
}

impl Iterator for Devices<'_> {
    type Item = Device;

    fn next(&mut self) -> Option<Device> {
        if self.next >= self.end {
            return None;
        }
        let device = device_record(self.rom.bytes, &self.rom.layout, self.next)?;
        self.next += 1;
        Some(device)
    }
}

/// Iterator over a component's routes.
#[derive(Clone, Debug)]
pub struct Routes<'a> {
    rom: Rom<'a>,
    next: usize,
    end: usize,
}

impl<'a> Iterator for Routes<'a> {
    type Item = Route<'a>;

    fn next(&mut self) -> Option<Route<'a>> {
        if self.next >= self.end {
            return None;
        }
        let (service, target) = route_record(self.rom.bytes, &self.rom.layout, self.next)?;
        self.next += 1;
        Some(Route {
            service: self.rom.service(service)?,
            target: if target == PARENT {
                Target::Parent
            } else {
                Target::Component(usize::from(target))
            },
        })
    }
}
