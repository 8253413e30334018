//! One golden test of every report view: `labperf report FILE` (the view from the file's
//! header) in CSV, JSON and table, against the files in `tests/data/views/`, and the JSON
//! shape docs/reports.md documents. Inputs are built by `labperf_tests::views`, byte for byte
//! the same on every run. The tests only compare: `cargo xtask bless views` rewrites the
//! expected files (review the diff).

use labperf_common::Recipe;
use labperf_tests::views::*;
use labperf_tests::{bin, root, scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The golden `name` in `tests/data/views/` against what labperf renders today. Only a
/// comparison: `cargo xtask bless views` rewrites the goldens (then review the diff).
fn check(name: &str, got: &str) {
    let want_path = views().join(name);
    let want = std::fs::read_to_string(&want_path).unwrap_or_else(|_| {
        panic!(
            "{} is missing: `cargo xtask bless views` writes it",
            want_path.display()
        )
    });
    assert_eq!(
        got, want,
        "{name} changed (`cargo xtask bless views` rewrites it: review the diff)"
    );
}

/// The JSON every view prints, as docs/reports.md documents it.
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
    let d = scratch("views");
    let all = rendered(&d);
    // Each view in CSV, JSON and table.
    assert_eq!(all.len(), 6 * 3);
    for (name, got) in &all {
        check(name, got);
        if let Some(view) = name.strip_suffix(".json") {
            let j: Value = serde_json::from_str(got).unwrap();
            check_shape(&j, view);
        }
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
        // `--full-names`: the whole signature, as perf's -v.
        let o = Command::new(bin("labperf"))
            .args(["report", "--full-names", "--format", "json", "--symfs"])
            .arg(labperf_tests::views::views())
            .arg(&f)
            .env("XDG_CACHE_HOME", f.with_extension("cache"))
            .output()
            .unwrap();
        let full: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(
            full["tables"][0]["rows"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r[col] == labperf_tests::views::CXX_FIND_FULL),
            "{full}"
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
fn diff_top_cuts_the_joined_rows_not_each_report() {
    // find then plain_c: 5 and 3 of 10 samples in the base, 3 and 5 in the new file; each
    // file's top row is another function. `--top 1` must show one row, with both sides.
    let d = scratch("views-diff-top");
    let (base, new) = (d.join("base.lpr"), d.join("new.lpr"));
    std::fs::write(&base, plain()).unwrap();
    let mut r = vec![cxx_map()];
    r.extend((0..3).map(|_| sample(FIND_AT, 1000, vec![])));
    r.extend((0..5).map(|_| sample(PLAIN_AT, 1000, vec![])));
    r.push(sample(0x40_0800, 1000, vec![]));
    r.push(sample(0x7000, 1000, vec![]));
    std::fs::write(
        &new,
        file(
            vec![event("cycles", None, 0x107)],
            Recipe::Sample { group_read: false },
            &r,
        ),
    )
    .unwrap();
    let o = Command::new(bin("labperf"))
        .arg("diff")
        .arg(&base)
        .arg(&new)
        .args(["--symfs"])
        .arg(views())
        .args(["--format", "json", "--top", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{j}");
    let (name, b, delta) = (
        rows[0]["name"].as_str().unwrap(),
        rows[0]["percent_base"].as_f64().unwrap(),
        rows[0]["percent_delta"].as_f64().unwrap(),
    );
    let want = if name.starts_with("std::map") {
        (50.0, -20.0)
    } else {
        assert!(name.starts_with("plain_c"), "{j}");
        (30.0, 20.0)
    };
    assert!(
        (b - want.0).abs() < 1e-9 && (delta - want.1).abs() < 1e-9,
        "{name}: {b} {delta}, want {want:?}: {j}"
    );
}

#[test]
fn a_topdown_diff_joins_intervals_in_order() {
    let d = scratch("views-diff-topdown");
    let (base, new) = (d.join("base.lpr"), d.join("new.lpr"));
    std::fs::write(&base, topdown()).unwrap();
    // The same two intervals with other slot counts: each level's share worked out by hand
    // (a share is of the four metrics' slots, 1000 in every interval here).
    std::fs::write(
        &new,
        topdown_of(&[
            (1_001_281_330, [4000, 400, 100, 200, 300]),
            (2_003_009_005, [4000, 100, 100, 400, 400]),
        ]),
    )
    .unwrap();
    let o = Command::new(bin("labperf"))
        .arg("diff")
        .arg(&base)
        .arg(&new)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = j["tables"][0]["rows"].as_array().unwrap();
    // Two intervals joined in order: the baseline is the first file's share, the change
    // the second's minus it.
    assert_eq!(rows.len(), 2, "{j}");
    let want = [
        // (column, [base, change] of interval 1, [base, change] of interval 2)
        ("retiring", [0.230, 0.400 - 0.230], [0.050, 0.100 - 0.050]),
        (
            "bad_speculation",
            [0.153, 0.100 - 0.153],
            [0.068, 0.100 - 0.068],
        ),
        (
            "frontend_bound",
            [0.296, 0.200 - 0.296],
            [0.466, 0.400 - 0.466],
        ),
        (
            "backend_bound",
            [0.321, 0.300 - 0.321],
            [0.416, 0.400 - 0.416],
        ),
    ];
    for (col, first, second) in want {
        for (r, [b, c]) in rows.iter().zip([first, second]) {
            let got = (
                r[format!("{col}_base")].as_f64().unwrap(),
                r[format!("{col}_delta")].as_f64().unwrap(),
            );
            assert!(
                (got.0 - b).abs() < 1e-9 && (got.1 - c).abs() < 1e-9,
                "{col}: {got:?}, want ({b}, {c}) in {r}"
            );
        }
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

/// The text of the first element of class `class` in `dom` (up to its first tag,
/// unescaped as [`html_rows`] does).
fn html_text(dom: &str, class: &str) -> String {
    let at = dom
        .find(&format!("class=\"{class}\">"))
        .unwrap_or_else(|| panic!("no {class} in the page"));
    let t = &dom[at + class.len() + 9..];
    t[..t.find('<').unwrap()]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// Run by Chromium in a copy of the page: where the facts table and the flame graph's root
/// row (inferno's `all` frame) lie on the page, in CSS px from its top, written into the
/// DOM as `<pre id="layout">` for `--dump-dom`.
const LAYOUT_SCRIPT: &str = r#"<script>
(function () {
  const y = (r) => Math.round(r.top + window.scrollY);
  const facts = document.querySelector('#recording table').getBoundingClientRect();
  let root = null;
  for (const t of document.querySelectorAll('#flamegraph svg title')) {
    if (t.textContent.startsWith('all (')) root = t.parentNode.querySelector('rect');
  }
  const r = root.getBoundingClientRect();
  const pre = document.createElement('pre');
  pre.id = 'layout';
  pre.textContent = [y(facts), Math.round(facts.bottom + window.scrollY), y(r),
    Math.round(r.bottom + window.scrollY), Math.round(r.width)].join(' ');
  document.body.appendChild(pre);
})();
</script>"#;

#[test]
fn the_html_page_of_a_deep_recording_states_its_facts_and_shows_the_root_row_on_the_first_screen() {
    let d = scratch("views-html-deep");
    // 100 calls deep: every stack about 105 frames, under the kernel's 127.
    let (f, _) = labperf_tests::views::record_deep(&d, 100);
    let page = d.join("deep.html");
    let o = Command::new(bin("labperf"))
        .args(["report", "--format", "html", "-o"])
        .arg(&page)
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The page as written, with a script that measures where its parts lie.
    let html = std::fs::read_to_string(&page).unwrap();
    let measured = d.join("deep-measured.html");
    std::fs::write(
        &measured,
        html.replace("</body>", &format!("{LAYOUT_SCRIPT}</body>")),
    )
    .unwrap();
    let dom = chromium(&measured, &shots().join("deep.png"));

    // The facts, as the recording says them.
    let file = labperf_common::decode_all(&std::fs::read(&f).unwrap());
    let (h, t) = (file.header.unwrap(), file.trailer.unwrap());
    assert_eq!(
        html_text(&dom, "fact-events"),
        "cpu-clock (period 250000 ns)"
    );
    let date = Command::new("date")
        .arg("-u")
        .arg(format!("-d@{}", h.start_realtime_ns / 1_000_000_000))
        .arg("+%Y-%m-%d %H:%M:%S UTC")
        .output()
        .unwrap();
    assert!(date.status.success());
    assert_eq!(
        html_text(&dom, "fact-date"),
        String::from_utf8(date.stdout).unwrap().trim()
    );
    assert_eq!(
        html_text(&dom, "fact-duration"),
        format!("{:.3} s", t.duration_ns as f64 / 1e9)
    );
    let samples = file
        .records
        .iter()
        .filter(|r| matches!(r, labperf_common::Record::Sample(_)))
        .count();
    assert_eq!(html_text(&dom, "fact-samples"), samples.to_string());
    let lost: u64 = file
        .records
        .iter()
        .map(|r| match r {
            labperf_common::Record::Lost(l) => l.lost,
            _ => 0,
        })
        .sum();
    let losses = html_text(&dom, "fact-losses");
    if lost == 0 && t.throttled == 0 {
        assert_eq!(losses, "none");
    } else {
        assert!(losses.contains(&format!("{lost} samples lost")), "{losses}");
    }
    // How far the stacks reach: the text report's own line, word for word.
    let text = Command::new(bin("labperf"))
        .arg("report")
        .arg(&f)
        .output()
        .unwrap();
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("# call stacks (fp): "))
        .unwrap_or_else(|| panic!("no call stacks line in:\n{text}"));
    let stacks = html_text(&dom, "fact-call-stacks");
    // Headed "call stacks" on the page, the cell does not say it again.
    assert_eq!(stacks, format!("(fp): {line}"));
    let outermost: u64 = line
        .split(", ")
        .find_map(|p| p.strip_suffix(" reached the outermost frame"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        outermost * 10 >= samples as u64 * 9,
        "most stacks are whole: {line}"
    );

    // Children beside Self: the rows of `report --children`.
    let j = labperf_tests::report_json(&f, 20, |c| {
        c.arg("--children");
    });
    let want: Vec<(String, String, String)> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().into(),
                r["children"].to_string(),
                format!("{:.2}%", r["children_pct"].as_f64().unwrap()),
            )
        })
        .collect();
    let head = &dom[dom.find("id=\"table-functions\"").unwrap()..];
    let head = &head[..head.find("</thead>").unwrap()];
    assert!(
        head.contains(
            "<th data-key=\"children_pct\">Children</th><th data-key=\"self_pct\">Self</th>"
        ),
        "{head}"
    );
    let got: Vec<(String, String, String)> = html_rows(&dom, "table-functions")
        .into_iter()
        .map(|r| (r[3].clone(), r[2].clone(), r[0].clone()))
        .collect();
    assert_eq!(got, want);
    assert!(want.iter().any(|w| w.0 == "dive"), "{want:?}");

    // The facts, then the flame graph's root row, all within the first 1000 px, the root
    // row across the page.
    let layout = &dom[dom
        .find("<pre id=\"layout\">")
        .expect("the layout script ran")
        + 17..];
    let px: Vec<i64> = layout[..layout.find('<').unwrap()]
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let (facts_bottom, root_top, root_bottom, root_width) = (px[1], px[2], px[3], px[4]);
    assert!(
        facts_bottom < root_top && root_bottom <= 1000,
        "facts end at {facts_bottom} px, the root row lies from {root_top} to {root_bottom} px"
    );
    assert!(root_width > 1000, "the root row is {root_width} px wide");
    // The deep frames are drawn, below it.
    let flame = &dom[dom.find("<section id=\"flamegraph\">").unwrap()..];
    assert!(flame.contains("<title>spin ("), "spin in the flame graph");
}
