/* bench.c: labperf-bench for targets without Rust (Alpha): the same behaviour classes, one
 * non-inlined function each, rotated every round, split by CPU time as the Rust bench does.
 * At exit it prints the known answer in the Rust bench's form (see its --help): the CPU
 * time each class took by the thread's CPU clock, then the process's. */
#include "sys.h"

#define NOINLINE __attribute__((noinline))

static volatile u64 sink;
static u32 *chain;
static u8 noise[65536];
#define CHAIN (1u << 22) /* 16 MiB of u32 slots */

NOINLINE u64 int_divider_stalls(u64 n) {
    /* Alpha has no divide instruction: this is the shift-subtract loop its compilers call. */
    u64 x = sink | 0xFFFFFFFFFFFFull, d = 7 + (sink & 1);
    for (u64 i = 0; i < n * 4; i++) {
        u64 q = 0, r = 0;
        for (int b = 63; b >= 0; b--) {
            r = (r << 1) | ((x >> b) & 1);
            if (r >= d) r -= d, q |= 1ull << b;
        }
        x = q | 0xFFFFFFFFFFFFull;
    }
    return x;
}

NOINLINE u64 fp_divider_stalls(u64 n) {
    volatile double d = 1.000001;
    double x = 1e300;
    for (u64 i = 0; i < n * 16; i++) x /= d;
    return (u64)(x > 1.0);
}

NOINLINE u64 branch_mispredicts(u64 n) {
    u64 acc = 0;
    for (u64 i = 0; i < n * 16; i++) {
        if (noise[i & 65535] & 1) acc = acc * 3 + 1;
        else acc ^= 0x55;
        __asm__ volatile("" : "+r"(acc));
    }
    return acc;
}

NOINLINE u64 dcache_miss(u64 n) {
    u32 p = (u32)sink & (CHAIN - 1);
    for (u64 i = 0; i < n; i++) p = chain[p];
    return p;
}

NOINLINE u64 double_to_int(u64 n) {
    volatile double f = 1.5;
    i64 acc = 0;
    for (u64 i = 0; i < n * 16; i++) {
        i64 v = (i64)f;
        acc += v;
        f = (double)v + 1.25;
    }
    return (u64)acc;
}

NOINLINE u64 nops(u64 n) {
    for (u64 i = 0; i < n; i++) __asm__ volatile("nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop\n nop");
    return n;
}

NOINLINE u64 serializing(u64 n) {
    for (u64 i = 0; i < n; i++) {
#ifdef __alpha__
        __asm__ volatile("mb" ::: "memory"); /* memory barrier: drains the pipeline's memory ops */
#else
        __asm__ volatile("lfence" ::: "memory");
#endif
    }
    return n;
}

struct cls {
    const char *name;
    u64 (*run)(u64);
    u64 units; /* work per call: roughly 10-50 us each; calibrate() scales it to a block */
};
/* One output line, built before its single write. */
static char line[256];
static size_t line_str(size_t n, const char *s) {
    while (*s && n < sizeof line - 1) line[n++] = *s++;
    return n;
}
static size_t line_u(size_t n, u64 v) {
    char d[24];
    int k = 0;
    static const u64 p10[] = {10000000000000000000ull, 1000000000000000000ull, 100000000000000000ull,
                              10000000000000000ull, 1000000000000000ull, 100000000000000ull, 10000000000000ull,
                              1000000000000ull, 100000000000ull, 10000000000ull, 1000000000ull, 100000000ull,
                              10000000ull, 1000000ull, 100000ull, 10000ull, 1000ull, 100ull, 10ull, 1ull};
    for (int i = 0; i < 20; i++) {
        char c = '0';
        while (v >= p10[i]) v -= p10[i], c++; /* no divide instruction on Alpha */
        if (c != '0' || k || i == 19) d[k++] = c;
    }
    d[k] = 0;
    return line_str(n, d);
}

static const struct cls CLASSES[] = {
    {"int_divider_stalls", int_divider_stalls, 16}, {"fp_divider_stalls", fp_divider_stalls, 256},
    {"branch_mispredicts", branch_mispredicts, 512}, {"dcache_miss", dcache_miss, 1024},
    {"double_to_int", double_to_int, 256},          {"nops", nops, 8192},
    {"serializing", serializing, 2048},
};
#define NCLASSES 7

static u64 cpu_ns(void) { return lp_clock_ns(3 /* CLOCK_THREAD_CPUTIME_ID */); }

/* Work units per ~200 us block of CPU time for class c, as the Rust bench calibrates: each
 * clock read is a system call (kernel time no user-mode sample sees), so a block long
 * against it keeps the known answer what a profile sees. Doubling from one call's units
 * until a call lasts 200 us; the fastest of three tries wins (a preemption cannot shrink
 * a CPU-time block, but keep the same rule as the Rust bench). */
#define BLOCK_NS 200000u
static NOINLINE u64 calibrate(int c) {
    u64 best = CLASSES[c].units;
    for (int t = 0; t < 3; t++) {
        for (u64 n = CLASSES[c].units;; n *= 2) {
            u64 t0 = cpu_ns();
            sink += CLASSES[c].run(n);
            u64 e = cpu_ns() - t0;
            if (e >= BLOCK_NS || n >= (1ull << 40)) {
                /* n * BLOCK_NS / e, without a division (Alpha has none): shift down. */
                u64 per = n;
                while (e > 2 * BLOCK_NS && per > 1) e /= 2, per /= 2; /* e/2: a shift */
                if (per > best) best = per;
                break;
            }
        }
    }
    return best;
}

