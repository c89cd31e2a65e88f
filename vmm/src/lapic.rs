//! A local APIC in x2APIC mode (its registers are MSRs 0x800..0x83f, so
//! every access is an MSR exit whose operands the CPU hands over — no
//! instruction to decode), with its timer in one-shot, periodic and
//! TSC-deadline mode (MSR 0x6e0). The guest starts with the x2APIC
//! already on (APIC_BASE bits EN and EXTD, as a firmware that enabled it
//! leaves it): Linux keeps it and never looks for the xAPIC page.
//!
//! The VMM asks [`Lapic::pending`] for the vector to inject (the highest
//! requested one above the processor priority), tells [`Lapic::accept`]
//! when it injected it (IRR to ISR), and the guest's EOI ends it. A
//! level-triggered vector (the I/O APIC's, [`Lapic::raise_level`]) has its
//! TMR bit set, and its EOI is broadcast: the write answers
//! [`Effect::LevelEoi`] and the VMM passes it to the I/O APIC. ExtINT
//! on LINT0 (virtual-wire mode: the 8259's interrupts) bypasses the APIC:
//! [`Lapic::passes_extint`] says whether the VMM may inject the PIC's
//! vector.
//!
//! Time: the timer's count runs at [`BUS_HZ`] divided by its divide
//! configuration; the VMM passes `now` (ns) and the guest's TSC with
//! every call that needs them.

/// The APIC timer's input clock: 1 GHz, one count per nanosecond before
/// the divider (Linux measures it against the PIT; any rate works).
pub const BUS_HZ: u64 = 1_000_000_000;

pub const MSR_APIC_BASE: u32 = 0x1b;
pub const MSR_TSC_DEADLINE: u32 = 0x6e0;
const APIC_BASE_DEFAULT: u64 = 0xfee0_0000;
const BASE_BSP: u64 = 1 << 8;
const BASE_EXTD: u64 = 1 << 10;
const BASE_EN: u64 = 1 << 11;

/// x2APIC MSR numbers (0x800 + xAPIC offset / 16).
mod reg {
    pub const ID: u32 = 0x802;
    pub const VERSION: u32 = 0x803;
    pub const TPR: u32 = 0x808;
    pub const PPR: u32 = 0x80a;
    pub const EOI: u32 = 0x80b;
    pub const LDR: u32 = 0x80d;
    pub const SVR: u32 = 0x80f;
    pub const ISR0: u32 = 0x810;
    pub const TMR0: u32 = 0x818;
    pub const IRR0: u32 = 0x820;
    pub const ESR: u32 = 0x828;
    pub const LVT_CMCI: u32 = 0x82f;
    pub const ICR: u32 = 0x830;
    pub const LVT_TIMER: u32 = 0x832;
    pub const LVT_THERMAL: u32 = 0x833;
    pub const LVT_PERF: u32 = 0x834;
    pub const LVT_LINT0: u32 = 0x835;
    pub const LVT_LINT1: u32 = 0x836;
    pub const LVT_ERROR: u32 = 0x837;
    pub const TIMER_INITIAL: u32 = 0x838;
    pub const TIMER_CURRENT: u32 = 0x839;
    pub const TIMER_DIVIDE: u32 = 0x83e;
    pub const SELF_IPI: u32 = 0x83f;
}

const LVT_MASKED: u32 = 1 << 16;
const TIMER_PERIODIC: u32 = 1 << 17;
const TIMER_DEADLINE: u32 = 2 << 17;
const DELIVERY_EXTINT: u32 = 7 << 8;
const DELIVERY_NMI: u32 = 4 << 8;

/// The guest's access was not allowed: the VMM injects #GP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeneralProtection;

/// What a write asks of the VMM beyond this APIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// An NMI to this CPU (ICR).
    SelfNmi,
    /// An interrupt, INIT or startup for other CPUs (ICR value), which
    /// this VMM's single CPU ignores.
    Others(u64),
    /// The EOI ended level-triggered `vector`: the I/O APIC's entries
    /// with it may request again (the EOI broadcast).
    LevelEoi(u8),
}

