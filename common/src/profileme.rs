//! Alpha ProfileMe (EV67 and later): decoding the 28-byte `struct alpha_profileme_sample`
//! PERF_SAMPLE_RAW payload and the DCPI-style per-sample classification of seed 002
//! (`alpha-sample-raw.c` for `dump`, `alpha-profileme.py` for `report --profileme`),
//! plus the `perf_mem_data_src` bits that `report --mem` reads.
//!
//! Payload (little-endian on the wire, whatever the host's byte order; nothing
//! guarantees its alignment, so it is copied out byte by byte):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | version, [`SAMPLE_VERSION`] or later (later versions append fields) |
//! | 4 | 8 | PMPC: the profiled instruction's PC; bit 0 set = PALcode |
//! | 12 | 8 | I_STAT: only bits 40:30 |
//! | 20 | 8 | PCTR_CTL: only bits 47:0 |

/// `ALPHA_PROFILEME_SAMPLE_VERSION` of the kernel's uapi header.
pub const SAMPLE_VERSION: u32 = 1;
/// `sizeof(struct alpha_profileme_sample)`.
pub const SAMPLE_SIZE: usize = 28;

/// perf_event_attr types whose raw data can be ProfileMe status: the cpu PMU's
/// (PERF_TYPE_HARDWARE and PERF_TYPE_RAW). A tracepoint's payload can pass for it.
pub const fn is_cpu_pmu_type(attr_type: u32) -> bool {
    attr_type == 0 || attr_type == 4
}

/// One ProfileMe sample's registers, converted from little-endian.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Payload {
    pub version: u32,
    pub pmpc: u64,
    pub i_stat: u64,
    pub pctr_ctl: u64,
}

/// Why a sample's raw data was not taken as ProfileMe status (each is counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// No raw data, or fewer than 28 bytes of it.
    Short,
    /// A version below [`SAMPLE_VERSION`].
    Version,
    /// Raw data from an event that is not the cpu PMU's (a tracepoint, another PMU).
    NotCpuPmu,
}

fn le64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

