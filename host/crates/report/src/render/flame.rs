//! SVG flame graphs through `inferno`, from stacks of frame ids. inferno holds every folded
//! line it is given (its frames borrow their names from them), so the lines it gets are
//! pruned first: to the frames it draws, then, while the graph would cost more than
//! [`BUDGET`], to wider frames only; names are cut at [`MAX_NAME`] bytes and stacks at
//! [`MAX_DEPTH`] frames. A graph of any recording then costs bounded memory, however deep
//! its stacks, long its names or many its stacks.

use std::io::Write;

/// inferno's default minimum width of a drawn frame, in percent of the total weight.
pub const MIN_WIDTH: f64 = 0.01;
/// What the graph may cost, in bytes (estimated): the folded lines inferno holds, and for
/// each frame it draws its record and SVG element ([`FRAME_COST`]) and twice its name (the
/// tooltip and the label).
pub const BUDGET: u64 = 16 << 20;
/// The cost of a drawn frame besides its name.
const FRAME_COST: u64 = 256;
/// The longest name drawn, in bytes: a longer one is cut, and ends with `…`.
pub const MAX_NAME: usize = 1024;
/// The deepest frame drawn (a recording's callchains are at most 4,096 entries long).
pub const MAX_DEPTH: usize = 4096;

/// Why no graph was drawn.
#[derive(Debug)]
pub enum Error {
    /// The weights, as inferno would read them from the lines, do not add up in a `usize`.
    Overflow,
    Io(std::io::Error),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

/// A name as drawn: at most [`MAX_NAME`] bytes.
fn cut(name: &str) -> std::borrow::Cow<'_, str> {
    if name.len() <= MAX_NAME {
        return name.into();
    }
    let mut end = MAX_NAME - '…'.len_utf8();
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &name[..end]).into()
}

/// One frame of the path being swept: a node of the tree of stacks.
struct Open {
    /// The frame's rank among the names (equal names, equal ranks).
    rank: u32,
    /// The weight of the lines through it, of those that end in it, of its narrow children.
    weight: u64,
    own: u64,
    narrow: u64,
    /// The lightest child's weight (`u64::MAX` without children).
    lightest: u64,
    /// Bytes of the folded path through it.
    text: u64,
}

/// The tree of `lines` (paths of frame ids, outermost first, and weights), walked from the
/// lines sorted by name: `close` sees each node once, after its children, with its
/// ancestors (outermost first) and whether a weight is drawn.
fn sweep(
    lines: &[(&[u32], u64)],
    order: &[u32],
    rank: &[u32],
    len: &[u32],
    drawn: impl Fn(u64) -> bool,
    mut close: impl FnMut(&[Open], &Open),
) {
    let mut open: Vec<Open> = Vec::new();
    let mut pop = |open: &mut Vec<Open>| {
        let v = open.pop().expect("a node to close");
        close(open, &v);
        if let Some(p) = open.last_mut() {
            p.weight = p.weight.saturating_add(v.weight);
            p.lightest = p.lightest.min(v.weight);
            if !drawn(v.weight) {
                p.narrow = p.narrow.saturating_add(v.weight);
            }
        }
    };
    for &i in order {
        let (path, w) = lines[i as usize];
        let path = &path[..path.len().min(MAX_DEPTH)];
        let shared = open
            .iter()
            .zip(path)
            .take_while(|(o, &f)| o.rank == rank[f as usize])
            .count();
        while open.len() > shared {
            pop(&mut open);
        }
        for &f in &path[shared..] {
            let text = open.last().map_or(0, |o| o.text + 1) + u64::from(len[f as usize]);
            open.push(Open {
                rank: rank[f as usize],
                weight: 0,
                own: 0,
                narrow: 0,
                lightest: u64::MAX,
                text,
            });
        }
        if let Some(t) = open.last_mut() {
            t.own = t.own.saturating_add(w);
            t.weight = t.weight.saturating_add(w);
        }
    }
    while !open.is_empty() {
        pop(&mut open);
    }
}

/// The sum of the counts inferno reads from `folded` (its last field per line), or `None`
/// when it would not add up in a `usize`, or a line would read as two counts (inferno's
/// differential form: a name must never end in what reads as a count).
pub fn parsed_total(folded: &str) -> Option<u64> {
    let number = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let mut total = 0u64;
    for line in folded.lines() {
        let line = line.trim();
        let (rest, count) = line.rsplit_once(' ')?;
        if !number(count) {
            return None;
        }
        let rest = rest.trim_end();
        if rest.rsplit_once(' ').is_some_and(|(_, c)| number(c)) {
            return None;
        }
        let n: u64 = count.split('.').next()?.parse().ok()?;
        total = total.checked_add(n)?;
    }
    (total <= (usize::MAX / 2) as u64).then_some(total)
}