/// Time as a call sees it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Now {
    /// Nanoseconds since the VMM started.
    pub ns: u64,
    /// The guest's TSC.
    pub tsc: u64,
}

/// One local APIC.
#[derive(Clone, Debug)]
pub struct Lapic {
    id: u32,
    base: u64,
    tpr: u32,
    svr: u32,
    irr: [u32; 8],
    isr: [u32; 8],
    tmr: [u32; 8],
    esr: u32,
    icr: u64,
    lvt_timer: u32,
    lvt_thermal: u32,
    lvt_perf: u32,
    lvt_lint0: u32,
    lvt_lint1: u32,
    lvt_error: u32,
    lvt_cmci: u32,
    divide: u32,
    initial: u32,
    /// When the count was loaded (ns), for one-shot and periodic mode.
    loaded_at: Option<u64>,
    /// Periods already turned into interrupts.
    fired: u64,
    deadline: u64,
}

fn bit(v: &[u32; 8], vector: u8) -> bool {
    v[usize::from(vector >> 5)] & (1 << (vector & 31)) != 0
}

fn set(v: &mut [u32; 8], vector: u8, on: bool) {
    let (w, b) = (usize::from(vector >> 5), 1u32 << (vector & 31));
    if on {
        v[w] |= b;
    } else {
        v[w] &= !b;
    }
}

fn highest(v: &[u32; 8]) -> Option<u8> {
    (0..8).rev().find_map(|w| {
        let x = v[w];
        (x != 0).then(|| (w as u8) << 5 | (31 - x.leading_zeros()) as u8)
    })
}

impl Lapic {
    /// The APIC of the CPU with x2APIC ID `id` as firmware leaves it:
    /// x2APIC mode on, software-enabled, LINT0 ExtINT and LINT1 NMI
    /// (virtual wire), the timer masked.
    pub fn new(id: u32) -> Lapic {
        Lapic {
            id,
            base: APIC_BASE_DEFAULT | BASE_EN | BASE_EXTD | if id == 0 { BASE_BSP } else { 0 },
            tpr: 0,
            svr: 0x1ff,
            irr: [0; 8],
            isr: [0; 8],
            tmr: [0; 8],
            esr: 0,
            icr: 0,
            lvt_timer: LVT_MASKED,
            lvt_thermal: LVT_MASKED,
            lvt_perf: LVT_MASKED,
            lvt_lint0: DELIVERY_EXTINT,
            lvt_lint1: DELIVERY_NMI,
            lvt_error: LVT_MASKED,
            lvt_cmci: LVT_MASKED,
            divide: 0,
            initial: 0,
            loaded_at: None,
            fired: 0,
            deadline: 0,
        }
    }

    /// Whether `msr` is this APIC's.
    pub fn owns(msr: u32) -> bool {
        matches!(msr, MSR_APIC_BASE | MSR_TSC_DEADLINE | 0x800..=0x8ff)
    }

    fn enabled(&self) -> bool {
        self.base & BASE_EN != 0 && self.svr & 0x100 != 0
    }

    fn ppr(&self) -> u32 {
        let isr = highest(&self.isr).map_or(0, |v| u32::from(v) & 0xf0);
        if self.tpr & 0xf0 >= isr {
            self.tpr & 0xff
        } else {
            isr
        }
    }

    fn divisor(&self) -> u64 {
        let code = (self.divide & 3) | (self.divide & 8) >> 1;
        if code == 7 {
            1
        } else {
            2 << code
        }
    }

    fn timer_mode(&self) -> u32 {
        self.lvt_timer & (3 << 17)
    }

    fn period_ns(&self) -> u64 {
        u64::from(self.initial) * self.divisor() * 1_000_000_000 / BUS_HZ
    }

