//! Fuzz target: the decoder and every report built on it must never panic, and the decoders
//! must agree. Half of the inputs are taken as they are; the other half are structured: a
//! valid header (one of every recording kind), a header extension, then records frames
//! whose payloads are the fuzzer's bytes under correct checksums, so the record decoder and
//! the reports see what a checksum would otherwise stop.
#![no_main]

use labperf::export::{ToFirefox, ToFolded, ToParquet, ToPprof};
use labperf::record::load::Source;
use labperf::symbolize::symbols::Search;
use labperf_common::*;
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

fn event(name: &str, config: u64, sample_type: u64, leader: Option<u32>) -> EventDesc {
    EventDesc {
        name: name.into(),
        attr: Attr {
            type_: if name == "slots" || name.starts_with("topdown") { 4 } else { 0 },
            size: 136,
            config,
            sample_type,
            read_format: 0xc,
            ..Default::default()
        },
        leader,
    }
}

/// A header and recipe of each kind the reports know.
fn header(kind: u8) -> (Header, Recipe) {
    let st = 0x1_0197;
    let (events, recipe) = match kind % 6 {
        0 => (vec![event("cycles", 0, st, None)], Recipe::Sample { group_read: false }),
        1 => (
            vec![
                event("cycles", 0, st, None),
                event("instructions", 1, st, Some(0)),
                event("branch-misses", 5, st, Some(0)),
                event("cache-references", 2, st, Some(0)),
                event("cache-misses", 3, st, Some(0)),
            ],
            Recipe::Strobe {
                mode: StrobeMode::KernelRfcV2,
                period: 1000,
                window: 100,
                jitter: false,
            },
        ),
        2 => (
            vec![
                event("slots", 0x400, 0, None),
                event("topdown-retiring", 0x8000, 0, Some(0)),
                event("topdown-bad-spec", 0x8100, 0, Some(0)),
                event("topdown-fe-bound", 0x8200, 0, Some(0)),
                event("topdown-be-bound", 0x8300, 0, Some(0)),
            ],
            Recipe::StatTopdown {
                level: 1,
                legacy: false,
                pmu: "cpu".into(),
            },
        ),
        3 => (
            vec![
                event("slots", 0x400, st, None),
                event("cycles", 0, st, Some(0)),
                event("topdown-retiring", 0x8000, st, Some(0)),
                event("topdown-bad-spec", 0x8100, st, Some(0)),
                event("topdown-fe-bound", 0x8200, st, Some(0)),
                event("topdown-be-bound", 0x8300, st, Some(0)),
                event("topdown-heavy-ops", 0x8400, st, Some(0)),
            ],
            Recipe::RecordTopdown { level: 2 },
        ),
        4 => (
            vec![event("cpu/instructions,profileme/", 1, 0x587, None)],
            Recipe::ProfileMe,
        ),
        _ => (
            vec![event("cpu/cycles,profileme/", 0, 0x858f, None)],
            Recipe::Mem,
        ),
    };
    let arch = if kind % 6 >= 4 { Arch::Alpha } else { Arch::X86_64 };
    (
        Header {
            agent_version: "fuzz".into(),
            arch,
            endian: Endian::Little,
            kernel_release: "6".into(),
            cpu: CpuId::Unknown {
                cpuinfo: String::new(),
            },
            hostname: "fuzz".into(),
            command: vec![],
            clock_id: 1,
            start_time_ns: 0,
            start_realtime_ns: 0,
            events,
            mode: recipe.mode_string(),
            notes: vec![],
        },
        recipe,
    )
}