/// Draws the flame graph of `lines` (paths of ids into `names`, the folded names, outermost
/// first, with their weights) with `opt`, whose `min_width` this sets. Returns the minimum
/// width used, in percent, when frames wider than inferno's default had to be left out.
pub fn draw(
    opt: &mut inferno::flamegraph::Options<'_>,
    names: &[String],
    lines: &[(&[u32], u64)],
    w: impl Write,
) -> Result<Option<f64>, Error> {
    // Equal names share a rank; paths compare by rank as inferno compares folded lines.
    let mut by_name: Vec<u32> = (0..names.len() as u32).collect();
    by_name.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
    let mut rank = vec![0u32; names.len()];
    let mut first: Vec<u32> = Vec::new();
    for (k, &i) in by_name.iter().enumerate() {
        if k == 0 || names[i as usize] != names[by_name[k - 1] as usize] {
            first.push(i);
        }
        rank[i as usize] = first.len() as u32 - 1;
    }
    drop(by_name);
    let shown: Vec<std::borrow::Cow<'_, str>> = names.iter().map(|n| cut(n)).collect();
    let len: Vec<u32> = shown.iter().map(|n| n.len() as u32).collect();
    let mut order: Vec<u32> = (0..lines.len() as u32).collect();
    let ranks = |i: u32| {
        lines[i as usize]
            .0
            .iter()
            .take(MAX_DEPTH)
            .map(|&f| rank[f as usize])
    };
    order.sort_unstable_by(|&a, &b| ranks(a).cmp(ranks(b)));
    let total = lines
        .iter()
        .try_fold(0u64, |t, l| t.checked_add(l.1))
        .ok_or(Error::Overflow)?;
    // A frame is drawn at level k when at least MIN_WIDTH·2^k percent wide (inferno's test).
    let min_time = |k: usize| MIN_WIDTH * (1u64 << k) as f64 / (100.0 / total as f64);
    let drawn_at = |w: u64, k: usize| (w as f64) >= min_time(k);
    let mut levels = 1;
    while levels < 48 && min_time(levels) <= total as f64 {
        levels += 1;
    }
    // What the graph costs at each level (differences, then summed).
    let mut cost = vec![0i128; levels + 1];
    sweep(
        lines,
        &order,
        &rank,
        &len,
        |_| true,
        |up, v| {
            let hi = (0..levels).take_while(|&k| drawn_at(v.weight, k)).last();
            // A thread too narrow to draw still has its line: its weight is in the total.
            if up.is_empty() {
                let from = hi.map_or(0, |h| h + 1);
                cost[from] += i128::from(v.text + 22);
                cost[levels] -= i128::from(v.text + 22);
            }
            let Some(hi) = hi else {
                return;
            };
            let name = u64::from(len[first[v.rank as usize] as usize]);
            cost[0] += i128::from(FRAME_COST + 2 * name);
            cost[hi + 1] -= i128::from(FRAME_COST + 2 * name);
            // The line that ends here: its own weight, or children too narrow to draw.
            let lo = if v.own > 0 {
                Some(0)
            } else {
                (0..=hi).find(|&k| !drawn_at(v.lightest, k))
            };
            if let Some(lo) = lo {
                cost[lo] += i128::from(v.text + 22);
                cost[hi + 1] -= i128::from(v.text + 22);
            }
        },
    );
    let mut level = levels - 1;
    let mut sum = 0i128;
    for (k, c) in cost.iter().enumerate().take(levels) {
        sum += c;
        if sum <= i128::from(BUDGET) {
            level = k;
            break;
        }
    }
    // The lines at that level, each a drawn frame with what is drawn no further above it.
    let mut folded = String::new();
    sweep(
        lines,
        &order,
        &rank,
        &len,
        |w| drawn_at(w, level),
        |up, v| {
            // A drawn frame's line carries what is drawn no further above it; a thread's
            // line carries all its weight when the thread is too narrow to draw (it still
            // counts in the total every share is of).
            let n = match (drawn_at(v.weight, level), up.is_empty()) {
                (true, _) => v.own.saturating_add(v.narrow),
                (false, true) => v.weight,
                (false, false) => 0,
            };
            if n == 0 {
                return;
            }
            for o in up {
                folded.push_str(&shown[first[o.rank as usize] as usize]);
                folded.push(';');
            }
            folded.push_str(&shown[first[v.rank as usize] as usize]);
            folded.push(' ');
            folded.push_str(&n.to_string());
            folded.push('\n');
        },
    );
    // The guard on what inferno will read, not on what was meant.
    parsed_total(&folded).ok_or(Error::Overflow)?;
    opt.min_width = MIN_WIDTH * (1u64 << level) as f64;
    inferno::flamegraph::from_lines(opt, folded.lines(), w)?;
    Ok((level > 0).then_some(opt.min_width))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svg(names: &[&str], lines: &[(&[u32], u64)]) -> (String, Option<f64>) {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut o = inferno::flamegraph::Options::default();
        let mut out = Vec::new();
        let w = match draw(&mut o, &names, lines, &mut out) {
            Ok(w) => w,
            Err(e) => panic!("{e:?}"),
        };
        (String::from_utf8(out).unwrap(), w)
    }

    #[test]
    fn frames_too_narrow_to_draw_leave_their_weight_to_their_caller() {
        // 20,000 samples in `hot`, one in each of 20 narrow leaves under `t;a`: the leaves
        // are under 0.01% and not drawn; `a` keeps its full width.
        let mut names = vec!["t", "a", "hot"];
        let leaves: Vec<String> = (0..20).map(|i| format!("leaf{i}")).collect();
        names.extend(leaves.iter().map(String::as_str));
        let paths: Vec<Vec<u32>> = (0..20).map(|i| vec![0, 1, 3 + i]).collect();
        let mut lines: Vec<(&[u32], u64)> = vec![(&[0, 1, 2], 20_000)];
        lines.extend(paths.iter().map(|p| (&p[..], 1)));
        let (svg, widened) = svg(&names, &lines);
        assert_eq!(widened, None);
        assert!(
            svg.contains("<title>a (20,020 samples, 100.00%)</title>"),
            "{svg}"
        );
        assert!(
            svg.contains("<title>hot (20,000 samples, 99.90%)</title>"),
            "{svg}"
        );
        assert!(!svg.contains("leaf"), "{svg}");
    }

    #[test]
    fn threads_too_narrow_to_draw_still_count_in_the_total() {
        // 20,000 threads of one sample each, and one of 20,000: the narrow ones are not
        // drawn, but the wide one is half of all samples, not all of them.
        let names: Vec<String> = (0..20_001).map(|i| format!("thread{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let paths: Vec<[u32; 1]> = (0..20_001).map(|i| [i]).collect();
        let lines: Vec<(&[u32], u64)> = paths
            .iter()
            .map(|p| (&p[..], if p[0] == 0 { 20_000 } else { 1 }))
            .collect();
        let (svg, _) = svg(&names, &lines);
        assert!(
            svg.contains("<title>thread0 (20,000 samples, 50.00%)</title>"),
            "{svg}"
        );
        assert!(!svg.contains("thread1 "), "{svg}");
    }

    #[test]
    fn a_graph_over_the_budget_is_drawn_with_wider_frames_only() {
        // 1,000 stacks of 1,000 frames, each its own path from its tenth frame, over two
        // names of 2 KiB: a million frames of 0.1% each; only their shared first levels fit
        // the budget.
        let long: Vec<String> = (0..2).map(|i| format!("{i}{}", "n".repeat(2000))).collect();
        let mut names: Vec<&str> = vec!["t"];
        names.extend(long.iter().map(String::as_str));
        let paths: Vec<Vec<u32>> = (0..1000u32)
            .map(|i| {
                std::iter::once(0)
                    .chain((0..1000).map(|d| 1 + ((i >> (d % 10)) & 1)))
                    .collect()
            })
            .collect();
        let lines: Vec<(&[u32], u64)> = paths.iter().map(|p| (&p[..], 1)).collect();
        let (svg, widened) = svg(&names, &lines);
        let widened = widened.expect("a graph over the budget is widened");
        assert!(widened > MIN_WIDTH, "{widened}");
        assert!((svg.len() as u64) < BUDGET, "{} bytes", svg.len());
        assert!(svg.contains("<title>t (1,000 samples, 100.00%)</title>"));
        // Names are cut.
        assert!(svg.contains("nnn…"));
        assert!(!svg.contains(&"n".repeat(MAX_NAME)));
    }

    #[test]
    fn the_guard_reads_the_counts_as_inferno_does() {
        assert_eq!(parsed_total("a;b 5\na;c 7\n"), Some(12));
        // A name that ends in a number would read as a differential count.
        assert_eq!(parsed_total("a;b 18446744073709551615 5\n"), None);
        assert_eq!(parsed_total(&format!("a {}\nb 1\n", usize::MAX / 2)), None);
        assert_eq!(parsed_total("a;b\n"), None);
    }
}