    fn current_count(&self, now: Now) -> u32 {
        let Some(at) = self.loaded_at else { return 0 };
        if self.timer_mode() == TIMER_DEADLINE || self.initial == 0 {
            return 0;
        }
        let counts = (now.ns.saturating_sub(at) as u128 * BUS_HZ as u128
            / 1_000_000_000
            / self.divisor() as u128) as u64;
        let initial = u64::from(self.initial);
        if self.timer_mode() == TIMER_PERIODIC {
            (initial - counts % initial) as u32
        } else {
            initial.saturating_sub(counts) as u32
        }
    }

    /// An MSR read.
    pub fn read(&self, msr: u32, now: Now) -> Result<u64, GeneralProtection> {
        let v = match msr {
            MSR_APIC_BASE => return Ok(self.base),
            MSR_TSC_DEADLINE => return Ok(self.deadline),
            reg::ID => self.id,
            reg::VERSION => 0x0005_0014, // version 0x14, 6 LVT entries
            reg::TPR => self.tpr,
            reg::PPR => self.ppr(),
            // Logical destination: cluster id << 16 | 1 << (id & 15).
            reg::LDR => (self.id >> 4) << 16 | 1 << (self.id & 15),
            reg::SVR => self.svr,
            r @ reg::ISR0..=0x817 => self.isr[(r - reg::ISR0) as usize],
            r @ reg::TMR0..=0x81f => self.tmr[(r - reg::TMR0) as usize],
            r @ reg::IRR0..=0x827 => self.irr[(r - reg::IRR0) as usize],
            reg::ESR => self.esr,
            reg::ICR => return Ok(self.icr),
            reg::LVT_CMCI => self.lvt_cmci,
            reg::LVT_TIMER => self.lvt_timer,
            reg::LVT_THERMAL => self.lvt_thermal,
            reg::LVT_PERF => self.lvt_perf,
            reg::LVT_LINT0 => self.lvt_lint0,
            reg::LVT_LINT1 => self.lvt_lint1,
            reg::LVT_ERROR => self.lvt_error,
            reg::TIMER_INITIAL => self.initial,
            reg::TIMER_CURRENT => self.current_count(now),
            reg::TIMER_DIVIDE => self.divide,
            _ => return Err(GeneralProtection),
        };
        Ok(u64::from(v))
    }

    /// An MSR write; `Ok(Some(effect))` when it asks for more.
    pub fn write(
        &mut self,
        msr: u32,
        value: u64,
        now: Now,
    ) -> Result<Option<Effect>, GeneralProtection> {
        let v = value as u32;
        // x2APIC registers are 32 bits but for the ICR: high bits #GP.
        if (0x800..=0x8ff).contains(&msr) && msr != reg::ICR && value >> 32 != 0 {
            return Err(GeneralProtection);
        }
        match msr {
            MSR_APIC_BASE => {
                // Leaving x2APIC mode (or turning the APIC off) is not
                // offered: this VMM has no xAPIC page.
                if value & (BASE_EN | BASE_EXTD) != BASE_EN | BASE_EXTD {
                    return Err(GeneralProtection);
                }
                // The BSP bit is read-only; the address means nothing in
                // x2APIC mode and is kept as written.
                self.base = value & !(0x6ff | BASE_BSP) | self.base & BASE_BSP;
            }
            MSR_TSC_DEADLINE => {
                if self.timer_mode() == TIMER_DEADLINE {
                    self.deadline = value;
                }
            }
            reg::TPR => self.tpr = v & 0xff,
            reg::EOI => {
                if v != 0 {
                    return Err(GeneralProtection);
                }
                if let Some(vector) = highest(&self.isr) {
                    set(&mut self.isr, vector, false);
                    if bit(&self.tmr, vector) {
                        return Ok(Some(Effect::LevelEoi(vector)));
                    }
                }
            }
            reg::SVR => self.svr = v & 0x11ff,
            reg::ESR => self.esr = 0,
            reg::ICR => return Ok(self.write_icr(value)),
            reg::LVT_CMCI => self.lvt_cmci = v & 0x1_07ff,
            reg::LVT_TIMER => {
                let old = self.timer_mode();
                self.lvt_timer = v & 0x7_10ff;
                if self.timer_mode() != old {
                    self.deadline = 0;
                    self.loaded_at = None;
                }
            }
            reg::LVT_THERMAL => self.lvt_thermal = v & 0x1_07ff,
            reg::LVT_PERF => self.lvt_perf = v & 0x1_07ff,
            reg::LVT_LINT0 => self.lvt_lint0 = v & 0x1_a7ff,
            reg::LVT_LINT1 => self.lvt_lint1 = v & 0x1_a7ff,
            reg::LVT_ERROR => self.lvt_error = v & 0x1_00ff,
            reg::TIMER_INITIAL => {
                self.initial = v;
                self.fired = 0;
                self.loaded_at = (v != 0 && self.timer_mode() != TIMER_DEADLINE).then_some(now.ns);
            }
            reg::TIMER_DIVIDE => self.divide = v & 0xb,
            reg::SELF_IPI => self.raise(v as u8),
            // Read-only or reserved.
            _ => return Err(GeneralProtection),
        }
        Ok(None)
    }

