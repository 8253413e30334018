#!/usr/bin/env python3
"""Two builds of the agent side by side, interleaved in one run (docs/measurements.md, "What the
agent costs": issue 28's std agent against the no_std one): start-up (`--version`, median of
20), and for `labperf-bench --duration 3` at 4 kHz, 50 kHz and 4 kHz with dwarf stacks the
agent's CPU (its trailer), its peak RSS (VmHWM polled every 10 ms) and bytes per sample.

usage: agent_cost.py BEFORE_AGENT AFTER_AGENT LABPERF LABPERF_BENCH [RUNS]
"""
import os, re, subprocess, sys, tempfile, time, statistics
old, new = sys.argv[1], sys.argv[2]
labperf = sys.argv[3]
bench = sys.argv[4]
reps = int(sys.argv[5]) if len(sys.argv) > 5 else 3
agents = [("before", old), ("after", new)]
out = tempfile.mkdtemp(prefix="agent-cost-")
print("sizes:", {n: os.path.getsize(p) for n, p in agents})

def spawn_wall(argv):
    t = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, {}, file_actions=[(os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0)])
    os.waitpid(pid, 0)
    return (time.perf_counter_ns() - t) / 1e6

start = {n: [] for n, _ in agents}
for i in range(20):
    for n, p in agents:
        start[n].append(spawn_wall([p, "--version"]))
for n, _ in agents:
    print(f"startup {n}: median {statistics.median(start[n]):.3f} ms (min {min(start[n]):.3f}, max {max(start[n]):.3f}, 20 runs)")

rows = {}
for mode in [("4 kHz", ["-F", "4000"]), ("50 kHz", ["-F", "50000"]), ("4 kHz dwarf", ["-F", "4000", "--call-graph", "dwarf"])]:
    for r in range(reps):
        for n, p in agents:
            f = f"{out}/{n[:5]}.lpr"
            t = time.perf_counter()
            pr = subprocess.Popen([p, "record", "-e", "cpu-clock", *mode[1], "-o", f, "--", bench, "--duration", "3"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            hwm = 0
            while pr.poll() is None:
                try:
                    for l in open(f"/proc/{pr.pid}/status"):
                        if l.startswith("VmHWM:"):
                            hwm = max(hwm, int(l.split()[1]))
                except (FileNotFoundError, ProcessLookupError, ValueError):
                    pass
                time.sleep(0.01)
            wall = time.perf_counter() - t
            assert pr.returncode == 0
            info = subprocess.run([labperf, "info", f], capture_output=True, text=True).stdout
            cpu, _ = re.search(r"agent cost:\s+([\d.]+) s CPU, (\d+) KiB peak RSS", info).groups()
            rss = hwm
            samples = int(re.search(r"totals:\s+(\d+) samples", info).group(1))
            size = os.path.getsize(f)
            rows.setdefault((mode[0], n), []).append((float(cpu), int(rss), samples, size / samples, wall))
print("| mode | agent | agent CPU s (median) | peak RSS KiB (VmHWM, median) | samples (median) | bytes/sample (median) | runs |")
print("|---|---|---:|---:|---:|---:|---|")
for (m, n), v in rows.items():
    med = lambda i: statistics.median(x[i] for x in v)
    allv = "; ".join(f"{x[0]:.3f} s {x[1]} KiB {x[3]:.1f} B" for x in v)
    print(f"| {m} | {n} | {med(0):.3f} | {med(1):.0f} | {med(2):.0f} | {med(3):.1f} | {allv} |")