impl Payload {
    /// Decodes a raw payload of an event of perf_event_attr type `attr_type`.
    pub fn parse(attr_type: u32, raw: Option<&[u8]>) -> Result<Payload, Skip> {
        if !is_cpu_pmu_type(attr_type) {
            return Err(Skip::NotCpuPmu);
        }
        let raw = match raw {
            Some(r) if r.len() >= SAMPLE_SIZE => r,
            _ => return Err(Skip::Short),
        };
        let p = Payload {
            version: u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]),
            pmpc: le64(&raw[4..]),
            i_stat: le64(&raw[12..]),
            pctr_ctl: le64(&raw[20..]),
        };
        if p.version < SAMPLE_VERSION {
            return Err(Skip::Version);
        }
        Ok(p)
    }

    /// The 28 payload bytes (little-endian), as the kernel lays them out.
    pub fn to_bytes(&self) -> [u8; SAMPLE_SIZE] {
        let mut b = [0u8; SAMPLE_SIZE];
        b[0..4].copy_from_slice(&self.version.to_le_bytes());
        b[4..12].copy_from_slice(&self.pmpc.to_le_bytes());
        b[12..20].copy_from_slice(&self.i_stat.to_le_bytes());
        b[20..28].copy_from_slice(&self.pctr_ctl.to_le_bytes());
        b
    }

    // I_STAT
    pub const fn ovr(&self) -> u64 {
        (self.i_stat >> 30) & 0x7
    }
    pub const fn icm(&self) -> u64 {
        (self.i_stat >> 33) & 1
    }
    pub const fn trap_type(&self) -> u64 {
        (self.i_stat >> 34) & 0xf
    }
    pub const fn lso(&self) -> u64 {
        (self.i_stat >> 38) & 1
    }
    pub const fn trp(&self) -> u64 {
        (self.i_stat >> 39) & 1
    }
    pub const fn mis(&self) -> u64 {
        (self.i_stat >> 40) & 1
    }
    // PCTR_CTL
    pub const fn tak(&self) -> u64 {
        self.pctr_ctl & 1
    }
    pub const fn val(&self) -> u64 {
        (self.pctr_ctl >> 1) & 1
    }
    pub const fn sl1(&self) -> u64 {
        (self.pctr_ctl >> 2) & 3
    }
    pub const fn sl0(&self) -> u64 {
        (self.pctr_ctl >> 4) & 1
    }
    pub const fn pctr1(&self) -> u64 {
        (self.pctr_ctl >> 6) & 0xfffff
    }
    pub const fn killed(&self) -> u64 {
        (self.pctr_ctl >> 26) & 1
    }
    pub const fn stalled(&self) -> u64 {
        (self.pctr_ctl >> 27) & 1
    }
    pub const fn pctr0(&self) -> u64 {
        (self.pctr_ctl >> 28) & 0xfffff
    }
    // PMPC
    pub const fn is_pal(&self) -> bool {
        self.pmpc & 1 != 0
    }
    pub const fn pal_offset(&self) -> u64 {
        self.pmpc & 0x7fff
    }

    /// "PAL", "kernel" or "user".
    pub const fn pc_class(&self) -> &'static str {
        if self.is_pal() {
            "PAL"
        } else if self.pmpc >> 63 != 0 {
            "kernel"
        } else {
            "user"
        }
    }

    /// TRP, and not stale: an instruction killed before it was mapped leaves TRP (and
    /// MIS and TRAP_TYPE with it) stale, so they are ignored there.
    pub const fn trapped(&self) -> bool {
        self.trp() != 0 && self.killed() == 0
    }

    /// A mispredicted conditional branch: TRP and MIS, not killed.
    pub const fn mispredicted(&self) -> bool {
        self.trapped() && self.mis() != 0
    }

    /// Did not trap and did not retire valid (VAL clear).
    pub const fn invalid(&self) -> bool {
        !self.trapped() && self.val() == 0
    }

    /// The redirect trap named by a PALcode entry offset, if the PMPC is one.
    pub const fn redirect(&self) -> Option<Redirect> {
        if !self.is_pal() {
            return None;
        }
        match self.pal_offset() {
            0x481 => Some(Redirect::IstreamAccessViolation),
            0x581 => Some(Redirect::ItbMiss),
            0x681 => Some(Redirect::Interrupt),
            _ => None,
        }
    }

    /// The trap this sample counts under in `report --profileme`, if any: a redirect by
    /// its PAL offset (killed or not), else a TRAP_TYPE when trapped and not a mispredict.
    pub fn trap(&self) -> Option<Trap> {
        if let Some(r) = self.redirect() {
            return Some(Trap::Redirect(r));
        }
        if self.trapped() && self.mis() == 0 {
            return Some(Trap::Type(self.trap_type() as u8));
        }
        None
    }

    /// What this sample adds to its `report --profileme` row, by the seed script's rules.
    pub fn tally(&self) -> Tally {
        let redirect = self.redirect();
        let trapped = self.trapped();
        Tally {
            killed: self.killed() != 0,
            invalid: self.invalid(),
            mispredict: redirect.is_none() && trapped && self.mis() != 0,
            taken: self.tak() != 0,
            stalled: self.stalled() != 0,
            pctr1: self.pctr1(),
            trap: self.trap(),
        }
    }

    /// The trap name `dump` prints, as the seed's `trap_name()`: the redirect's name,
    /// "none" when not trapped or mispredicted, else the TRAP_TYPE's long name.
    pub fn dump_trap_name(&self) -> &'static str {
        if let Some(r) = self.redirect() {
            return r.long_name();
        }
        if !self.trapped() || self.mis() != 0 {
            return "none";
        }
        trap_type_long(self.trap_type() as u8)
    }
}

/// One sample's contribution to a `report --profileme` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub killed: bool,
    pub invalid: bool,
    pub mispredict: bool,
    pub taken: bool,
    pub stalled: bool,
    pub pctr1: u64,
    pub trap: Option<Trap>,
}

/// A redirect trap: TRAP_TYPE does not report these; the PMPC's PAL entry offset does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Redirect {
    IstreamAccessViolation,
    ItbMiss,
    Interrupt,
}

impl Redirect {
    pub const ALL: [Redirect; 3] = [
        Redirect::IstreamAccessViolation,
        Redirect::ItbMiss,
        Redirect::Interrupt,
    ];
    pub const fn pal_offset(self) -> u64 {
        match self {
            Redirect::IstreamAccessViolation => 0x481,
            Redirect::ItbMiss => 0x581,
            Redirect::Interrupt => 0x681,
        }
    }
    pub const fn long_name(self) -> &'static str {
        match self {
            Redirect::IstreamAccessViolation => "Istream access violation",
            Redirect::ItbMiss => "ITB miss",
            Redirect::Interrupt => "interrupt",
        }
    }
    pub const fn short_name(self) -> &'static str {
        match self {
            Redirect::IstreamAccessViolation => "iacv",
            Redirect::ItbMiss => "itbmiss",
            Redirect::Interrupt => "intr",
        }
    }
}