    fn write_icr(&mut self, value: u64) -> Option<Effect> {
        self.icr = value & !(1 << 12); // never "send pending"
        let vector = value as u8;
        let delivery = (value >> 8) & 7;
        let shorthand = (value >> 18) & 3;
        let dest = (value >> 32) as u32;
        let to_self = shorthand == 1 || (shorthand == 0 && dest == self.id) || shorthand == 2;
        let to_others = shorthand >= 2 || (shorthand == 0 && dest != self.id);
        if to_self {
            match delivery {
                0 | 1 => self.raise(vector),
                4 => return Some(Effect::SelfNmi),
                _ => {}
            }
        }
        to_others.then_some(Effect::Others(value))
    }

    /// Raises edge-triggered `vector` (a timer, an IPI, a device's MSI or
    /// an edge-triggered I/O APIC line).
    pub fn raise(&mut self, vector: u8) {
        self.request(vector, false);
    }

    /// Raises level-triggered `vector` (an I/O APIC line): its TMR bit is
    /// set, so that its EOI is broadcast ([`Effect::LevelEoi`]) — and
    /// Linux, which reads the TMR before its EOI, sees it level.
    pub fn raise_level(&mut self, vector: u8) {
        self.request(vector, true);
    }

    /// Vectors below 16 are reserved: the APIC refuses them.
    fn request(&mut self, vector: u8, level: bool) {
        if vector >= 16 {
            set(&mut self.irr, vector, true);
            set(&mut self.tmr, vector, level);
        }
    }

    /// Turns timer expiries by `now` into requests; call before
    /// [`Lapic::pending`].
    pub fn tick(&mut self, now: Now) {
        if !self.enabled() {
            return;
        }
        let masked = self.lvt_timer & LVT_MASKED != 0;
        let vector = self.lvt_timer as u8;
        match self.timer_mode() {
            TIMER_DEADLINE => {
                if self.deadline != 0 && now.tsc >= self.deadline {
                    self.deadline = 0;
                    if !masked {
                        self.raise(vector);
                    }
                }
            }
            mode => {
                let Some(at) = self.loaded_at else { return };
                let period = self.period_ns().max(1);
                let due = now.ns.saturating_sub(at) / period;
                if due > self.fired {
                    self.fired = due;
                    if mode != TIMER_PERIODIC {
                        self.loaded_at = None;
                    }
                    if !masked {
                        self.raise(vector);
                    }
                }
            }
        }
    }

