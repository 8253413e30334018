#!/usr/bin/env python3
"""The cost of `record --off-cpu` beside perf's (docs/measurements.md, "Off-CPU recording"): a workload of
two processes on one CPU answering each other over pipes (each round trip two context
switches), as fast as they can and paced at 100,000 switches a second (a round trip every
20 us), run alone, under `labperf-agent record --off-cpu` (-g) and under `perf record -e
sched:sched_switch -g` (this perf has no BPF skeletons, so no `--off-cpu`), interleaved in
one run: wall time, CPU time (workload and recorder) and bytes per switch of the file.

usage: offcpu_cost.py LABPERF_AGENT [RUNS] [ROUND_TRIPS]
"""
import os, resource, subprocess, sys, tempfile, time, statistics
agent = sys.argv[1]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
trips = int(sys.argv[3]) if len(sys.argv) > 3 else 200000
out = tempfile.mkdtemp(prefix="offcpu-cost-")
src = os.path.join(out, "pingpong.c")
open(src, "w").write(r'''
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>
#include <time.h>
static long long now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
/* Two processes answer each other over two pipes N times: 2N blocking reads, 2N switches;
 * with PACE, round trip i starts no sooner than PACE * i ns after the first. */
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    long long pace = argc > 2 ? atoll(argv[2]) : 0, t0 = now();
    int a[2], b[2];
    char c = 0;
    if (pipe(a) || pipe(b)) return 1;
    pid_t p = fork();
    if (p == 0) {
        for (long i = 0; i < n; i++) {
            if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1) _exit(1);
        }
        _exit(0);
    }
    for (long i = 0; i < n; i++) {
        while (pace && now() < t0 + pace * i) {}
        if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1) return 1;
    }
    int st;
    waitpid(p, &st, 0);
    return 0;
}
''')
prog = os.path.join(out, "pingpong")
subprocess.run(["gcc", "-O2", "-fno-omit-frame-pointer", "-o", prog, src], check=True)

def run(argv, f=None):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, (os.path.getsize(f) if f else 0)

for pace in [0, 20000]:
    # Both processes on CPU 0: each switch hands the CPU over directly (no wake-up across
    # CPUs, whose timing varies run to run); the recorder has the other CPU.
    work = ["taskset", "-c", "0", prog, str(trips), str(pace)]
    # The workload's own switches, counted by the kernel (perf stat, once).
    st = subprocess.run(["perf", "stat", "-x,", "-e", "context-switches", "--", *work], capture_output=True, text=True)
    switches = int(st.stderr.strip().splitlines()[-1].split(",")[0])
    modes = {
        "alone": lambda f: work,
        "labperf-agent record --off-cpu -g": lambda f: [agent, "record", "--off-cpu", "-e", "cpu-clock", "-o", f, "--", *work],
        "perf record -e sched:sched_switch -g": lambda f: ["perf", "record", "-q", "-e", "sched:sched_switch", "-g", "-o", f, "--", *work],
    }
    res = {m: [] for m in modes}
    for r in range(reps):
        for m, argv in modes.items():
            f = None if m == "alone" else os.path.join(out, "f")
            res[m].append(run(argv(f), f))
    alone = statistics.median(w for w, _, _ in res["alone"])
    how = "as fast as it goes" if not pace else f"paced at a round trip every {pace // 1000} us"
    print(f"\nworkload {how}: {trips} round trips, {switches} context switches ({switches / alone:,.0f} a second alone); medians of {reps} interleaved runs")
    print("| run | wall time | added wall time | CPU time (workload + recorder) | bytes per switch |")
    print("|---|---:|---:|---:|---:|")
    for m in modes:
        w = statistics.median(x for x, _, _ in res[m])
        c = statistics.median(x for _, x, _ in res[m])
        b = statistics.median(x for _, _, x in res[m])
        added = "" if m == "alone" else f"{100 * (w - alone) / alone:+.0f}%"
        per = "" if m == "alone" else f"{b / switches:.1f}"
        print(f"| {m} | {w:.3f} s | {added} | {c:.3f} s | {per} |")