static long bench_tid(void) {
#ifdef __NR_gettid
    return SYS0(__NR_gettid);
#else
    return SYS0(__NR_getxpid); /* one thread: its id is the process's */
#endif
}

/* Parses "1.5" as milliseconds (no floating point in argument handling). */
static int parse_secs_ms(const char *s, u64 *ms) {
    u64 whole = 0, frac = 0, scale = 1000;
    for (; *s && *s != '.'; s++) {
        if (*s < '0' || *s > '9') return 0;
        whole = whole * 10 + (*s - '0');
    }
    if (*s == '.')
        for (s++; *s && scale > 1; s++) {
            if (*s < '0' || *s > '9') return 0;
            scale /= 10;
            frac += (u64)(*s - '0') * scale;
        }
    *ms = whole * 1000 + frac;
    return 1;
}

int lp_main(long argc, char **argv, char **envp) {
    u64 duration_ms = 2000, slice_ms = 5;
    u32 weight[NCLASSES] = {0};
    int any = 0;
    for (long i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (lp_streq(argv[i], "--duration")) {
            if (!parse_secs_ms(v, &duration_ms) || !duration_ms) goto usage;
            i++;
        } else if (lp_streq(argv[i], "--slice-ms")) {
            if (!lp_parse_u64(v, &slice_ms) || !slice_ms) goto usage;
            i++;
        } else if (lp_streq(argv[i], "--classes")) {
            const char *p = v;
            while (*p) {
                int k;
                for (k = 0; k < NCLASSES; k++) {
                    size_t n = lp_strlen(CLASSES[k].name);
                    if (lp_startswith(p, CLASSES[k].name) && (p[n] == 0 || p[n] == ',' || p[n] == '=')) break;
                }
                if (k == NCLASSES) goto usage;
                p += lp_strlen(CLASSES[k].name);
                u32 w = 1;
                if (*p == '=') {
                    w = 0;
                    for (p++; *p >= '0' && *p <= '9'; p++) w = w * 10 + (*p - '0');
                }
                weight[k] = w;
                any = 1;
                if (*p == ',') p++;
            }
            i++;
        } else if (lp_streq(argv[i], "--list")) {
            for (int k = 0; k < NCLASSES; k++) lp_puts(1, CLASSES[k].name), lp_puts(1, "\n");
            return 0;
        } else {
            goto usage;
        }
    }
    if (!any)
        for (int k = 0; k < NCLASSES; k++) weight[k] = 1;
    for (u32 i = 0, x = 0x2545F491; i < sizeof noise; i++) x = x * 1103515245u + 12345u, noise[i] = (u8)(x >> 16);
    if (weight[3]) {
        chain = lp_alloc(CHAIN * sizeof *chain);
        for (u32 i = 0; i < CHAIN; i++) chain[i] = i;
        u64 x = 88172645463325252ull;
        for (u32 i = CHAIN - 1; i > 0; i--) { /* Sattolo: one cycle through every slot */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            u32 j = (u32)(((x >> 32) * (u64)i) >> 32); /* uniform in [0, i) without division */
            u32 t = chain[i];
            chain[i] = chain[j], chain[j] = t;
        }
    }
    u64 spent[NCLASSES] = {0}, calibration[NCLASSES] = {0}, block[NCLASSES] = {0};
    for (int k = 0; k < NCLASSES; k++) {
        if (!weight[k]) continue;
        u64 t0 = cpu_ns();
        block[k] = calibrate(k);
        calibration[k] = cpu_ns() - t0;
    }
    u64 end = lp_clock_ns(LP_CLOCK_MONOTONIC) + duration_ms * 1000000u;
    for (int first = 0; lp_clock_ns(LP_CLOCK_MONOTONIC) < end; first = first + 1 == NCLASSES ? 0 : first + 1) {
        for (int k = 0; k < NCLASSES; k++) {
            int c = first + k >= NCLASSES ? first + k - NCLASSES : first + k;
            if (!weight[c]) continue;
            /* Blocks until the slice's CPU time has passed; it stops where the next block
             * would end further past the slice's end than this one ends before it, so no
             * class gains time by overshooting (the Rust bench's rule). */
            u64 t0 = cpu_ns(), now = t0, stop = t0 + weight[c] * slice_ms * 1000000u;
            for (;;) {
                sink += CLASSES[c].run(block[c]);
                u64 t = cpu_ns(), last = t - now;
                now = t;
                if (now + last / 2 >= stop) break;
            }
            spent[c] += now - t0;
            if (lp_clock_ns(LP_CLOCK_MONOTONIC) >= end) break;
        }
    }
    /* The known answer, as it happened: "labperf-bench: cpu thread=main tid=T path=CLASS ns=N". */
    long tid = bench_tid();
    /* Each line in one write: the agent's --progress lines share this stderr. */
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < NCLASSES; k++) {
            if (!weight[k]) continue;
            size_t n = line_str(0, "labperf-bench: cpu thread=main tid=");
            n = line_u(n, (u64)tid);
            n = line_str(n, pass ? " path=" : " path=calibrate;");
            n = line_str(n, CLASSES[k].name);
            n = line_str(n, " ns=");
            n = line_u(n, pass ? spent[k] : calibration[k]);
            n = line_str(n, "\n");
            lp_write_all(2, line, n);
        }
    size_t n = line_str(0, "labperf-bench: cpu-process ns=");
    n = line_u(n, lp_clock_ns(2 /* CLOCK_PROCESS_CPUTIME_ID */));
    n = line_str(n, "\n");
    lp_write_all(2, line, n);
    return 0;
usage:
    lp_puts(2, "usage: labperf-bench [--duration SECS] [--classes NAME[=WEIGHT],...] [--slice-ms MS] [--list]\n");
    return 2;
}