    /// When the timer fires next: (ns, if a count timer) or (guest TSC,
    /// if a deadline).
    pub fn next_timer(&self) -> Option<TimerDue> {
        if !self.enabled() || self.lvt_timer & LVT_MASKED != 0 {
            return None;
        }
        match self.timer_mode() {
            TIMER_DEADLINE => (self.deadline != 0).then_some(TimerDue::Tsc(self.deadline)),
            _ => {
                let at = self.loaded_at?;
                Some(TimerDue::Ns(
                    at + (self.fired + 1) * self.period_ns().max(1),
                ))
            }
        }
    }

    /// The vector to inject now, if the guest's priority allows one.
    pub fn pending(&self) -> Option<u8> {
        if !self.enabled() {
            return None;
        }
        let v = highest(&self.irr)?;
        (u32::from(v) & 0xf0 > self.ppr() & 0xf0).then_some(v)
    }

    /// The VMM injected `vector`: it moves from requested to in service.
    pub fn accept(&mut self, vector: u8) {
        set(&mut self.irr, vector, false);
        set(&mut self.isr, vector, true);
    }

    /// Whether the 8259's interrupts reach the CPU (LINT0 as unmasked
    /// ExtINT, or the APIC off).
    pub fn passes_extint(&self) -> bool {
        if !self.enabled() {
            return true;
        }
        self.lvt_lint0 & (LVT_MASKED | 7 << 8) == DELIVERY_EXTINT
    }

    /// Whether `vector` is requested (for tests and the status line).
    pub fn requested(&self, vector: u8) -> bool {
        bit(&self.irr, vector)
    }
}

