//! The whole machine (`record -a` / `-C`, `--duration`): two known busy processes show up
//! in `report --by comm` with their CPU-time split, through the Rust agent (via `labperf
//! record`) and the C agent; the samples' CPUs are the online CPUs; kernel samples are named
//! from kallsyms; without the privilege both agents stop before recording and say what is
//! needed.

use labperf_tests::c_agent;
use labperf_tests::{bin, report_json, scratch};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command};

/// The CPU time process `pid` has run, in ns: the kernel's own account of each of its
/// threads (`/proc/PID/task/TID/schedstat`, first field: the clock behind
/// CLOCK_PROCESS_CPUTIME_ID; utime + stime would be in 10 ms ticks).
fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|t| {
            let s = std::fs::read_to_string(t.unwrap().path().join("schedstat")).unwrap();
            s.split_whitespace().next().unwrap().parse::<u64>().unwrap()
        })
        .sum()
}

/// The CPUs this machine has online (`/sys/devices/system/cpu/online`: "0-3,5,7-8").
fn online_cpus() -> std::collections::BTreeSet<u32> {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let mut cpus = std::collections::BTreeSet::new();
    for part in list.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        cpus.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap());
    }
    assert!(!cpus.is_empty(), "no online CPU in '{list}'");
    cpus
}

/// Two busy processes of known names: copies of labperf-bench named busy-a (two threads)
/// and busy-b (one), both spinning in `nops` for longer than any recording here.
struct Busy {
    procs: Vec<(String, Child)>,
}

impl Busy {
    fn start(dir: &Path) -> Busy {
        let procs = [("busy-a", "2"), ("busy-b", "1")]
            .iter()
            .map(|(name, threads)| {
                let exe = dir.join(name);
                std::fs::copy(bin("labperf-bench"), &exe).unwrap();
                let child = Command::new(&exe)
                    .args([
                        "--duration",
                        "60",
                        "--classes",
                        "nops",
                        "--threads",
                        threads,
                    ])
                    .spawn()
                    .unwrap();
                (name.to_string(), child)
            })
            .collect();
        // Let both reach their loops.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Busy { procs }
    }

    fn cpu_ns(&self) -> Vec<u64> {
        self.procs.iter().map(|(_, c)| cpu_ns(c.id())).collect()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for (_, c) in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `record` (which records the whole machine into `file`) while the two busy
/// processes run; asserts each one's share of their samples in `report --by comm` is
/// within 5 points of its share of their CPU time over the recording, that the samples'
/// CPUs are exactly the online CPUs, and that kernel samples are there and named from
/// kallsyms.
fn busy_split(test: &str, record: impl FnOnce(&Path)) {
    let d = scratch(test);
    let file = d.join("box.lpr");
    let busy = Busy::start(&d);
    let before = busy.cpu_ns();
    record(&file);
    let after = busy.cpu_ns();
    let pids: Vec<u64> = busy.procs.iter().map(|(_, c)| u64::from(c.id())).collect();
    drop(busy);
    let cpu: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(a, b)| (b - a) as f64)
        .collect();
    let j = report_json(&file, 0, |c| {
        c.args(["--by", "comm"]);
    });
    let by_comm: BTreeMap<String, u64> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["comm"].as_str().unwrap().to_string(),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    // -a samples every online CPU (busy or idle, cpu-clock ticks on each) and no other.
    let rec = labperf_common::decode_all(&std::fs::read(&file).unwrap());
    let mut per_cpu = BTreeMap::<u32, u64>::new();
    for r in &rec.records {
        if let labperf_common::Record::Sample(s) = r {
            *per_cpu.entry(s.cpu).or_default() += 1;
        }
    }
    assert_eq!(
        per_cpu
            .keys()
            .copied()
            .collect::<std::collections::BTreeSet<u32>>(),
        online_cpus(),
        "the samples' CPUs (with their counts: {per_cpu:?}) against the online CPUs"
    );
    let samples = [by_comm.get("busy-a"), by_comm.get("busy-b")];
    let [Some(&a), Some(&b)] = samples else {
        panic!("both busy processes in --by comm: {by_comm:?}");
    };
    let (sa, ca) = (
        100.0 * a as f64 / (a + b) as f64,
        100.0 * cpu[0] / (cpu[0] + cpu[1]),
    );
    eprintln!("{test}: busy-a {sa:.2}% of their samples ({a} of {}), {ca:.2}% of their CPU time ({} of {} ns)", a + b, cpu[0], cpu[0] + cpu[1]);
    // 5 points: the acceptance's tolerance; CPU time is read from /proc around the
    // recording (the agent's start and finish: a few ms either side of its 2 s).
    assert!(
        (sa - ca).abs() <= 5.0,
        "busy-a {sa:.2}% of samples vs {ca:.2}% of CPU time"
    );
    // No share of the machine is asserted for the spinners: what else runs beside the
    // test is not known (before: "most samples are theirs", which a CPU hog beside the test
    // suite made false: 6403+2831 of 16396). Nor is their samples' period held to their
    // CPU time: beside a compiler and a CPU hog it was 0.83 and 1.21 times it in two runs
    // (the agent's start, under load, is outside the recording but inside the /proc
    // reads; a tick also lands in a spinner for time charged to interrupts or steal).
    // Their split above is the known answer: 70.36 % vs 69.72 % in the first of those.
    // Keys combine as perf's --sort: (pid, comm) rows name each process by its pid, and
    // (comm, dso) rows hold each spinner's samples in its own executable.
    let j = report_json(&file, 0, |c| {
        c.args(["--by", "pid,comm"]);
    });
    for (name, pid) in ["busy-a", "busy-b"].iter().zip(&pids) {
        let row = j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["comm"] == *name);
        assert_eq!(
            row.map(|r| r["pid"].as_u64()),
            Some(Some(*pid)),
            "{name}: {j}"
        );
    }
    let j = report_json(&file, 0, |c| {
        c.args(["--by", "comm,dso"]);
    });
    // Each spinner's busiest row is its own executable; not the machine's top row, which
    // is whatever ran busiest beside the test (CI73: a compiler, 6,438 samples to busy-a's
    // 4,661).
    for name in ["busy-a", "busy-b"] {
        let top = j["tables"][0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["comm"] == name)
            .unwrap_or_else(|| panic!("no {name} row: {j}"));
        assert!(
            top["dso"].as_str().unwrap().ends_with(&format!("/{name}")),
            "{top}"
        );
    }
    // Kernel samples (the spinners' timer interrupts and clock reads, the agent's reads):
    // named functions of [kernel.kallsyms], as the running kernel's kallsyms names them.
    let j = report_json(&file, 0, |_| {});
    let kernel: Vec<(&str, u64)> = j["tables"][0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["dso"] == "[kernel.kallsyms]")
        .map(|r| (r["name"].as_str().unwrap(), r["samples"].as_u64().unwrap()))
        .collect();
    assert!(
        !kernel.is_empty(),
        "no kernel samples in a whole-machine recording"
    );
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    for (name, _) in &kernel {
        let listed = kallsyms
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some(name));
        assert!(
            listed,
            "kernel row '{name}' is not a kallsyms function: {kernel:?}"
        );
    }
}