/// A counted trap: a redirect, or a TRAP_TYPE value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trap {
    Redirect(Redirect),
    Type(u8),
}

impl Trap {
    /// The report's short name (the seed script's `TRAP_TYPES`/`REDIRECTS`).
    pub fn short_name(self) -> &'static str {
        match self {
            Trap::Redirect(r) => r.short_name(),
            Trap::Type(t) => trap_type_short(t),
        }
    }
}

/// TRAP_TYPE's long name (the seed's `trap_type_names`), "other (see PMPC)" for the rest.
pub const fn trap_type_long(t: u8) -> &'static str {
    match t {
        0 => "replay",
        2 => "DTB double miss (3 level)",
        3 => "DTB double miss (4 level)",
        4 => "FP disabled",
        5 => "unaligned",
        6 => "DTB single miss",
        7 => "Dstream fault",
        8 => "OPCDEC",
        10 => "machine check",
        12 => "arithmetic",
        14 => "MT_FPCR",
        15 => "reset",
        _ => "other (see PMPC)",
    }
}

/// TRAP_TYPE's short name in reports (the seed script's `TRAP_TYPES`), "other" for the rest.
pub const fn trap_type_short(t: u8) -> &'static str {
    match t {
        0 => "replay",
        2 => "dtb2-3l",
        3 => "dtb2-4l",
        4 => "fen",
        5 => "unalign",
        6 => "dtb1",
        7 => "dfault",
        8 => "opcdec",
        10 => "mchk",
        12 => "arith",
        14 => "mt_fpcr",
        15 => "reset",
        _ => "other",
    }
}

/// What PCTR1 counts during the window, by PCTR_CTL[SL1].
pub const PCTR1_NAMES: [&str; 4] = ["cycles", "retire delay", "bcache misses", "mbox replays"];

/// `perf_mem_data_src` fields that `report --mem` reads (include/uapi/linux/perf_event.h).
pub mod data_src {
    pub const OP_SHIFT: u32 = 0;
    pub const OP_LOAD: u64 = 0x02;
    pub const OP_STORE: u64 = 0x04;
    pub const OP_PFETCH: u64 = 0x08;
    pub const TLB_SHIFT: u32 = 26;
    pub const TLB_HIT: u64 = 0x02;
    pub const TLB_MISS: u64 = 0x04;

    /// The memory operation of a data source.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Op {
        Load,
        Store,
        Prefetch,
    }

    impl Op {
        pub const fn name(self) -> &'static str {
            match self {
                Op::Load => "load",
                Op::Store => "store",
                Op::Prefetch => "prefetch",
            }
        }
    }

    /// The operation (None: not a load, store or prefetch).
    pub const fn op(d: u64) -> Option<Op> {
        let op = (d >> OP_SHIFT) & 0x1f;
        if op & OP_LOAD != 0 {
            Some(Op::Load)
        } else if op & OP_STORE != 0 {
            Some(Op::Store)
        } else if op & OP_PFETCH != 0 {
            Some(Op::Prefetch)
        } else {
            None
        }
    }

    /// Some(true) for a DTB hit, Some(false) for a miss, None when not reported.
    pub const fn dtb_hit(d: u64) -> Option<bool> {
        let t = (d >> TLB_SHIFT) & 0x7f;
        if t & TLB_MISS != 0 {
            Some(false)
        } else if t & TLB_HIT != 0 {
            Some(true)
        } else {
            None
        }
    }

    /// A data source word for `op` with a DTB hit or miss, as the ProfileMe kernel series
    /// reports it (for generators and tests).
    pub const fn encode(op: Op, hit: bool) -> u64 {
        let o = match op {
            Op::Load => OP_LOAD,
            Op::Store => OP_STORE,
            Op::Prefetch => OP_PFETCH,
        };
        (o << OP_SHIFT) | ((if hit { TLB_HIT } else { TLB_MISS }) << TLB_SHIFT)
    }
}