/// When a timer is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerDue {
    Ns(u64),
    Tsc(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: u64) -> Now {
        Now { ns, tsc: ns * 2 }
    }

    #[test]
    fn priorities_and_eoi() {
        let mut a = Lapic::new(0);
        a.raise(0x31);
        a.raise(0x51);
        assert_eq!(a.pending(), Some(0x51));
        a.accept(0x51);
        // 0x31 is below the in-service class 0x50.
        assert_eq!(a.pending(), None);
        a.raise(0x61);
        assert_eq!(a.pending(), Some(0x61));
        a.accept(0x61);
        a.write(reg::EOI, 0, at(0)).unwrap();
        a.write(reg::EOI, 0, at(0)).unwrap();
        assert_eq!(a.pending(), Some(0x31));
        // TPR blocks its class and below.
        a.write(reg::TPR, 0x30, at(0)).unwrap();
        assert_eq!(a.pending(), None);
        a.write(reg::TPR, 0, at(0)).unwrap();
        assert_eq!(a.pending(), Some(0x31));
        // Software-disabled: nothing.
        a.write(reg::SVR, 0xff, at(0)).unwrap();
        assert_eq!(a.pending(), None);
        assert!(a.passes_extint());
    }

    #[test]
    fn level_vectors_broadcast_their_eoi() {
        let tmr = |a: &Lapic, v: u8| {
            a.read(reg::TMR0 + u32::from(v >> 5), at(0)).unwrap() >> (v & 31) & 1
        };
        let mut a = Lapic::new(0);
        a.raise_level(0x41);
        a.raise(0x31);
        assert_eq!(tmr(&a, 0x41), 1, "Linux reads it before its EOI");
        assert_eq!(tmr(&a, 0x31), 0);
        a.accept(0x41);
        assert_eq!(
            a.write(reg::EOI, 0, at(0)),
            Ok(Some(Effect::LevelEoi(0x41)))
        );
        a.accept(0x31);
        assert_eq!(a.write(reg::EOI, 0, at(0)), Ok(None), "edge");
        assert_eq!(a.write(reg::EOI, 0, at(0)), Ok(None), "none in service");
        // The same vector raised edge-triggered later is edge again.
        a.raise(0x41);
        assert_eq!(tmr(&a, 0x41), 0);
        a.accept(0x41);
        assert_eq!(a.write(reg::EOI, 0, at(0)), Ok(None));
        a.raise_level(3);
        assert!(!a.requested(3), "reserved vectors are refused");
    }

    #[test]
    fn tsc_deadline_timer() {
        let mut a = Lapic::new(0);
        a.write(reg::LVT_TIMER, u64::from(TIMER_DEADLINE | 0xec), at(0))
            .unwrap();
        a.write(MSR_TSC_DEADLINE, 1000, at(0)).unwrap();
        assert_eq!(a.next_timer(), Some(TimerDue::Tsc(1000)));
        a.tick(at(400)); // tsc 800
        assert_eq!(a.pending(), None);
        a.tick(at(500)); // tsc 1000
        assert_eq!(a.pending(), Some(0xec));
        assert_eq!(a.read(MSR_TSC_DEADLINE, at(500)), Ok(0), "disarmed");
        assert_eq!(a.next_timer(), None);
    }

    #[test]
    fn periodic_and_one_shot_timer() {
        let mut a = Lapic::new(0);
        a.write(reg::TIMER_DIVIDE, 0xb, at(0)).unwrap(); // divide by 1
        a.write(reg::LVT_TIMER, u64::from(TIMER_PERIODIC | 0x40), at(0))
            .unwrap();
        a.write(reg::TIMER_INITIAL, 1000, at(0)).unwrap();
        assert_eq!(a.read(reg::TIMER_CURRENT, at(250)), Ok(750));
        a.tick(at(999));
        assert_eq!(a.pending(), None);
        a.tick(at(1000));
        assert_eq!(a.pending(), Some(0x40));
        a.accept(0x40);
        a.write(reg::EOI, 0, at(1000)).unwrap();
        assert_eq!(a.next_timer(), Some(TimerDue::Ns(2000)));
        // One shot, divide by 2.
        a.write(reg::TIMER_DIVIDE, 0, at(0)).unwrap();
        a.write(reg::LVT_TIMER, 0x41, at(0)).unwrap();
        a.write(reg::TIMER_INITIAL, 100, at(5000)).unwrap();
        a.tick(at(5199));
        assert!(!a.requested(0x41));
        a.tick(at(5200));
        assert!(a.requested(0x41));
        assert_eq!(a.next_timer(), None);
    }

    #[test]
    fn ipis_and_bad_accesses() {
        let mut a = Lapic::new(0);
        assert_eq!(a.write(reg::SELF_IPI, 0x77, at(0)), Ok(None));
        assert!(a.requested(0x77));
        assert_eq!(a.write(reg::ICR, 0x4_0000 | 0x78, at(0)), Ok(None)); // self shorthand
        assert!(a.requested(0x78));
        assert_eq!(
            a.write(reg::ICR, 1 << 32 | 0x4500, at(0)),
            Ok(Some(Effect::Others(1 << 32 | 0x4500)))
        );
        assert_eq!(a.write(reg::ICR, 0x400, at(0)), Ok(Some(Effect::SelfNmi)));
        assert_eq!(a.read(reg::EOI, at(0)), Err(GeneralProtection));
        assert_eq!(a.write(reg::ID, 5, at(0)), Err(GeneralProtection));
        assert_eq!(a.write(reg::EOI, 1, at(0)), Err(GeneralProtection));
        assert_eq!(a.write(reg::TPR, 1 << 40, at(0)), Err(GeneralProtection));
        assert_eq!(
            a.write(MSR_APIC_BASE, 0xfee0_0000 | BASE_EN, at(0)),
            Err(GeneralProtection)
        );
        assert_eq!(
            a.read(MSR_APIC_BASE, at(0)),
            Ok(0xfee0_0000 | BASE_EN | BASE_EXTD | BASE_BSP)
        );
        assert_eq!(a.read(reg::LDR, at(0)), Ok(1));
        for msr in 0x800..=0x8ff {
            for v in [0, 1, 0xffff_ffff, u64::MAX] {
                let _ = a.write(msr, v, at(v & 0xffff));
                let _ = a.read(msr, at(7));
                a.tick(at(v & 0xfffff));
            }
        }
    }
}