#[test]
fn all_cpus_by_comm_gives_the_cpu_time_split_of_two_busy_processes() {
    busy_split("all-cpus-rust", |file| {
        let o = Command::new(bin("labperf"))
            .args([
                "record",
                "--local",
                "-a",
                "--duration",
                "2",
                "--no-report",
                "-o",
            ])
            .arg(file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    });
}

#[test]
fn the_c_agent_records_the_whole_machine_too() {
    busy_split("all-cpus-c", |file| {
        let o = Command::new(c_agent())
            .args(["record", "-a", "-e", "cpu-clock", "--duration", "2", "-o"])
            .arg(file)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    });
}

#[test]
fn cpu_list_and_a_command_the_duration_stops() {
    // -C 0 with a command that outlives --duration: the recording ends on time, the
    // command is stopped (exit 0: the recording is what was asked), every sample is CPU 0's.
    for agent in [bin("labperf-agent"), c_agent()] {
        let d = scratch("cpu-list");
        let f = d.join("c0.lpr");
        let t = std::time::Instant::now();
        let o = Command::new(&agent)
            .args([
                "record",
                "-C",
                "0",
                "-e",
                "cpu-clock",
                "--duration",
                "0.5",
                "-o",
            ])
            .arg(&f)
            .args(["--", "/bin/sleep", "30"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{}: {err}", agent.display());
        assert!(t.elapsed().as_secs_f64() < 10.0, "{}", agent.display());
        let rec = labperf_common::decode_all(&std::fs::read(&f).unwrap());
        let cpus: std::collections::BTreeSet<u32> = rec
            .records
            .iter()
            .filter_map(|r| match r {
                labperf_common::Record::Sample(s) => Some(s.cpu),
                _ => None,
            })
            .collect();
        assert_eq!(
            cpus.into_iter().collect::<Vec<_>>(),
            [0],
            "{}",
            agent.display()
        );
        let t = rec.trailer.expect("a finished file");
        // Idle or not, CPU 0's clock ticks every 250 µs (cpu-clock's default period): 0.5 s
        // gives about 2000 samples; half is a wide margin for start-up.
        assert!(
            t.samples > 1000,
            "{}: {} samples",
            agent.display(),
            t.samples
        );
        assert_eq!(
            t.exit.signal,
            Some(15),
            "{}: the command was stopped",
            agent.display()
        );
    }
}

#[test]
fn without_the_privilege_both_agents_stop_before_recording_and_say_what_is_needed() {
    for agent in [bin("labperf-agent"), c_agent()] {
        let d = scratch("all-cpus-nobody");
        let exe = d.join("labperf-agent");
        std::fs::copy(&agent, &exe).unwrap();
        // A directory anyone may write: a file would appear if the agent went on.
        Command::new("chmod").arg("777").arg(&d).status().unwrap();
        let o = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
            ])
            .arg(&exe)
            .args(["record", "-a", "--duration", "1", "-o", "box.lpr"])
            .current_dir(&d)
            .output()
            .expect("setpriv (util-linux) runs the agent unprivileged");
        let err = String::from_utf8_lossy(&o.stderr);
        let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap();
        assert!(
            paranoid.trim().parse::<i32>().unwrap() > 0,
            "this test needs perf_event_paranoid > 0"
        );
        assert_eq!(o.status.code(), Some(125), "{}: {err}", agent.display());
        for says in [
            "CAP_PERFMON",
            &format!("it is {} here", paranoid.trim()),
            "sysctl -w kernel.perf_event_paranoid=0",
            "nothing was recorded",
        ] {
            assert!(err.contains(says), "{}: '{says}' in {err}", agent.display());
        }
        let left: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "labperf-agent")
            .collect();
        assert!(left.is_empty(), "{}: {left:?}", agent.display());
    }
}
