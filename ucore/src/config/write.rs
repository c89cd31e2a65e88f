//! The encoder: [`encode`] lays a [`Spec`] out in the format of the
//! parent module and checks the result with [`Rom::parse`], so whatever it
//! returns, the decoder accepts.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use abi::cpu::CpuSet;

use super::value::{self, ValueBuf};
use super::{
    Device, OwnCaps, Restart, Rom, RomError, SharedEndpoint, COMPONENT_SIZE, DEVICE_SIZE,
    HEADER_SIZE, MAGIC, MAX_COMPONENTS, MAX_SERVICES, PARENT, VERSION,
};

/// A whole config, owned: what xtask's checker produces and [`encode`]
/// writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Spec {
    /// Session types the parent offers.
    pub parent_provides: Vec<String>,
    /// The components in start order.
    pub components: Vec<ComponentSpec>,
}

/// One component, owned.
#[derive(Clone, Debug, PartialEq)]
pub struct ComponentSpec {
    pub name: String,
    pub binary: String,
    pub ram_mib: u32,
    pub caps: u32,
    pub priority: u8,
    pub cpu: u16,
    /// The CPUs it may use; must hold `cpu`.
    pub cpus: CpuSet,
    pub restart: Restart,
    /// Its own capabilities (`interfaces::child::OWN_THREAD`, ...).
    pub own: OwnCaps,
    /// What it gets of the shared service endpoint; `Serve` only without
    /// `provides`.
    pub shared_endpoint: SharedEndpoint,
    /// Whether init kills it when asked on a Reconfig session
    /// ([`super::FLAG_KILLABLE`]).
    pub killable: bool,
    pub provides: Vec<String>,
    /// (session type, provider), in the order to store.
    pub routes: Vec<(String, RouteSpec)>,
    /// Its devices: I/O-port ranges first, then IRQs (the order of its
    /// capability slots, `interfaces::child::DEVICES`).
    pub devices: Vec<Device>,
    /// The entries of its config table (stored sorted by key).
    pub config: Vec<(String, ValueBuf)>,
}

/// A route's provider, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteSpec {
    Parent,
    Component(String),
}

/// Why a [`Spec`] cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// More than [`MAX_COMPONENTS`] components.
    TooManyComponents(usize),
    /// More than [`MAX_SERVICES`] distinct session types.
    TooManyServices(usize),
    /// A route of component `component` names a provider that is no
    /// component.
    UnknownTarget { component: usize, target: String },
    /// A list, string or the whole ROM is too long for its field.
    TooLarge,
    /// The result breaks a rule of the format (a name, a range, a route
    /// to a non-provider, ...): the decoder's verdict.
    Invalid(RomError),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::TooManyComponents(n) => {
                write!(f, "{n} components, at most {MAX_COMPONENTS} are allowed")
            }
            EncodeError::TooManyServices(n) => {
                write!(f, "{n} session types, at most {MAX_SERVICES} are allowed")
            }
            EncodeError::UnknownTarget { component, target } => {
                write!(
                    f,
                    "component {component} routes to \"{target}\", which is no component"
                )
            }
            EncodeError::TooLarge => f.write_str("the config does not fit the ROM's fields"),
            EncodeError::Invalid(e) => write!(f, "{e}"),
        }
    }
}

/// The distinct session types of `spec`, in order of first appearance.
fn services(spec: &Spec) -> Vec<&str> {
    let mut all: Vec<&str> = Vec::new();
    let named = spec.parent_provides.iter().chain(
        spec.components
            .iter()
            .flat_map(|c| c.provides.iter().chain(c.routes.iter().map(|(s, _)| s))),
    );
    for name in named {
        if !all.contains(&name.as_str()) {
            all.push(name);
        }
    }
    all
}

fn u16_of(n: usize) -> Result<u16, EncodeError> {
    u16::try_from(n).map_err(|_| EncodeError::TooLarge)
}

fn u32_of(n: usize) -> Result<u32, EncodeError> {
    u32::try_from(n).map_err(|_| EncodeError::TooLarge)
}

/// The string pool, built as strings are referenced.
#[derive(Default)]
struct Pool(Vec<u8>);

impl Pool {
    /// Appends `s`; its reference as stored: offset u32, length u16.
    fn add(&mut self, s: &str) -> Result<[u8; 6], EncodeError> {
        let offset = u32_of(self.0.len())?;
        let len = u16_of(s.len())?;
        self.0.extend_from_slice(s.as_bytes());
        let mut r = [0u8; 6];
        r[..4].copy_from_slice(&offset.to_le_bytes());
        r[4..].copy_from_slice(&len.to_le_bytes());
        Ok(r)
    }
}

/// Bytes a component's config tree takes in the ROM (the limit is
/// [`super::MAX_CONFIG_BYTES`]); `None` when a key or string is too long
/// for its length field.
pub fn encoded_config_len(config: &[(String, ValueBuf)]) -> Option<usize> {
    let mut out = Vec::new();
    value::encode_table(config, &mut out)?;
    Some(out.len())
}

