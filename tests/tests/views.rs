//! One golden test of every report view: `labperf report FILE` (the view from the file's
//! header) in CSV and JSON, against the files in `tests/data/views/`, and the JSON shape
//! the README documents. Inputs are built here, byte for byte the same on every run; the
//! plain and metrics views name functions from `tests/data/views/cxx.elf`, whose C++ names
//! hold commas. `LABPERF_BLESS=1` rewrites the expected files (review the diff).

use labperf_common::*;
use labperf_tests::alpha::{MEM_OP_LOAD, MEM_OP_PFETCH, MEM_OP_STORE, MEM_TLB_HIT, MEM_TLB_MISS};
use labperf_tests::{bin, root, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const CXX_FIND: &str =
    "std::map<int, int, std::less<int>, std::allocator<std::pair<int const, int> > >::find(int const&) const";
/// cxx.elf's functions (nm -S): map_find 0x40010c+0x1c, plain_c 0x400128+2.
const FIND_AT: u64 = 0x40_0110;
const PLAIN_AT: u64 = 0x40_0129;

fn views() -> PathBuf {
    root().join("tests/data/views")
}

fn event(name: &str, leader: Option<u32>, sample_type: u64) -> EventDesc {
    EventDesc {
        name: name.into(),
        attr: Attr {
            size: 136,
            sample_type,
            ..Default::default()
        },
        leader,
    }
}

fn header(events: Vec<EventDesc>, r: &Recipe) -> Header {
    Header {
        agent_version: "golden".into(),
        arch: Arch::X86_64,
        endian: Endian::Little,
        kernel_release: "6.1.0-golden".into(),
        cpu: CpuId::Unknown {
            cpuinfo: "golden".into(),
        },
        hostname: "golden".into(),
        command: vec!["./app".into()],
        clock_id: 1,
        start_time_ns: 0,
        start_realtime_ns: 0,
        events,
        mode: r.mode_string(),
        notes: vec![],
    }
}

/// A complete version-2 file: header, its recipe, the records, a trailer.
fn file(events: Vec<EventDesc>, recipe: Recipe, records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new();
    let mut f = Encoder::prelude().to_vec();
    f.extend(e.header_frame(&header(events, &recipe)));
    f.extend(e.header_ext_frame(&HeaderExt {
        recipe: Some(recipe),
        ..Default::default()
    }));
    let samples = records
        .iter()
        .filter(|r| matches!(r, Record::Sample(_)))
        .count() as u64;
    for r in records {
        e.push(r);
    }
    if let Some(fr) = e.flush() {
        f.extend(fr);
    }
    f.extend(e.trailer_frame(&Trailer {
        records: records.len() as u64,
        frames: 1,
        samples,
        ..Default::default()
    }));
    f
}

/// The cxx.elf mapping of process 1, named by its build-id and found through --symfs.
fn cxx_map() -> Record {
    let data = std::fs::read(views().join("cxx.elf")).unwrap();
    use object::Object;
    let id = object::File::parse(&*data)
        .unwrap()
        .build_id()
        .unwrap()
        .map(<[u8]>::to_vec);
    Record::Mmap2(Mmap2 {
        pid: 1,
        tid: 1,
        addr: 0x40_0000,
        len: 0x1000,
        pgoff: 0,
        prot: 5,
        flags: 2,
        build_id: id,
        path: "/cxx.elf".into(),
    })
}

fn sample(ip: u64, period: u64, values: Vec<u64>) -> Record {
    Record::Sample(Sample {
        pid: 1,
        tid: 1,
        ip,
        period,
        values,
        ..Default::default()
    })
}

fn plain() -> Vec<u8> {
    let mut r = vec![cxx_map()];
    r.extend((0..5).map(|_| sample(FIND_AT, 1000, vec![])));
    r.extend((0..3).map(|_| sample(PLAIN_AT, 1000, vec![])));
    // In the mapping but in no function; and in no mapping at all.
    r.push(sample(0x40_0800, 1000, vec![]));
    r.push(sample(0x7000, 1000, vec![]));
    file(
        vec![event("cycles", None, 0x107)],
        Recipe::Sample { group_read: false },
        &r,
    )
}

fn metrics() -> Vec<u8> {
    metrics_with(50)
}

/// [`metrics`] with `find_ins` instructions in each of `find`'s three windows (CPI
/// 100/find_ins).
fn metrics_with(find_ins: u64) -> Vec<u8> {
    // Alternating periods: a 900-cycle period, then a 100-cycle window whose counts are
    // the window's. Group {cycles, instructions, branch-misses}, cumulative.
    let mut r = vec![cxx_map()];
    let mut t = [0u64; 3];
    let mut pair = |r: &mut Vec<Record>, start: u64, end: u64, ins: u64, bm: u64| {
        t[0] += 900;
        t[1] += 900;
        r.push(sample(start, 900, t.to_vec()));
        t[0] += 100;
        t[1] += ins;
        t[2] += bm;
        r.push(sample(end, 100, t.to_vec()));
    };
    for _ in 0..3 {
        pair(&mut r, FIND_AT, FIND_AT, find_ins, 1); // CPI 2 in metrics()
    }
    pair(&mut r, PLAIN_AT, PLAIN_AT, 100, 0); // CPI 1
    pair(&mut r, FIND_AT, PLAIN_AT, 80, 0); // crosses functions: discarded
    file(
        vec![
            event("cycles", None, 0x117),
            event("instructions", Some(0), 0),
            event("branch-misses", Some(0), 0),
        ],
        Recipe::Strobe {
            mode: StrobeMode::KernelV4,
            period: 1000,
            window: 100,
            jitter: false,
        },
        &r,
    )
}

fn topdown() -> Vec<u8> {
    let names = [
        "slots",
        "topdown-retiring",
        "topdown-bad-spec",
        "topdown-fe-bound",
        "topdown-be-bound",
    ];
    let events = names
        .iter()
        .enumerate()
        .map(|(i, n)| event(n, (i > 0).then_some(0), 0))
        .collect();
    let interval = |time: u64, v: [u64; 5]| {
        Record::Interval(Interval {
            time,
            tid: None,
            delta: true,
            counts: v
                .iter()
                .enumerate()
                .map(|(i, &value)| Count {
                    event: i as u32,
                    value,
                    time_enabled: 1,
                    time_running: 1,
                })
                .collect(),
        })
    };
    file(
        events,
        Recipe::StatTopdown {
            level: 1,
            legacy: false,
            pmu: "cpu".into(),
        },
        &[
            interval(1_001_281_330, [4000, 230, 153, 296, 321]),
            interval(2_003_009_005, [4000, 50, 68, 466, 416]),
        ],
    )
}

fn mem() -> Vec<u8> {
    let mut r = vec![cxx_map()];
    let mut push = |ip: u64, addr: u64, src: u64| {
        r.push(Record::Sample(Sample {
            pid: 1,
            tid: 1,
            ip,
            addr: Some(addr),
            data_src: Some(src),
            ..Default::default()
        }))
    };
    for i in 0..4 {
        let tlb = if i == 3 { MEM_TLB_MISS } else { MEM_TLB_HIT };
        push(FIND_AT, 0x1_4000_0000, MEM_OP_LOAD | tlb);
    }
    push(PLAIN_AT, 0x1_4000_2000, MEM_OP_STORE | MEM_TLB_HIT);
    push(PLAIN_AT, 0x1_4000_0000, MEM_OP_PFETCH | MEM_TLB_MISS);
    file(
        vec![event("cpu/cycles,profileme/", None, 0x1_8507)],
        Recipe::Mem,
        &r,
    )
}

/// `labperf report FILE --format F --top 0 --symfs tests/data/views` (no view option).
fn report(f: &Path, format: &str) -> String {
    let o = Command::new(bin("labperf"))
        .args(["report", "--top", "0", "--format", format, "--symfs"])
        .arg(views())
        .arg(f)
        .env("XDG_CACHE_HOME", f.with_extension("cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn check(name: &str, got: &str) {
    let want_path = views().join(name);
    if std::env::var_os("LABPERF_BLESS").is_some() {
        std::fs::write(&want_path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&want_path).unwrap_or_else(|_| {
        panic!(
            "{} is missing: run with LABPERF_BLESS=1",
            want_path.display()
        )
    });
    assert_eq!(got, want, "{name} changed (LABPERF_BLESS=1 rewrites it)");
}

/// The JSON every view prints, as the README documents it.
fn check_shape(j: &Value, view: &str) {
    assert_eq!(j["view"], view);
    assert!(j["summary"].is_object(), "{j}");
    assert!(j["warnings"].is_array() && j["damaged"].is_boolean(), "{j}");
    for t in j["tables"].as_array().unwrap() {
        assert!(t["name"].is_string());
        let cols: Vec<&str> = t["columns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        for r in t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .chain(t["total"].as_array().into_iter().flatten())
        {
            let keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
            let mut want = cols.clone();
            want.sort_unstable();
            let mut keys = keys;
            keys.sort_unstable();
            assert_eq!(keys, want, "a row has exactly the table's columns: {r}");
        }
    }
}

#[test]
fn every_view_renders_its_golden_csv_and_json() {
    let d = labperf_tests::scratch("views");
    let inputs: Vec<(&str, PathBuf)> = vec![
        ("plain", {
            let p = d.join("plain.lpr");
            std::fs::write(&p, plain()).unwrap();
            p
        }),
        ("metrics", {
            let p = d.join("metrics.lpr");
            std::fs::write(&p, metrics()).unwrap();
            p
        }),
        ("topdown", {
            let p = d.join("topdown.lpr");
            std::fs::write(&p, topdown()).unwrap();
            p
        }),
        ("mem", {
            let p = d.join("mem.lpr");
            std::fs::write(&p, mem()).unwrap();
            p
        }),
        (
            "profileme",
            root().join("tests/data/c-agent-x86_64-v2-profileme/record.lpr"),
        ),
        ("intervals", root().join("tests/data/v2-stat/record.lpr")),
    ];
    for (view, f) in &inputs {
        let csv = report(f, "csv");
        check(&format!("{view}.csv"), &csv);
        let json = report(f, "json");
        check(&format!("{view}.json"), &json);
        let j: Value = serde_json::from_str(&json).unwrap();
        check_shape(&j, view);
        check(&format!("{view}.txt"), &report(f, "table"));
    }
}

#[test]
fn a_cpp_name_with_commas_round_trips_through_csv() {
    let d = labperf_tests::scratch("views-cxx");
    for (name, bytes, col) in [("plain", plain(), "name"), ("metrics", metrics(), "symbol")] {
        let f = d.join(format!("{name}.lpr"));
        std::fs::write(&f, bytes).unwrap();
        let csv = report(&f, "csv");
        // A CSV reader (RFC 4180: quoted fields, doubled quotes) gets the name back whole.
        let mut lines = csv.lines();
        let head = parse_csv(lines.next().unwrap());
        let at = head.iter().position(|h| h == col).unwrap();
        let names: Vec<String> = lines.map(|l| parse_csv(l)[at].clone()).collect();
        assert!(
            names.iter().any(|n| n == CXX_FIND),
            "{name}: {names:?}\n{csv}"
        );
        let json: Value = serde_json::from_str(&report(&f, "json")).unwrap();
        assert!(
            json["tables"][0]["rows"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r[col] == CXX_FIND),
            "{json}"
        );
    }
}

/// One CSV line's fields (RFC 4180).
fn parse_csv(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(String::new()),
            (c, _) => out.last_mut().unwrap().push(c),
        }
    }
    out
}

#[test]
fn an_option_of_another_view_is_refused_with_the_reason() {
    let d = labperf_tests::scratch("views-options");
    let f = d.join("metrics.lpr");
    std::fs::write(&f, metrics()).unwrap();
    for (args, says) in [
        (&["--by", "dso"][..], "--by applies to the plain view only"),
        (&["--pc"][..], "--pc applies to the profileme view only"),
    ] {
        let o = Command::new(bin("labperf"))
            .arg("report")
            .args(args)
            .arg(&f)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(
            err.contains(says) && err.contains("metrics view (its header says so)"),
            "{err}"
        );
    }
    // --view plain shows the same file's samples per function, and --by applies there.
    let o = Command::new(bin("labperf"))
        .args([
            "report", "--view", "plain", "--by", "dso", "--format", "csv",
        ])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(",10,"),
        "10 samples in cxx.elf"
    );
    let o = Command::new(bin("labperf"))
        .args(["report", "--split", "thread"])
        .arg(d.join("nope.lpr"))
        .output()
        .unwrap();
    assert!(!o.status.success());
}

#[test]
fn a_metrics_diff_shows_each_function_s_cpi_and_its_change() {
    let d = scratch("views-diff");
    let (base, new) = (d.join("base.lpr"), d.join("new.lpr"));
    std::fs::write(&base, metrics_with(50)).unwrap();
    std::fs::write(&new, metrics_with(80)).unwrap();
    let o = Command::new(bin("labperf"))
        .arg("diff")
        .arg(&base)
        .arg(&new)
        .args(["--symfs"])
        .arg(views())
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["view"], "metrics");
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    let row = |prefix: &str| {
        rows.iter()
            .find(|r| r["symbol"].as_str().unwrap().starts_with(prefix))
            .unwrap()
    };
    // find: 100 cycles over 50 instructions, then over 80: CPI 2 -> 1.25.
    let find = row("std::map");
    assert_eq!(find["cpi_base"], 2.0);
    assert!(
        (find["cpi_delta"].as_f64().unwrap() + 0.75).abs() < 1e-9,
        "{find}"
    );
    assert_eq!(find["samples_base"], 3);
    assert_eq!(find["samples_delta"], 0.0);
    let plain = row("plain_c");
    assert_eq!(plain["cpi_base"], 1.0);
    assert_eq!(plain["cpi_delta"], 0.0);
    // Sorted by the change of the first numeric column (#, equal), then as found; the CPI
    // change is what differs.
    assert_eq!(rows.len(), 2);
}

#[test]
fn a_topdown_diff_joins_intervals_in_order() {
    let d = scratch("views-diff-topdown");
    let f = d.join("td.lpr");
    std::fs::write(&f, topdown()).unwrap();
    let o = Command::new(bin("labperf"))
        .arg("diff")
        .arg(&f)
        .arg(&f)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    // Two intervals, each against itself: the baseline is its own share, the change 0.
    assert_eq!(rows.len(), 2);
    for (r, retiring) in rows.iter().zip([0.23, 0.05]) {
        assert!(
            (r["retiring_base"].as_f64().unwrap() - retiring).abs() < 1e-9,
            "{r}"
        );
        assert_eq!(r["retiring_delta"], 0.0);
    }
    assert!(rows[0]["time_s"].as_f64().unwrap() < rows[1]["time_s"].as_f64().unwrap());
}

/// Headless Chromium (Debian's `chromium`, installed by `cargo xtask setup`) opens `page`
/// with the network off, saves a screenshot to `png` and returns the DOM after the page's
/// scripts ran.
fn chromium(page: &Path, png: &Path) -> String {
    let profile = page.with_extension("chromium");
    let run = |extra: &[&std::ffi::OsStr]| {
        let o = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--proxy-server=127.0.0.1:9",
                "--window-size=1200,1600",
                "--virtual-time-budget=2000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .env("HOME", &profile)
            .output()
            .expect("chromium (cargo xtask setup installs it)");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    let shot = format!("--screenshot={}", png.display());
    run(&[std::ffi::OsStr::new(&shot)]);
    let img = std::fs::read(png).unwrap();
    assert!(img.starts_with(b"\x89PNG\r\n\x1a\n"), "a PNG");
    // IHDR: width and height, big-endian, after the signature and the chunk's header.
    let dim = |at: usize| u32::from_be_bytes(img[at..at + 4].try_into().unwrap());
    assert_eq!((dim(16), dim(20)), (1200, 1600));
    String::from_utf8(run(&[std::ffi::OsStr::new("--dump-dom")])).unwrap()
}

/// The text of each cell of each body row of table `id` in `dom`.
fn html_rows(dom: &str, id: &str) -> Vec<Vec<String>> {
    let at = dom
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no table {id}"));
    let table = &dom[at..at + dom[at..].find("</table>").unwrap()];
    let body = &table[table.find("<tbody>").unwrap()..];
    body.split("<tr>")
        .skip(1)
        .map(|r| {
            r.split("<td")
                .skip(1)
                .map(|c| {
                    let c = &c[c.find('>').unwrap() + 1..];
                    // The DOM's text, as the page shows it (a Rust name can hold `<`).
                    c[..c.find("</td>").unwrap()]
                        .replace("&lt;", "<")
                        .replace("&gt;", ">")
                        .replace("&quot;", "\"")
                        .replace("&#39;", "'")
                        .replace("&amp;", "&")
                })
                .collect()
        })
        .collect()
}

/// The artifact directory of the HTML report's screenshots (kept by CI under target/).
fn shots() -> PathBuf {
    let d = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
        .join("html-report");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_html_report_of_the_bench_in_headless_chromium_shows_its_functions_and_flame_graph() {
    let d = scratch("views-html-bench");
    let f = d.join("bench.lpr");
    labperf_tests::record_bench_local(
        &f,
        "250000",
        "1.5",
        "int_divider_stalls=3,nops=2,dcache_miss=1",
    );
    let page = d.join("bench.html");
    let o = Command::new(bin("labperf"))
        .args(["report", "--format", "html", "-o"])
        .arg(&page)
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing fetched (the SVG namespace URIs are names, not fetches).
    for fetch in [
        "src=\"http",
        "href=\"http",
        "<link",
        "@import",
        "url(http",
        "<script src",
    ] {
        assert!(!html.contains(fetch), "{fetch} in the page");
    }
    let dom = chromium(&page, &shots().join("bench.png"));
    // The view's table: each function with the report's samples, exactly.
    let j = labperf_tests::report_json(&f, 20, |_| {});
    let want: Vec<(String, String)> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().into(), r["samples"].to_string()))
        .collect();
    let got: Vec<(String, String)> = html_rows(&dom, "table-functions")
        .into_iter()
        .map(|r| (r[3].clone(), r[1].clone()))
        .collect();
    assert_eq!(got, want);
    for name in ["int_divider_stalls", "nops", "dcache_miss"] {
        assert!(want.iter().any(|w| w.0 == name), "{name} in the report");
    }
    // The flame graph, drawn with each function in it (its frames' tooltips).
    let flame = &dom[dom
        .find("<section id=\"flamegraph\">")
        .expect("a flame graph")..];
    for name in ["int_divider_stalls", "nops", "dcache_miss", "labperf-bench"] {
        assert!(
            flame.contains(&format!("<title>{name} (")),
            "{name} in the flame graph"
        );
    }
    // The recording's facts.
    let host = String::from_utf8(Command::new("uname").arg("-n").output().unwrap().stdout).unwrap();
    assert!(dom.contains(&format!("<td class=\"fact-host\">{}</td>", host.trim())));
    assert!(dom.contains("<td class=\"fact-losses\">none</td>"));
}

#[test]
fn the_html_report_charts_stat_intervals_and_topdown_over_time() {
    let d = scratch("views-html-charts");
    // A real `stat -I`: one line of task-clock counts, a point per interval.
    let s = d.join("stat.lpr");
    let st = Command::new(bin("labperf-agent"))
        .args(["stat", "-I", "100", "-e", "task-clock", "-o"])
        .arg(&s)
        .arg("--")
        .arg(bin("labperf-bench"))
        .args(["--duration", "1"])
        .status()
        .unwrap();
    assert!(st.success());
    let html_of = |f: &Path| {
        let page = f.with_extension("html");
        let o = Command::new(bin("labperf"))
            .args(["report", "--format", "html", "-o"])
            .arg(&page)
            .arg(f)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        page
    };
    let page = html_of(&s);
    let dom = chromium(&page, &shots().join("stat.png"));
    let j = labperf_tests::report_json(&s, 0, |_| {});
    let deltas = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "delta")
        .count();
    assert!(deltas >= 8, "{deltas} intervals in 1 s");
    let chart = &dom[dom
        .find("id=\"chart-intervals-count\"")
        .expect("the counts chart")..];
    let line = &chart[chart
        .find("data-series=\"task-clock\"")
        .expect("task-clock's line")..];
    let points = &line[line.find("points=\"").unwrap() + 8..];
    let points = &points[..points.find('"').unwrap()];
    assert_eq!(
        points.split(' ').count(),
        deltas,
        "a point per interval, the total left out"
    );
    // TopDown intervals (a scripted file, as the topdown golden test's): the four shares
    // in one chart, at their values (retiring 0.23 then 0.05 of a 0.466 axis, 196 px tall).
    let t = d.join("topdown.lpr");
    std::fs::write(&t, topdown()).unwrap();
    let dom = chromium(&html_of(&t), &shots().join("topdown.png"));
    let chart = &dom[dom
        .find("id=\"chart-intervals-share\"")
        .expect("the shares chart")..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    for level in [
        "retiring",
        "bad speculation",
        "frontend bound",
        "backend bound",
    ] {
        assert!(
            chart.contains(&format!("data-series=\"{level}\"")),
            "{level} in {chart}"
        );
    }
    assert!(chart.contains("data-series=\"retiring\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"70.0,127.3 800.0,203.0\""), "{chart}");
    assert_eq!(dom.matches("<svg class=\"chart\"").count(), 1);
}