/// A file from structured input: prelude, a header of the kind the first byte picks, a
/// header extension (or not), then frames `[kind byte, u16 length, payload]` with
/// correct checksums and sequence numbers.
fn structured(data: &[u8]) -> Vec<u8> {
    let Some((&k, mut rest)) = data.split_first() else {
        return Vec::new();
    };
    let (h, recipe) = header(k);
    let mut enc = Encoder::new();
    let mut file = prelude(if k & 0x40 != 0 { WIRE_VERSION_1 } else { WIRE_VERSION }).to_vec();
    file.extend(enc.header_frame(&h));
    if k & 0x80 == 0 {
        file.extend(enc.header_ext_frame(&HeaderExt {
            recipe: Some(recipe),
            replayed: k & 0x20 != 0,
            ..Default::default()
        }));
    }
    let (mut seq, mut first) = (if k & 0x80 == 0 { 2 } else { 1 }, 0u64);
    while rest.len() >= 3 {
        let kind = match rest[0] % 8 {
            0 => FRAME_TRAILER,
            1 => FRAME_HEADER_EXT,
            7 => rest[0],
            _ => FRAME_RECORDS,
        };
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let payload = &rest[3..3 + len];
        let n = u32::from(rest[0] >> 3);
        file.extend(frame::build(kind, seq, first, n, payload));
        seq += 1;
        if kind == FRAME_RECORDS {
            first += u64::from(n);
        }
        rest = &rest[3 + len..];
    }
    file
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let file = if mode & 1 == 0 { rest.to_vec() } else { structured(rest) };
    let data = &file[..];
    let whole = decode_all(data);
    // Streaming in odd pieces gives the same records as decoding the whole.
    let mut d = Decoder::new();
    let mut n = 0usize;
    for piece in data.chunks(7) {
        d.push(piece);
        while let Some(e) = d.poll() {
            n += matches!(e, Event::Record(_)) as usize;
        }
    }
    d.finish();
    while let Some(e) = d.poll() {
        n += matches!(e, Event::Record(_)) as usize;
    }
    assert_eq!(n, whole.records.len());
    // The whole-input decoder (the report's path) agrees with the streaming one.
    let shared: Shared = Arc::new(data.to_vec());
    let mut d = Decoder::whole(shared.clone());
    let mut m = 0usize;
    while let Some(e) = d.poll() {
        m += matches!(e, Event::Record(_)) as usize;
    }
    assert_eq!(m, whole.records.len());
    assert_eq!(d.losses(), &whole.losses);
    // Every report over it, rendered in every format; dump's lines.
    let src = Source::bytes("fuzz.lpr", shared);
    let formats = [
        labperf::views::report::Format::Table,
        labperf::views::report::Format::Csv,
        labperf::views::report::Format::Json,
    ];
    // The report pipeline as `labperf report` runs it: the view the header names, then
    // every view forced (each with the options that apply to it); every format rendered.
    std::env::set_var("LABPERF_THREADS", if mode & 0x18 == 0x18 { "3" } else { "1" });
    use labperf::views::view::{Options, View};
    let by = [
        labperf::views::report::By::Symbol,
        labperf::views::report::By::Dso,
        labperf::views::report::By::Pc,
        labperf::views::report::By::Host,
        labperf::views::report::By::Run,
    ][usize::from(mode >> 1) % 5];
    let discard = if mode & 0x20 == 0 {
        labperf::views::metrics::DiscardMode::Discard
    } else {
        labperf::views::metrics::DiscardMode::None
    };
    let split = [
        labperf::views::metrics::Split::None,
        labperf::views::metrics::Split::Thread,
        labperf::views::metrics::Split::Cpu,
    ][usize::from(mode >> 6) % 3];
    // The view the header names, in every format; then one other view, forced, in one
    // format (both picked by the input's last byte, so every view and format is reached
    // while each execution stays short).
    let pick = usize::from(data.last().copied().unwrap_or(0));
    let forced = [
        View::Plain,
        View::Metrics,
        View::Topdown,
        View::Profileme,
        View::Mem,
        View::Intervals,
    ][pick % 6];
    for (view, fmts) in [(None, &formats[..]), (Some(forced), &formats[(pick >> 3) % 3..][..1])] {
        // The plain view per function (--by), or with its callees (--children).
        let children = view == Some(View::Plain) && pick & 4 != 0;
        let o = Options {
            view,
            // One --by key, or two combined (as perf's --sort).
            by: match (view == Some(View::Plain) && !children, pick & 2 != 0) {
                (false, _) => vec![],
                (true, false) => vec![by],
                (true, true) => vec![labperf::views::report::By::Dso, by],
            },
            pc: view == Some(View::Profileme) && mode & 0x80 != 0,
            discard: (view == Some(View::Metrics)).then_some(discard),
            split: (view == Some(View::Metrics)).then_some(split),
            search: Search::nothing(),
            top: [0, 5][pick & 1],
            children,
            // The call graph under each row, both ways, whole or one level deep.
            graph: (children && mode & 0x20 != 0).then_some(labperf::views::report::Graph {
                order: [labperf::views::report::Order::Caller, labperf::views::report::Order::Callee][(mode >> 4) as usize & 1],
                depth: (mode >> 2) as usize & 1,
            }),
            // One event of several (by index; a file without it is an error).
            event: (view == Some(View::Plain) && pick & 2 != 0)
                .then(|| labperf::record::events::Select("1".into())),
            // No --comm/--pid/... filter, --max-stack or --percent-limit.
            ..Options::default()
        };
        if let Ok(r) = labperf::views::view::build(&src, &o) {
            for &f in fmts {
                let _ = r.render(f, 5, mode & 0x40 != 0);
            }
            let _ = r.render(labperf::views::report::Format::Html, 5, false);
            // The report against itself, as `labperf diff` joins two.
            if let Ok(d) = labperf::views::diff::diff(&r, &r) {
                let _ = d.render(fmts[0], 5, false);
            }
        }
    }
    // The input merged with itself (`report A B`), and exported in every format.
    if let Ok(r) = labperf::views::view::build_many(&[src.clone(), src.clone()], &Options { by: vec![by], search: Search::nothing(), ..Options::default() }) {
        let _ = r.render(formats[pick % 3], 5, false);
    }
    if let Ok(st) = labperf::symbolize::stacks::collect_many(&[src.clone(), src.clone()], Search::nothing(), true) {
        let _ = st.folded();
        let _ = st.svg(std::io::sink());
        let _ = st.pprof(std::io::sink());
        let _ = st.firefox(std::io::sink());
        let _ = st.parquet(std::io::sink(), std::io::sink());
    }
    for r in &whole.records {
        let _ = labperf::views::dump::line(r);
        if let Record::Sample(s) = r {
            if let Ok(p) = labperf::views::profileme::payload(&[0], s) {
                let _ = labperf::views::dump::profileme_lines(&p);
            }
        }
    }
});