/// Encodes `spec` as a config ROM and checks it with [`Rom::parse`].
pub fn encode(spec: &Spec) -> Result<Vec<u8>, EncodeError> {
    if spec.components.len() > MAX_COMPONENTS {
        return Err(EncodeError::TooManyComponents(spec.components.len()));
    }
    let services = services(spec);
    if services.len() > MAX_SERVICES {
        return Err(EncodeError::TooManyServices(services.len()));
    }
    // Every name in `services` was collected from `spec`: found.
    let index_of = |s: &str| services.iter().position(|n| *n == s).unwrap_or(0) as u16;

    let mut pool = Pool::default();
    let mut table = Vec::with_capacity(spec.components.len() * COMPONENT_SIZE);
    let mut provides = Vec::new();
    let mut routes = Vec::new();
    let mut devices = Vec::new();
    let mut config = Vec::new();
    for (index, c) in spec.components.iter().enumerate() {
        let mut record = [0u8; COMPONENT_SIZE];
        record[0..6].copy_from_slice(&pool.add(&c.name)?);
        record[6..12].copy_from_slice(&pool.add(&c.binary)?);
        record[12..16].copy_from_slice(&c.ram_mib.to_le_bytes());
        record[16..20].copy_from_slice(&c.caps.to_le_bytes());
        record[20] = c.priority;
        let (kind, max, backoff_ms) = c.restart.to_raw();
        record[21] = kind;
        record[22..24].copy_from_slice(&c.cpu.to_le_bytes());
        record[24..28].copy_from_slice(&max.to_le_bytes());
        record[28..32].copy_from_slice(&backoff_ms.to_le_bytes());

        record[32..34].copy_from_slice(&u16_of(provides.len() / 2)?.to_le_bytes());
        record[34..36].copy_from_slice(&u16_of(c.provides.len())?.to_le_bytes());
        for service in &c.provides {
            provides.extend_from_slice(&index_of(service).to_le_bytes());
        }

        record[36..38].copy_from_slice(&u16_of(routes.len() / 4)?.to_le_bytes());
        record[38..40].copy_from_slice(&u16_of(c.routes.len())?.to_le_bytes());
        for (service, target) in &c.routes {
            let target = match target {
                RouteSpec::Parent => PARENT,
                RouteSpec::Component(name) => spec
                    .components
                    .iter()
                    .position(|o| o.name == *name)
                    .map(|i| i as u16)
                    .ok_or_else(|| EncodeError::UnknownTarget {
                        component: index,
                        target: name.clone(),
                    })?,
            };
            routes.extend_from_slice(&index_of(service).to_le_bytes());
            routes.extend_from_slice(&target.to_le_bytes());
        }

        record[48..50].copy_from_slice(&u16_of(devices.len() / DEVICE_SIZE)?.to_le_bytes());
        record[50..52].copy_from_slice(&u16_of(c.devices.len())?.to_le_bytes());
        record[52..60].copy_from_slice(&c.cpus.bits().to_le_bytes());
        record[60] = c.own.bits();
        record[61] = c.shared_endpoint.to_raw();
        record[62] = if c.killable { super::FLAG_KILLABLE } else { 0 };
        for device in &c.devices {
            let (kind, a, b) = device.to_raw();
            devices.extend_from_slice(&[kind, 0]);
            devices.extend_from_slice(&a.to_le_bytes());
            devices.extend_from_slice(&b.to_le_bytes());
        }

        // A component without config stores none (length 0).
        let config_start = config.len();
        if !c.config.is_empty() {
            value::encode_table(&c.config, &mut config).ok_or(EncodeError::TooLarge)?;
        }
        record[40..44].copy_from_slice(&u32_of(config_start)?.to_le_bytes());
        record[44..48].copy_from_slice(&u32_of(config.len() - config_start)?.to_le_bytes());
        table.extend_from_slice(&record);
    }
    let mut service_table = Vec::with_capacity(services.len() * 6);
    for service in &services {
        service_table.extend_from_slice(&pool.add(service)?);
    }
    let mut parent = Vec::with_capacity(spec.parent_provides.len() * 2);
    for service in &spec.parent_provides {
        parent.extend_from_slice(&index_of(service).to_le_bytes());
    }

    let size = HEADER_SIZE
        + table.len()
        + service_table.len()
        + parent.len()
        + provides.len()
        + routes.len()
        + devices.len()
        + config.len()
        + pool.0.len();
    let mut rom = Vec::with_capacity(size);
    rom.extend_from_slice(&MAGIC);
    rom.extend_from_slice(&VERSION.to_le_bytes());
    rom.extend_from_slice(&u32_of(size)?.to_le_bytes());
    for count in [
        spec.components.len(),
        services.len(),
        parent.len() / 2,
        provides.len() / 2,
        routes.len() / 4,
        devices.len() / DEVICE_SIZE,
    ] {
        rom.extend_from_slice(&u16_of(count)?.to_le_bytes());
    }
    rom.extend_from_slice(&u32_of(config.len())?.to_le_bytes());
    for part in [
        &table,
        &service_table,
        &parent,
        &provides,
        &routes,
        &devices,
        &config,
        &pool.0,
    ] {
        rom.extend_from_slice(part);
    }
    Rom::parse(&rom).map_err(EncodeError::Invalid)?;
    Ok(rom)
}
