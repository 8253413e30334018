/* agent.c: the freestanding C labperf agent: command line, events, workload, ring buffers, replay.
 * Portable: it builds for Alpha (the target) and for x86_64 (to test it on the build machine). */
#include "writer.h"

#define VERSION "labperf-agent 0.1.0 (C core)"
#define MAX_EVENTS 8
#define MAX_CPUS 64
#ifdef __alpha__
#define PAGE 8192 /* ring buffers are 1 + 2^n pages of the system page size */
#else
#define PAGE 4096
#endif

#ifdef __alpha__
#define ARCH_NAME "alpha"
#define ARCH_INDEX 2 /* labperf_common::Arch::Alpha */
#else
#define ARCH_NAME "x86_64"
#define ARCH_INDEX 0 /* labperf_common::Arch::X86_64 */
#endif

static const char USAGE[] =
    "labperf-agent (C core): records and counts perf events into labperf record files\n\n"
    "USAGE:\n"
    "  labperf-agent record [OPTIONS] -- CMD [ARGS...]\n"
    "  labperf-agent record -a|-C LIST [OPTIONS] (--duration SECS | -- CMD [ARGS...])\n"
    "  labperf-agent stat [-e NAME]... [-I MS] [--no-summary] [-o FILE] (-- CMD | -a|-C LIST ...)\n"
    "  labperf-agent replay RINGFILE [OPTIONS]   re-encode saved ring bytes (tests)\n"
    "  labperf-agent plan [OPTIONS]              print the attrs record would open\n"
    "  labperf-agent --version\n\n"
    "OPTIONS:\n"
    "  -e, --event NAME     perf's generic names (cycles, cpu-clock, ...)\n"
    "                       or rHEX; repeatable (default: record cycles, stat perf's set)\n"
    "  -c, --period N       sample every N events (Alpha caps it at 2^20-1)\n"
    "  -F, --freq HZ        sample at about HZ per second\n"
    "  -o, --output FILE    record file (default labperf.lpr; stat: none)\n"
    "  -I, --interval MS    stat: print and record the counts every MS ms\n"
    "      --no-summary     stat: no totals printed (labperf prints them)\n"
    "      --mmap-pages N   ring data pages per CPU, a power of two (default 16)\n"
    "  -g, --call-graph fp  call stacks by frame pointers (not Linux on Alpha)\n"
    "      --off-cpu        time off the CPU too (no stack)\n"
    "      --no-inherit     do not follow children\n"
    "      --progress       print progress every second on stderr\n"
    "  -a, --all-cpus       every task on every CPU (root, CAP_PERFMON or paranoid <= 0)\n"
    "  -C, --cpu LIST       as -a on these CPUs only (0,2-3)\n"
    "      --duration SECS  with -a/-C: record SECS seconds (or until CMD ends)\n"
    "      --flush-ms MS    close a frame at least every MS ms (default 1000)\n"
    "      --dump-ring FILE also save the raw ring-buffer records (for replay)\n"
    "      --profileme      Alpha EV67+: ProfileMe instruction samples\n"
    "      --mem            Alpha EV67+: ProfileMe with DATA_SRC and ADDR (DTB hits/misses)\n"
    "      --replay-ring FILE  the samples from saved ring bytes (tests)\n"
    "      --status-file F  write how the run ended (`ok CODE` or the error)\n"
    "      --sample-type HEX, --read-format HEX  replay: the ring's layout\n\n"
    "ENVIRONMENT: LABPERF_SYSFS  where PMU formats are read (default /sys)\n\n"
    "EXAMPLE: labperf-agent record -e cpu-clock -c 250000 -o run.lpr -- ./prog\n";

struct ev {
    const char *name;
    u32 type;
    u64 config;
    int profileme; /* 1: ProfileMe, 2: ProfileMe for perf mem (DATA_SRC, ADDR) */
};

/* The profileme format bit, from <sysfs>/bus/event_source/devices/cpu/format/profileme. */
static const char *sysfs_root = "/sys";
static char pm_format_path[512];
static int pm_field = -1; /* 0 config, 1 config1, 2 config2; -1 unknown */
static int pm_bit;

static int read_profileme_format(void) {
    char s[64];
    size_t n = lp_strlen(sysfs_root);
    if (n > 400) n = 400;
    memcpy(pm_format_path, sysfs_root, n);
    memcpy(pm_format_path + n, "/bus/event_source/devices/cpu/format/profileme", 47);
    long r = lp_read_file(pm_format_path, s, sizeof s - 1);
    if (r <= 0) return 0;
    s[r] = 0;
    const char *p = s;
    if (!lp_startswith(p, "config")) return 0;
    p += 6;
    int field = 0;
    if (*p == '1' || *p == '2') field = *p++ - '0';
    if (*p++ != ':') return 0;
    int bit = 0, digits = 0;
    while (*p >= '0' && *p <= '9') bit = bit * 10 + (*p++ - '0'), digits++;
    if (!digits || bit > 63) return 0;
    pm_field = field;
    pm_bit = bit;
    return 1;
}

static const struct ev KNOWN[] = {
    {"cycles", 0, 0, 0},         {"instructions", 0, 1, 0},   {"cache-references", 0, 2, 0}, {"cache-misses", 0, 3, 0},
    {"branches", 0, 4, 0},       {"branch-misses", 0, 5, 0},  {"cpu-clock", 1, 0, 0},        {"task-clock", 1, 1, 0},
    {"page-faults", 1, 2, 0},    {"context-switches", 1, 3, 0}, {"cpu-migrations", 1, 4, 0},  {"minor-faults", 1, 5, 0},
    {"major-faults", 1, 6, 0},   {"alignment-faults", 1, 7, 0}, {"emulation-faults", 1, 8, 0},
};

struct opts {
    struct ev events[MAX_EVENTS];
    int nevents;
    u64 period, freq;
    u64 sample_type, read_format; /* replay overrides; 0: from the options */
    const char *output, *dump, *replay;
    u64 mmap_pages, flush_ms;
    int no_inherit, profileme, mem, callgraph, progress, off_cpu;
    int quiet; /* -q: no "wrote N samples" line (labperf -q) */
    const char *replay_ring;
    char **command;
    int ncommand;
    /* -a / -C LIST: every task on these CPUs (ncpus 0: every online one), for --duration. */
    int system, ncpus;
    int cpus[MAX_CPUS];
    u64 duration_ms;
    /* stat: -I MS, --no-summary; -o given (stat writes no file without it) */
    int stat, no_summary, output_given;
    u64 interval_ms;
};

/* --status-file: how the run ended, out of band (see the Rust agent's status.rs). */
static const char *status_path;
/* stat --no-summary: the workload's user and system CPU time (ns) after `ok CODE`. */
static int status_times;
static u64 status_user_ns, status_sys_ns;

/* Written by lp_dest's rule: a regular file through STATUS.tmp and a rename, a device or
 * FIFO straight through. */
static void write_status(const char *kind, const char *a, const char *b, u64 code) {
    static char real[540], tmp[560];
    const char *why;
    int through = -1;
    if (!status_path) return;
    int d = lp_dest(status_path, real, sizeof real, &through, &why);
    long fd = through;
    if (d < 0) {
        lp_puts(2, "labperf-agent: warning: cannot write the status file ");
        lp_puts(2, status_path);
        lp_puts(2, why ? ": " : "\n");
        if (why) lp_puts(2, why), lp_puts(2, "\n");
        return;
    }
    if (d == 0) {
        size_t n = lp_strlen(real);
        memcpy(tmp, real, n);
        memcpy(tmp + n, ".tmp", 5);
        fd = lp_open_temporary(tmp);
        if (fd < 0) return;
    }
    lp_puts((int)fd, kind);
    lp_puts((int)fd, " ");
    if (a) lp_puts((int)fd, a);
    if (b) lp_puts((int)fd, b);
    if (!a) lp_putu((int)fd, code);
    if (!a && status_times) {
        lp_puts((int)fd, " ");
        lp_putu((int)fd, status_user_ns);
        lp_puts((int)fd, " ");
        lp_putu((int)fd, status_sys_ns);
    }
    lp_puts((int)fd, "\n");
    SYS1(__NR_close, fd);
    if (d == 0) SYS4(__NR_renameat, LP_AT_FDCWD, tmp, LP_AT_FDCWD, real);
}

static void die(const char *a, const char *b, int code) {
    lp_puts(2, "labperf-agent: error: ");
    lp_puts(2, a);
    if (b) lp_puts(2, b);
    lp_puts(2, "\n");
    write_status(code == 127 ? "exec-error" : "agent-error", a, b, 0);
    lp_exit(code);
}

/* The record file could not be created: why, when w_open refused it. */
static void die_open(const struct writer *w, const char *path) {
    static char msg[640];
    size_t n = 0;
    for (const char *q = "cannot create the record file "; *q; q++) msg[n++] = *q;
    for (const char *q = path; *q && n < 500; q++) msg[n++] = *q;
    if (w->why) {
        msg[n++] = ':', msg[n++] = ' ';
        for (const char *q = w->why; *q && n + 1 < sizeof msg; q++) msg[n++] = *q;
    }
    msg[n] = 0;
    die(msg, 0, 125);
}

/* The record file could not be written: disk full (ENOSPC, EDQUOT) or another error. */
static void die_write(const struct writer *w, const char *path) {
#ifdef __alpha__
    int dquot = w->err == 69;
#else
    int dquot = w->err == 122;
#endif
    if (w->err == 28 || dquot) {
        lp_puts(2, "labperf-agent: error: no space left to write the record file ");
        lp_puts(2, path);
        lp_puts(2, "\n");
        write_status("disk-full", "no space left to write the record file ", path, 0);
        lp_exit(125);
    }
    die("cannot write the record file ", path, 125);
}

static int lp_parse_hex(const char *s, u64 *out) {
    static char t[40] = "0x";
    if (s[0] == '0' && s[1] == 'x') return lp_parse_u64(s, out);
    size_t n = lp_strlen(s);
    if (n > 32) return 0;
    memcpy(t + 2, s, n + 1);
    return lp_parse_u64(t, out);
}

static int parse_event(const char *s, struct ev *out) {
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++)
        if (lp_streq(s, KNOWN[i].name)) {
            *out = KNOWN[i];
            return 1;
        }
    if (s[0] == 'r' && s[1]) {
        char hex[24] = "0x";
        size_t n = lp_strlen(s + 1);
        if (n > 16) return 0;
        memcpy(hex + 2, s + 1, n + 1);
        out->name = s;
        out->type = 4;
        return lp_parse_u64(hex, &out->config);
    }
    return 0;
}

/* -C LIST: "0,2-3" into cpus (sorted, each once); 0 when malformed. */
static int cpu_list(const char *s, int *cpus) {
    u8 on[MAX_CPUS];
    int n = 0;
    memset(on, 0, sizeof on);
    while (*s) {
        int a = 0, b, digits = 0;
        while (*s >= '0' && *s <= '9' && a < MAX_CPUS) a = a * 10 + (*s++ - '0'), digits++;
        b = a;
        if (*s == '-') {
            s++, b = 0;
            while (*s >= '0' && *s <= '9' && b < MAX_CPUS) b = b * 10 + (*s++ - '0'), digits++;
        }
        if (!digits || b < a || b >= MAX_CPUS || (*s && *s != ',')) return 0;
        while (a <= b) on[a++] = 1;
        if (*s == ',') s++;
    }
    for (int c = 0; c < MAX_CPUS; c++)
        if (on[c]) cpus[n++] = c;
    return n;
}

/* The most ms of -I, --duration and --flush-ms, as the Rust agent's MAX_MS: perf's -I is an
 * unsigned int of ms (49.7 days); in ns, and in poll's int ms when clamped, it never wraps. */
#define MAX_MS 4294967295ull

/* --duration SECS ("2", "0.5", at most ms) in ms; 0 when malformed or over MAX_MS. */
static u64 millis(const char *s) {
    u64 ms = 0;
    int frac = -1, digits = 0;
    for (; *s; s++) {
        if (*s == '.' && frac < 0) {
            frac = 0;
        } else if (*s >= '0' && *s <= '9' && frac < 3 && ms < (1ull << 50)) {
            ms = ms * 10 + (u64)(*s - '0'), digits++;
            if (frac >= 0) frac++;
        } else {
            return 0;
        }
    }
    for (frac = frac < 0 ? 0 : frac; frac < 3; frac++) ms *= 10;
    return digits && ms <= MAX_MS ? ms : 0;
}

/* The agent's own peak RSS (KiB): /proc/self/status's VmHWM, the high-water mark of its own
 * address space (getrusage's ru_maxrss, the fallback, also holds that of the process that
 * started it: fork copies the mark, exec keeps it). */
static u64 self_peak_rss_kib(u64 fallback) {
    static char st[4096];
    if (lp_read_file("/proc/self/status", st, sizeof st) <= 0) return fallback;
    for (char *p = st; *p; p++) {
        if (lp_startswith(p, "VmHWM:")) {
            u64 v = 0;
            for (p += 6; *p == ' ' || *p == '\t'; p++) {}
            if (*p < '0' || *p > '9') return fallback;
            for (; *p >= '0' && *p <= '9'; p++) v = v * 10 + (u64)(*p - '0');
            return v;
        }
    }
    return fallback;
}

/* -a/-C open every task's events: root, CAP_PERFMON (38) or CAP_SYS_ADMIN (21) in the
 * effective set, or kernel.perf_event_paranoid <= 0; else say which. */
static void may_record_cpus(void) {
    static char st[4096];
    char par[32];
    u64 caps = 0;
    int paranoid = 2, neg = 0;
    if (lp_read_file("/proc/sys/kernel/perf_event_paranoid", par, sizeof par) > 0) {
        char *p = par;
        if (*p == '-') neg = 1, p++;
        for (paranoid = 0; *p >= '0' && *p <= '9'; p++) paranoid = paranoid * 10 + (*p - '0');
        if (neg) paranoid = -paranoid;
    }
    if (lp_read_file("/proc/self/status", st, sizeof st) > 0) {
        for (char *p = st; *p; p++) {
            if (lp_startswith(p, "CapEff:")) {
                for (p += 7; *p == ' ' || *p == '\t'; p++) {}
                for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
                    caps = caps << 4 | (u64)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
                break;
            }
        }
    }
    if (caps & (1ull << 38 | 1ull << 21) || paranoid <= 0) return;
    /* "... it is N here. Run as ...": the value read, without its newline. */
    static char msg[400];
    const char *parts[3] = {"-a/-C record every task: that needs CAP_PERFMON (or root), or "
                            "kernel.perf_event_paranoid <= 0, and it is ",
                            par,
                            " here. Run as root, give the agent the capability (setcap cap_perfmon+ep "
                            "labperf-agent), or run `sysctl -w kernel.perf_event_paranoid=0`; nothing was recorded"};
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        for (const char *q = parts[i]; *q && *q != '\n' && n + 1 < sizeof msg; q++) msg[n++] = *q;
    msg[n] = 0;
    die(msg, 0, 125);
}

static void check_opts(struct opts *o);

static void parse_opts(int argc, char **argv, int i, struct opts *o) {
    int stat = o->stat;
    memset(o, 0, sizeof *o);
    o->stat = stat;
    o->output = "labperf.lpr";
    o->mmap_pages = 16;
    o->flush_ms = 1000;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : 0;
#define NEED() \
    if (!v) die(a, " needs a value", 2); \
    i++
        if (lp_streq(a, "--")) {
            o->command = argv + i + 1;
            o->ncommand = argc - i - 1;
            break;
        } else if (lp_streq(a, "-e") || lp_streq(a, "--event")) {
            NEED();
            if (o->nevents == MAX_EVENTS) die("too many events", 0, 2);
            if (!parse_event(v, &o->events[o->nevents])) die("unknown event (the C agent knows generic names and rHEX): ", v, 2);
            o->nevents++;
        } else if (lp_streq(a, "-c") || lp_streq(a, "--period")) {
            NEED();
            if (!lp_parse_u64(v, &o->period) || !o->period) die("--period expects a number greater than 0, got ", v, 2);
        } else if (lp_streq(a, "-F") || lp_streq(a, "--freq")) {
            NEED();
            if (!lp_parse_u64(v, &o->freq) || !o->freq) die("--freq expects a number greater than 0, got ", v, 2);
        } else if (lp_streq(a, "-o") || lp_streq(a, "--output")) {
            NEED();
            o->output = v;
            o->output_given = 1;
        } else if (lp_streq(a, "--status-file")) {
            NEED();
            status_path = v;
        } else if (lp_streq(a, "--sample-type")) {
            NEED();
            if (!lp_parse_hex(v, &o->sample_type)) die("--sample-type expects a hexadecimal number, got ", v, 2);
        } else if (lp_streq(a, "--read-format")) {
            NEED();
            if (!lp_parse_hex(v, &o->read_format)) die("--read-format expects a hexadecimal number, got ", v, 2);
        } else if (lp_streq(a, "--dump-ring")) {
            NEED();
            o->dump = v;
        } else if (lp_streq(a, "--mmap-pages")) {
            NEED();
            if (!lp_parse_u64(v, &o->mmap_pages) || !o->mmap_pages || (o->mmap_pages & (o->mmap_pages - 1)) ||
                o->mmap_pages > 65536)
                die("--mmap-pages must be a power of two from 1 to 65536, got ", v, 2);
        } else if (lp_streq(a, "--flush-ms")) {
            NEED();
            if (!lp_parse_u64(v, &o->flush_ms) || o->flush_ms > MAX_MS) die("--flush-ms takes 0 to 4294967295, not ", v, 2);
        } else if (o->stat && (lp_streq(a, "-I") || lp_streq(a, "--interval"))) {
            NEED();
            if (!lp_parse_u64(v, &o->interval_ms) || !o->interval_ms || o->interval_ms > MAX_MS)
                die("--interval takes 1 to 4294967295 ms, not ", v, 2);
        } else if (o->stat && lp_streq(a, "--no-summary")) {
            o->no_summary = 1;
        } else if (o->stat && (lp_streq(a, "--topdown") || lp_streq(a, "--per-thread") || lp_streq(a, "--level"))) {
            die(a, ": TopDown is Intel's; the C agent does not count it", 125);
        } else if (lp_streq(a, "--profileme")) {
            o->profileme = 1;
        } else if (lp_streq(a, "--mem")) {
            o->mem = 1;
        } else if (lp_streq(a, "--replay-ring")) {
            NEED();
            o->replay_ring = v;
        } else if (lp_streq(a, "-g") || lp_streq(a, "--call-graph")) {
            if (lp_streq(a, "--call-graph")) {
                NEED();
                if (!lp_streq(v, "fp")) die("--call-graph: the C agent records frame pointers only (fp), not ", v, 2);
            }
#ifdef __alpha__
            die("-g: Linux on Alpha records no call stacks (arch/alpha has no perf_callchain_*); "
                "record without -g",
                0, 2);
#endif
            o->callgraph = 1;
        } else if (lp_streq(a, "--off-cpu")) {
            o->off_cpu = 1;
        } else if (lp_streq(a, "--no-inherit")) {
            o->no_inherit = 1;
        } else if (lp_streq(a, "--progress")) {
            o->progress = 1;
        } else if (lp_streq(a, "-q")) {
            o->quiet = 1;
        } else if (lp_streq(a, "-a") || lp_streq(a, "--all-cpus")) {
            o->system = 1;
        } else if (lp_streq(a, "-C") || lp_streq(a, "--cpu")) {
            NEED();
            o->system = 1;
            o->ncpus = cpu_list(v, o->cpus);
            if (o->ncpus <= 0) die("-C takes CPU numbers and ranges such as 0,2-3, not ", v, 2);
        } else if (lp_streq(a, "--duration")) {
            NEED();
            o->duration_ms = millis(v);
            if (!o->duration_ms) die("--duration takes 0.001 to 4294967.295 seconds, not ", v, 2);
        } else if (lp_streq(a, "-h") || lp_streq(a, "--help")) {
            /* Before the workload (which keeps its own --help): the usage. */
            lp_puts(1, USAGE);
            lp_exit(0);
        } else if (lp_streq(a, "-p") || lp_streq(a, "--pid") || lp_streq(a, "-t") || lp_streq(a, "--tid")) {
            die("the C agent has no --pid/--tid: start the workload with -- CMD", 0, 125);
        } else if (a[0] == '-') {
            die("unknown option ", a, 2);
        } else {
            o->command = argv + i;
            o->ncommand = argc - i;
            break;
        }
#undef NEED
    }
    check_opts(o);
}

/* The options' rules across each other; ProfileMe's and mem's event. */
static void check_opts(struct opts *o) {
    if (o->period && o->freq) die("--period and --freq exclude each other: give one", 0, 2);
    if (o->system && !o->ncommand && !o->duration_ms) die("-a/-C need --duration SECS or a command after --", 0, 2);
    if (o->duration_ms && !o->system) die("--duration goes with -a or -C (a command ends the recording itself)", 0, 2);
    if (o->profileme && o->mem) die("--profileme and --mem exclude each other: give one", 0, 2);
    if ((o->profileme || o->mem) && o->nevents) die("--profileme and --mem choose the event themselves: drop -e", 0, 2);
    if (o->profileme || o->mem) {
        static const struct ev pm = {"cpu/instructions,profileme/", 0, 1, 1};
        static const struct ev mem = {"cpu/cycles,profileme/", 0, 0, 2};
        o->events[o->nevents++] = o->profileme ? pm : mem;
    }
#ifdef __alpha__
    if (o->nevents > 2 && !o->stat) die("the Alpha PMU has two counters, in fixed pairs: give at most two events", 0, 2);
#endif
}

/* ProfileMe needs the format bit: say what is missing and what has it. */
static void require_profileme(const struct opts *o, int fatal) {
    if (!(o->profileme || o->mem) || read_profileme_format()) return;
    if (fatal) {
die("ProfileMe needs an Alpha EV67 or later and a kernel with the ProfileMe series "
            "(\"alpha/perf: add ProfileMe sampling\"); this machine has no profileme format bit: ",
            pm_format_path, 125);
    }
}

/* ---- the perf attr, as opened and as described in the header ---- */

#ifndef __alpha__
static int kernel_allowed(void);
#endif

static void make_attr(const struct opts *o, const struct ev *e, int first, int spawned, int multi,
                      struct perf_event_attr *a) {
    memset(a, 0, sizeof *a);
    a->type = e->type;
    a->size = 136; /* PERF_ATTR_SIZE_VER8: what every kernel since 6.3 and the Rust agent pass */
    a->config = e->config;
    if (o->freq) {
        a->sample_freq = o->freq;
        a->freq = 1;
    } else {
        a->sample_period = o->period ? o->period : (e->type == 1 && e->config <= 1 ? 250000 : 100003);
    }
#ifdef __alpha__
    if (!a->freq && a->sample_period > (1u << 20) - 1) a->sample_period = (1u << 20) - 1; /* the Alpha PMU's cap */
#else
    /* perf's rule: kernel mode too where the kernel allows it (Alpha's PMU rejects every
     * exclude_* bit with EPERM, so there it is always counted). */
    a->exclude_kernel = !o->system && !kernel_allowed();
    a->exclude_hv = 1;
#endif
    if (e->type == PERF_TYPE_SOFTWARE && e->config == PERF_COUNT_SW_CONTEXT_SWITCHES && o->off_cpu) {
        /* --off-cpu's event: the switch records are its samples (off-CPU time below); its
         * own samples are left out where they come at all (Alpha has no exclude bits). */
        a->freq = 0;
        a->sample_period = 1;
#ifndef __alpha__
        a->exclude_kernel = 1;
#endif
    }
    a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CPU;
    if (multi) a->sample_type |= PERF_SAMPLE_IDENTIFIER;
    if (o->callgraph) {
        /* The kernel walks the frame pointers; user-only events leave its own part out. */
        a->sample_type |= PERF_SAMPLE_CALLCHAIN;
        a->exclude_callchain_kernel = a->exclude_kernel;
    }
    if (e->profileme) {
        /* Not a precise event (:p samples only retired instructions, and a load or store
         * that misses the DTB is aborted and refetched): the format bit selects ProfileMe. */
        a->sample_type |= PERF_SAMPLE_RAW;
        if (e->profileme == 2) a->sample_type |= PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC;
        if (pm_field == 0) a->config |= 1ull << pm_bit;
        if (pm_field == 1) a->config1 |= 1ull << pm_bit;
        if (pm_field == 2) a->config2 |= 1ull << pm_bit;
    }
    a->disabled = spawned;
    a->enable_on_exec = spawned;
    a->inherit = !o->no_inherit && !o->system; /* CPU-wide events see every task already */
    a->use_clockid = 1;
    a->clockid = LP_CLOCK_MONOTONIC;
    if (first) {
        a->mmap = 1;
        a->mmap2 = 1;
        a->comm = 1;
        a->comm_exec = 1;
        a->task = 1;
        a->context_switch = o->off_cpu;
        a->sample_id_all = o->off_cpu; /* whose switch, when */
    }
}

/* postcard labperf_common::Attr (fields in declaration order) */
static void put_attr(struct buf *b, const struct perf_event_attr *a) {
    u64 flags;
    memcpy(&flags, (const u8 *)a + 40, 8); /* the bitfield word after read_format */
    buf_varint(b, a->type);
    buf_varint(b, a->size);
    buf_varint(b, a->config);
    buf_varint(b, a->sample_period);
    buf_varint(b, a->sample_type);
    buf_varint(b, a->read_format);
    buf_varint(b, flags);
    buf_varint(b, a->wakeup_events);
    buf_varint(b, a->bp_type);
    buf_varint(b, a->config1);
    buf_varint(b, a->config2);
    buf_varint(b, a->branch_sample_type);
    buf_varint(b, a->sample_regs_user);
    buf_varint(b, a->sample_stack_user);
    buf_zz(b, a->clockid);
    buf_varint(b, a->sample_regs_intr);
    buf_varint(b, a->aux_watermark);
    buf_varint(b, a->sample_max_stack);
    buf_varint(b, 0); /* aux_sample_size */
    buf_varint(b, 0); /* sig_data */
    buf_varint(b, 0); /* config3 */
}

__attribute__((unused)) static void put_field_line(struct buf *b, const char *text, const char *key) {
    /* The value of "key : value" in text, as a postcard String (empty if absent). */
    const char *p = text;
    size_t klen = lp_strlen(key);
    while (*p) {
        if (lp_startswith(p, key) && (p[klen] == ' ' || p[klen] == '\t' || p[klen] == ':')) {
            const char *v = p + klen;
            while (*v == ' ' || *v == '\t' || *v == ':') v++;
            size_t n = 0;
            while (v[n] && v[n] != '\n') n++;
            buf_strn(b, v, n);
            return;
        }
        while (*p && *p != '\n') p++;
        if (*p) p++;
    }
    buf_str(b, "");
}

static void build_header(struct buf *h, const struct opts *o, struct perf_event_attr *attrs, int n,
                         const char *mode, const char *const *notes, int nnotes, u64 start) {
    static char cpuinfo[8192];
    struct lp_utsname u;
    memset(&u, 0, sizeof u);
    SYS1(__NR_uname, &u);
    buf_init(h, 4096);
    buf_str(h, VERSION);
    buf_varint(h, ARCH_INDEX);
    buf_varint(h, 0); /* Endian::Little: Alpha Linux and x86_64 are little-endian */
    buf_str(h, u.release);
    long r = lp_read_file("/proc/cpuinfo", cpuinfo, sizeof cpuinfo);
    if (r < 0) cpuinfo[0] = 0;
#ifdef __alpha__
    buf_varint(h, 2); /* CpuId::Alpha { model } */
    put_field_line(h, cpuinfo, "cpu model");
#else
    buf_varint(h, 3); /* CpuId::Unknown { cpuinfo }: its first lines */
    {
        size_t len = 0;
        int lines = 0;
        while (cpuinfo[len] && lines < 8) lines += cpuinfo[len++] == '\n';
        buf_strn(h, cpuinfo, len && cpuinfo[len - 1] == '\n' ? len - 1 : len);
    }
#endif
    buf_str(h, u.nodename);
    buf_varint(h, o->ncommand);
    for (int i = 0; i < o->ncommand; i++) buf_str(h, o->command[i]);
    buf_zz(h, LP_CLOCK_MONOTONIC);
    buf_varint(h, start);
    buf_varint(h, lp_clock_ns(LP_CLOCK_REALTIME));
    buf_varint(h, n);
    for (int i = 0; i < n; i++) {
        buf_str(h, o->events[i].name);
        put_attr(h, &attrs[i]);
        buf_u8(h, 0); /* leader: None */
    }
    buf_str(h, mode);
    buf_varint(h, nnotes);
    for (int i = 0; i < nnotes; i++) buf_str(h, notes[i]);
}

/* The header-extension frame's items: RECIPE (postcard labperf_common::Recipe: Sample = 0
 * with group_read, Stat = 2, ProfileMe = 5, Mem = 6) and, for replayed samples, REPLAYED. */
static void write_header_ext(struct writer *w, const struct opts *o, int replayed) {
    struct buf x, r;
    buf_init(&x, 32);
    buf_init(&r, 8);
    if (o->stat) {
        buf_varint(&r, 2);
    } else if (o->profileme) {
        buf_varint(&r, 5);
    } else if (o->mem) {
        buf_varint(&r, 6);
    } else {
        buf_varint(&r, 0);
        buf_u8(&r, (o->read_format & PERF_FORMAT_GROUP) ? 1 : 0);
    }
    buf_varint(&x, 1); /* RECIPE */
    buf_varint(&x, r.len);
    buf_bytes(&x, r.p, r.len);
    if (replayed) {
        buf_varint(&x, 2); /* REPLAYED */
        buf_varint(&x, 0);
    }
    w_header_ext(w, &x);
}

/* ---- kernel records → labperf records ---- */

struct conv {
    struct writer *w;
    u64 sample_type, read_format;
    u64 ids[MAX_EVENTS * MAX_CPUS];
    u32 id_event[MAX_EVENTS * MAX_CPUS];
    int nids;
    u64 samples, lost, throttled;
    u64 event_samples[MAX_EVENTS]; /* per event: one that opened but never sampled is said */
    int dump_fd;
    int off_event; /* --off-cpu: the offcpu-time event's index + 1; 0 without */
};

static u32 event_of(struct conv *c, u64 id) {
    for (int i = 0; i < c->nids; i++)
        if (c->ids[i] == id) return c->id_event[i];
    return 0;
}

static u64 rd64(const u8 *p) {
    u64 v;
    memcpy(&v, p, 8);
    return v;
}
static u32 rd32(const u8 *p) {
    u32 v;
    memcpy(&v, p, 4);
    return v;
}

/* The body of one record being built: one buffer reused (the allocator never frees). */
static struct buf scratch_buf;
static void scratch(struct buf *b, size_t cap) {
    if (scratch_buf.cap < cap) buf_init(&scratch_buf, cap < 4096 ? 4096 : cap);
    *b = scratch_buf;
    b->len = 0;
}

/* The distinct kernel addresses samples name (top bit set on x86_64 and Alpha), for the
 * KSYMS records written at the end: an open-addressing set, at most 3/4 full. */
#define KSEEN_SLOTS (1u << 16)
static u64 *kseen;
static u32 nkseen;
static void kernel_addr(u64 a) {
    if (!(a >> 63) || nkseen >= KSEEN_SLOTS / 4 * 3) return;
    if (!kseen) kseen = lp_alloc(KSEEN_SLOTS * 8); /* anonymous memory: zeroed */
    u32 h = (u32)((a * 0x9E3779B97F4A7C15ull) >> 48);
    for (; kseen[h]; h = (h + 1) & (KSEEN_SLOTS - 1))
        if (kseen[h] == a) return;
    kseen[h] = a;
    nkseen++;
}

/* A PERF_RECORD_SAMPLE's fields between p and end, in the layout of the sample type
 * (and read format); a record too short for them, or with a larger group or callchain
 * than any, is dropped. */
static void convert_sample(struct conv *c, const u8 *p, const u8 *end) {
    struct lp_sample s;
    u64 st = c->sample_type;
    memset(&s, 0, sizeof s);
    /* Fields in the kernel's order (perf_output_sample); each is checked against the end. */
#define NEED_BYTES(n) \
    if (p + (n) > end) return
    if (st & PERF_SAMPLE_IDENTIFIER) { NEED_BYTES(8); s.event = event_of(c, rd64(p)), p += 8; }
    if (st & PERF_SAMPLE_IP) { NEED_BYTES(8); s.ip = rd64(p), p += 8; }
    if (st & PERF_SAMPLE_TID) { NEED_BYTES(8); s.pid = rd32(p), s.tid = rd32(p + 4), p += 8; }
    if (st & PERF_SAMPLE_TIME) { NEED_BYTES(8); s.time = rd64(p), p += 8; }
    if (st & PERF_SAMPLE_ADDR) { NEED_BYTES(8); s.addr = rd64(p), s.has_addr = 1, p += 8; }
    if (st & PERF_SAMPLE_ID) { NEED_BYTES(8); p += 8; }
    if (st & PERF_SAMPLE_STREAM_ID) { NEED_BYTES(8); p += 8; }
    if (st & PERF_SAMPLE_CPU) { NEED_BYTES(8); s.cpu = rd32(p), p += 8; }
    if (st & PERF_SAMPLE_PERIOD) { NEED_BYTES(8); s.period = rd64(p), p += 8; }
    if (st & PERF_SAMPLE_READ) {
        /* A group read (PERF_FORMAT_GROUP): nr, [enabled], [running], {value, [id]} x nr. */
        u64 rf = c->read_format;
        NEED_BYTES(8);
        u64 nr = rd64(p);
        p += 8;
        if (nr > LP_MAX_VALUES) return; /* no group is this large: a corrupt record */
        if (rf & PERF_FORMAT_TOTAL_TIME_ENABLED) { NEED_BYTES(8); p += 8; }
        if (rf & PERF_FORMAT_TOTAL_TIME_RUNNING) { NEED_BYTES(8); p += 8; }
        for (u64 i = 0; i < nr; i++) {
            NEED_BYTES(8);
            s.values[s.nvalues++] = rd64(p);
            p += 8;
            if (rf & PERF_FORMAT_ID) { NEED_BYTES(8); p += 8; }
        }
    }
    if (st & PERF_SAMPLE_CALLCHAIN) {
        NEED_BYTES(8);
        u64 nr = rd64(p);
        p += 8;
        if (nr > LP_MAX_CALLCHAIN) return;
        for (u64 i = 0; i < nr; i++) {
            NEED_BYTES(8);
            u64 e = rd64(p);
            p += 8;
            if (e < 0xfffffffffffff000ull) s.callchain[s.ncallchain++] = e; /* no context markers */
        }
    }
    if (st & PERF_SAMPLE_RAW) {
        NEED_BYTES(4);
        u32 n = rd32(p);
        p += 4;
        NEED_BYTES(n);
        s.raw = p, s.raw_len = n, s.has_raw = 1;
        p += n;
    }
    if (st & PERF_SAMPLE_WEIGHT) { NEED_BYTES(8); p += 8; }
    if (st & PERF_SAMPLE_DATA_SRC) { NEED_BYTES(8); s.data_src = rd64(p), s.has_data_src = 1, p += 8; }
#undef NEED_BYTES
    if (c->off_event && s.event + 1 == (u32)c->off_event) return; /* the switch records stand for them */
    kernel_addr(s.ip);
    for (u32 i = 0; i < s.ncallchain; i++) kernel_addr(s.callchain[i]);
    w_sample(c->w, &s);
    c->samples++;
    if (s.event < MAX_EVENTS) c->event_samples[s.event]++;
}

/* ---- --off-cpu: switch-outs paired with switch-ins (the Rust agent's offcpu.rs, without
 * stacks). A round's switch records wait in `sws` until every ring was drained past them,
 * then each thread's are taken in time order: a switch-out waits (one per thread, in
 * `waits`) for the thread's next switch-in, and the pair is an offcpu-time sample of
 * period in - out (ns) with ip 0. ---- */

#define SW_OUT 1
#define SW_IN 0
#define SW_EXIT 2
#define SW_CAP (1u << 16)
#define WAIT_SLOTS 4096u
struct sw {
    u64 time;
    u32 pid, tid, cpu, kind;
};
static struct sw *sws, *sws_tmp;
static u32 nsws;
struct wait {
    u64 time; /* 0: nothing waiting */
    u32 key, pid, cpu, dead; /* key: tid + 1, 0 for an empty slot */
};
static struct wait *waits;

static void sw_push(u32 tid, u32 pid, u64 time, u32 cpu, u32 kind) {
    if (!sws) sws = lp_alloc(SW_CAP * sizeof *sws), sws_tmp = lp_alloc(SW_CAP * sizeof *sws);
    if (nsws == SW_CAP || !tid) return; /* a full round (the rest not counted); the idle task */
    struct sw *x = &sws[nsws++];
    x->time = time, x->pid = pid, x->tid = tid, x->cpu = cpu, x->kind = kind;
}

/* A switch record's sample_id (after next_prev for CPU-wide ones), by the ring's sample type. */
static void switch_record(struct conv *c, const u8 *p, const u8 *end, u16 misc) {
    u64 st = c->sample_type;
    u32 pid, tid, cpu = 0;
    u64 time;
    if (!(st & PERF_SAMPLE_TID) || !(st & PERF_SAMPLE_TIME) || p + 16 > end) return;
    pid = rd32(p), tid = rd32(p + 4), time = rd64(p + 8);
    p += 16;
    if (st & PERF_SAMPLE_ID) p += 8;
    if (st & PERF_SAMPLE_STREAM_ID) p += 8;
    if ((st & PERF_SAMPLE_CPU) && p + 4 <= end) cpu = rd32(p);
    sw_push(tid, pid, time, cpu, (misc & PERF_RECORD_MISC_SWITCH_OUT) ? SW_OUT : SW_IN);
}

static int sw_before(const struct sw *a, const struct sw *b) {
    return a->tid != b->tid ? a->tid < b->tid : a->time < b->time;
}

/* Sorts v[0..n) by thread then time: Shell's sort (small code: the Alpha agent's budget). */
static void sw_sort(struct sw *v, u32 n) {
    for (u32 gap = n / 2; gap; gap /= 2)
        for (u32 i = gap; i < n; i++) {
            struct sw x = v[i];
            u32 j = i;
            for (; j >= gap && sw_before(&x, &v[j - gap]); j -= gap) v[j] = v[j - gap];
            v[j] = x;
        }
}

static struct wait *wait_of(u32 tid) {
    if (!waits) waits = lp_alloc(WAIT_SLOTS * sizeof *waits);
    u32 key = tid + 1, h = (key * 2654435761u) & (WAIT_SLOTS - 1);
    for (u32 n = 0; n < WAIT_SLOTS; n++, h = (h + 1) & (WAIT_SLOTS - 1)) {
        if (waits[h].key == key) return &waits[h];
        if (!waits[h].key) {
            waits[h].key = key;
            return &waits[h];
        }
    }
    return 0;
}

static void off_sample(struct conv *c, u32 tid, const struct wait *x, u64 back) {
    static struct lp_sample s;
    s.event = (u32)c->off_event - 1, s.pid = x->pid, s.tid = tid, s.cpu = x->cpu;
    s.ip = 0, s.time = x->time, s.period = back - x->time;
    w_sample(c->w, &s);
    c->samples++;
    c->event_samples[c->off_event - 1]++;
}

/* Every ring was drained after `before`: the switches before it are paired. */
static void offcpu_settle(struct conv *c, u64 before) {
    u32 n = 0, m = 0;
    if (!c->off_event || !nsws) return;
    /* The switches before `before` into sws_tmp, the later ones to the front of sws. */
    for (u32 i = 0; i < nsws; i++) {
        if (sws[i].time < before) sws_tmp[n++] = sws[i];
        else sws[m++] = sws[i];
    }
    /* sws[0..m) keeps the later ones; sort the earlier ones, in the space after them. */
    struct sw *old = sws + m;
    memcpy(old, sws_tmp, n * sizeof *old);
    sw_sort(old, n);
    for (u32 i = 0; i < n; i++) {
        struct wait *x = wait_of(old[i].tid);
        if (!x) continue; /* more threads than the table holds */
        if (old[i].kind == SW_EXIT) {
            x->dead = 1, x->time = 0; /* a switch-out after it is the last one */
        } else if (old[i].kind == SW_OUT) {
            if (!x->dead) x->time = old[i].time, x->pid = old[i].pid, x->cpu = old[i].cpu;
        } else if (x->time) {
            if (old[i].time > x->time) off_sample(c, old[i].tid, x, old[i].time);
            x->time = 0;
        }
    }
    nsws = m;
}

/* The recording ended at `end`: the threads still off the CPU were so until then. */
static void offcpu_finish(struct conv *c, u64 end) {
    offcpu_settle(c, ~0ull);
    for (u32 h = 0; waits && h < WAIT_SLOTS; h++)
        if (waits[h].key && waits[h].time && waits[h].time < end) off_sample(c, waits[h].key - 1, &waits[h], end);
}

static void convert(struct conv *c, const u8 *rec, u32 size) {
    if (c->dump_fd > 0) lp_write_all(c->dump_fd, rec, size);
    u32 type = rd32(rec);
    u16 misc = (u16)(rec[4] | rec[5] << 8);
    const u8 *p = rec + 8, *end = rec + size;
    struct buf b;
    switch (type) {
    case PERF_RECORD_SAMPLE:
        convert_sample(c, p, end);
        return;
    case PERF_RECORD_MMAP2: {
        if (p + 64 > end) return;
        scratch(&b, 256 + size);
        buf_varint(&b, rd32(p));
        buf_varint(&b, rd32(p + 4));
        buf_varint(&b, rd64(p + 8));
        buf_varint(&b, rd64(p + 16));
        buf_varint(&b, rd64(p + 24));
        const u8 *id = p + 32; /* maj/min/ino/generation, or build-id size + id */
        buf_varint(&b, rd32(p + 56)); /* prot */
        buf_varint(&b, rd32(p + 60)); /* flags */
        if (misc & (1 << 14)) {
            u8 n = id[0] > 20 ? 20 : id[0];
            buf_u8(&b, 1);
            buf_varint(&b, n);
            buf_bytes(&b, id + 4, n);
        } else {
            buf_u8(&b, 0);
        }
        buf_strn(&b, (const char *)p + 64, lp_strlen((const char *)p + 64));
        w_long(c->w, TAG_MMAP2, &b);
        return;
    }
    case PERF_RECORD_COMM:
        scratch(&b, 64);
        buf_varint(&b, rd32(p));
        buf_varint(&b, rd32(p + 4));
        buf_str(&b, (const char *)p + 8);
        buf_u8(&b, (misc & (1 << 13)) ? 1 : 0);
        w_long(c->w, TAG_COMM, &b);
        return;
    case PERF_RECORD_SWITCH:
    case PERF_RECORD_SWITCH_CPU_WIDE:
        if (c->off_event) switch_record(c, p + (type == PERF_RECORD_SWITCH_CPU_WIDE ? 8 : 0), end, misc);
        return;
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT:
        if (type == PERF_RECORD_EXIT && c->off_event && p + 24 <= end)
            sw_push(rd32(p + 8), 0, rd64(p + 16), 0, SW_EXIT);
        scratch(&b, 48);
        for (int i = 0; i < 4; i++) buf_varint(&b, rd32(p + 4 * i));
        buf_varint(&b, rd64(p + 16));
        w_long(c->w, type == PERF_RECORD_FORK ? TAG_FORK : TAG_EXIT, &b);
        return;
    case PERF_RECORD_LOST:
        scratch(&b, 24);
        buf_varint(&b, event_of(c, rd64(p)));
        buf_varint(&b, rd64(p + 8));
        c->lost += rd64(p + 8);
        w_long(c->w, TAG_LOST, &b);
        return;
    case PERF_RECORD_LOST_SAMPLES:
        if (p + 8 > end) return;
        scratch(&b, 24);
        buf_varint(&b, 0);
        buf_varint(&b, rd64(p));
        c->lost += rd64(p);
        w_long(c->w, TAG_LOST, &b);
        return;
    case PERF_RECORD_THROTTLE:
    case PERF_RECORD_UNTHROTTLE:
        scratch(&b, 24);
        buf_varint(&b, rd64(p));
        buf_varint(&b, event_of(c, rd64(p + 8)));
        buf_u8(&b, type == PERF_RECORD_THROTTLE);
        c->throttled += type == PERF_RECORD_THROTTLE;
        w_long(c->w, TAG_THROTTLE, &b);
        return;
    default:
        return;
    }
}

/* Reads every complete record in a ring buffer, then hands the space back. */
static void drain(struct conv *c, u8 *base, u64 data_size) {
    struct perf_event_mmap_page *m = (void *)base;
    u64 head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
    u64 tail = m->data_tail;
    u8 *data = base + (m->data_offset ? m->data_offset : PAGE);
    static u8 tmp[65536];
    while (tail + 8 <= head) {
        u64 at = tail & (data_size - 1); /* a power of two: no division (Alpha has none) */
        u8 hdr[8];
        for (int i = 0; i < 8; i++) hdr[i] = data[(at + i) & (data_size - 1)];
        u16 size = (u16)(hdr[6] | hdr[7] << 8);
        if (size < 8 || tail + size > head) break;
        if (at + size <= data_size) {
            convert(c, data + at, size);
        } else {
            u64 first = data_size - at;
            memcpy(tmp, data + at, first);
            memcpy(tmp + first, data, size - first);
            convert(c, tmp, size);
        }
        tail += size;
    }
    __atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
}

static int online_cpus(int *cpus) {
    char s[256];
    int n = 0;
    if (lp_read_file("/sys/devices/system/cpu/online", s, sizeof s) <= 0) {
        cpus[0] = 0;
        return 1;
    }
    for (char *p = s; *p && *p != '\n' && n < MAX_CPUS;) {
        int a = 0, b;
        while (*p >= '0' && *p <= '9') a = a * 10 + (*p++ - '0');
        b = a;
        if (*p == '-') {
            p++;
            b = 0;
            while (*p >= '0' && *p <= '9') b = b * 10 + (*p++ - '0');
        }
        for (int x = a; x <= b && n < MAX_CPUS; x++) cpus[n++] = x;
        if (*p == ',') p++;
    }
    return n ? n : (cpus[0] = 0, 1);
}

static const char *explain(long err) {
    switch (err) {
    case LP_EACCES:
    case LP_EPERM:
        return "permission denied: lower kernel.perf_event_paranoid (e.g. `sudo sysctl kernel.perf_event_paranoid=2`), or run as root";
    case LP_ENOENT:
        return "this kernel or PMU does not know the event";
    case LP_ENODEV:
        return "no PMU provides this event type";
    case LP_EOPNOTSUPP:
        return "the PMU cannot sample this event with these settings";
    case LP_ENOSYS:
        return "perf_event_open is not implemented here (no CONFIG_PERF_EVENTS, or qemu-user)";
    case LP_EINVAL:
        return "the kernel rejected the attr (period, sample type or flags)";
    default:
        return "see perf_event_open(2)";
    }
}

/* An event the kernel refused: its name, why in words, and the errno (one line, also in
 * the status file). */
static void die_open_event(const char *name, long err) {
    static char msg[400];
    size_t n = 0;
    const char *parts[] = {"cannot open event '", name, "': ", explain(err), " (errno "};
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
        for (const char *q = parts[k]; *q && n < 360; q++) msg[n++] = *q;
    static const long p10[] = {1000, 100, 10, 1}; /* an errno is below 4096; no divide on Alpha */
    long v = err;
    for (int k = 0; k < 4; k++) {
        char c = '0';
        while (v >= p10[k]) v -= p10[k], c++;
        if (c != '0' || msg[n - 1] != ' ' || k == 3) msg[n++] = c;
    }
    msg[n++] = ')';
    msg[n] = 0;
    die(msg, 0, 125);
}

static u64 file_size(const char *path, int *fd_out) {
    long fd = SYS4(__NR_openat, LP_AT_FDCWD, path, LP_O_RDONLY, 0);
    if (fd < 0) return (u64)-1;
    *fd_out = (int)fd;
    u64 n = 0;
    static u8 chunk[65536];
    for (;;) {
        long r = SYS3(__NR_read, fd, chunk, sizeof chunk);
        if (r <= 0) break;
        n += r;
    }
    return n;
}

/* Converts every record of a saved ring dump (kernel record layout, as --dump-ring writes). */
static void feed_ring_file(struct conv *c, const char *path) {
    int fd = -1;
    u64 n = file_size(path, &fd);
    if (n == (u64)-1) die("cannot open the ring dump ", path, 125);
    u8 *data = lp_alloc(n + 8);
    SYS1(__NR_close, fd);
    fd = (int)SYS4(__NR_openat, LP_AT_FDCWD, path, LP_O_RDONLY, 0);
    u64 got = 0;
    while (got < n) {
        long r = SYS3(__NR_read, fd, data + got, n - got);
        if (r <= 0) break;
        got += r;
    }
    SYS1(__NR_close, fd);
    for (u64 at = 0; at + 8 <= got;) {
        u16 size = (u16)(data[at + 6] | data[at + 7] << 8);
        if (size < 8 || at + size > got) die("the ring dump is truncated or corrupt: ", path, 125);
        convert(c, data + at, size);
        at += size;
    }
}

/* The header note of a replayed recording. */
static const char *replay_note(const struct opts *o) {
    if ((o->profileme || o->mem) && pm_field < 0)
        return "re-encoded from saved ring-buffer bytes; no profileme format bit here, so the attr shows none";
    return "re-encoded from saved ring-buffer bytes";
}

/* replay: the ring-buffer records saved with --dump-ring, re-encoded without a perf fd. */
static int replay(struct opts *o) {
    require_profileme(o, 0);
    if (!o->nevents) parse_event("cpu-clock", &o->events[o->nevents++]);
    struct perf_event_attr attrs[MAX_EVENTS];
    for (int i = 0; i < o->nevents; i++) make_attr(o, &o->events[i], i == 0, 1, o->nevents > 1, &attrs[i]);
    struct writer *w = lp_alloc(sizeof *w);
    if (w_open(w, o->output, o->flush_ms) < 0) die_open(w, o->output);
    u64 start = lp_clock_ns(LP_CLOCK_MONOTONIC);
    struct buf h;
    for (int i = 0; i < o->nevents; i++) {
        if (o->sample_type) attrs[i].sample_type = o->sample_type;
        if (o->read_format) attrs[i].read_format = o->read_format;
    }
    const char *note = replay_note(o);
    build_header(&h, o, attrs, o->nevents, "replay", &note, 1, start);
    w_header(w, &h);
    write_header_ext(w, o, 1);
    struct conv *c = lp_alloc(sizeof *c);
    memset(c, 0, sizeof *c);
    c->w = w;
    c->sample_type = attrs[0].sample_type;
    c->read_format = attrs[0].read_format;
    feed_ring_file(c, o->replay);
    w_trailer(w, 0, c->samples, c->lost, c->throttled, 0, 0, 0, 0, lp_clock_ns(LP_CLOCK_MONOTONIC) - start);
    if (w_finish(w) < 0) die_write(w, o->output);
    write_status("ok", 0, 0, 0);
    lp_puts(2, "labperf-agent: replayed ");
    lp_putu(2, c->samples);
    lp_puts(2, " samples into ");
    lp_puts(2, o->output);
    lp_puts(2, "\n");
    return 0;
}

static void put_hex(int fd, u64 v) {
    char s[19] = "0x";
    int n = 0;
    u64 t = v;
    do n++, t >>= 4; while (t);
    for (int i = n - 1; i >= 0; i--, v >>= 4) s[2 + i] = "0123456789abcdef"[v & 15];
    s[2 + n] = 0;
    lp_puts(fd, s);
}

static void put_kv(const char *k, u64 v, int hex) {
    lp_puts(1, " ");
    lp_puts(1, k);
    lp_puts(1, "=");
    if (hex) put_hex(1, v);
    else lp_putu(1, v);
}

/* plan: each attr as record would open it, one line per event (perf's tests/attr idea). */
static int plan(struct opts *o) {
    require_profileme(o, 1);
    if (!o->nevents) parse_event("cycles", &o->events[o->nevents++]);
    struct perf_event_attr a;
    for (int i = 0; i < o->nevents; i++) {
        make_attr(o, &o->events[i], i == 0, o->ncommand > 0, o->nevents > 1, &a);
        lp_puts(1, "event=");
        lp_puts(1, o->events[i].name);
        lp_puts(1, " group_fd=-1");
        put_kv("type", a.type, 0);
        put_kv("size", a.size, 0);
        put_kv("config", a.config, 1);
        put_kv("config1", a.config1, 1);
        put_kv("config2", a.config2, 1);
        put_kv(a.freq ? "sample_freq" : "sample_period", a.sample_period, 0);
        put_kv("sample_type", a.sample_type, 1);
        put_kv("read_format", a.read_format, 1);
        put_kv("disabled", a.disabled, 0);
        put_kv("inherit", a.inherit, 0);
        put_kv("exclude_user", a.exclude_user, 0);
        put_kv("exclude_kernel", a.exclude_kernel, 0);
        put_kv("exclude_hv", a.exclude_hv, 0);
        put_kv("exclude_idle", a.exclude_idle, 0);
        put_kv("precise_ip", a.precise_ip, 0);
        put_kv("enable_on_exec", a.enable_on_exec, 0);
        lp_puts(1, "\n");
    }
    return 0;
}

/* ---- the whole machine: the tasks running before, the kernel's functions ---- */

/* "0x..." or decimal text to u32 (a /proc name). */
static int pid_of(const char *s, u32 *out) {
    u32 v = 0;
    if (!*s) return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 400000000u) return 0;
        v = v * 10 + (u32)(*s - '0');
    }
    *out = v;
    return 1;
}

static u64 hex_prefix(const char **p) {
    u64 v = 0;
    for (;; (*p)++) {
        char ch = **p;
        if (ch >= '0' && ch <= '9') v = v << 4 | (u64)(ch - '0');
        else if (ch >= 'a' && ch <= 'f') v = v << 4 | (u64)(ch - 'a' + 10);
        else return v;
    }
}

static void put_comm(struct writer *w, u32 pid, const char *comm, size_t n) {
    struct buf b;
    scratch(&b, 64 + n);
    buf_varint(&b, pid);
    buf_varint(&b, pid);
    buf_strn(&b, comm, n);
    buf_u8(&b, 0);
    w_long(w, TAG_COMM, &b);
}

/* COMM and MMAP2 records of every process running now, from /proc (what perf record -a
 * synthesizes): kernel threads have no mappings, a process that ends meanwhile is skipped;
 * pid 0 is the idle task, "swapper" as perf names it. */
static void synthesize(struct writer *w) {
    static char dents[8192], path[64], comm[64];
    static char *maps;
    const size_t maps_cap = 4u << 20;
    if (!maps) maps = lp_alloc(maps_cap);
    put_comm(w, 0, "swapper", 7);
    long dir = SYS4(__NR_openat, LP_AT_FDCWD, "/proc", LP_O_RDONLY, 0);
    if (dir < 0) return;
    for (;;) {
        long n = SYS3(__NR_getdents64, dir, dents, sizeof dents);
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            u16 reclen;
            memcpy(&reclen, dents + off + 16, 2); /* linux_dirent64: ino, off, reclen, type, name */
            const char *name = dents + off + 19;
            off += reclen;
            u32 pid;
            size_t nl = lp_strlen(name);
            if (!pid_of(name, &pid) || nl > 20) continue;
            memcpy(path, "/proc/", 6);
            memcpy(path + 6, name, nl);
            memcpy(path + 6 + nl, "/comm", 6);
            long cn = lp_read_file(path, comm, sizeof comm);
            if (cn <= 0) continue;
            put_comm(w, pid, comm, comm[cn - 1] == '\n' ? (size_t)cn - 1 : (size_t)cn);
            memcpy(path + 6 + nl, "/maps", 6);
            long mn = lp_read_file(path, maps, maps_cap);
            /* "start-end perms offset dev inode   path": executable mappings only. */
            for (const char *l = maps; mn > 0 && *l;) {
                const char *e = l;
                while (*e && *e != '\n') e++;
                const char *q = l;
                u64 start = hex_prefix(&q);
                q++;
                u64 end = hex_prefix(&q);
                int exec = q + 6 <= e && q[3] == 'x'; /* " r-xp " */
                q += 6;
                u64 pgoff = hex_prefix(&q);
                for (int field = 0; field < 2 && q < e; field++) { /* dev, inode */
                    while (q < e && *q == ' ') q++;
                    while (q < e && *q != ' ') q++;
                }
                while (q < e && *q == ' ') q++;
                if (exec && end > start) {
                    struct buf b;
                    scratch(&b, 96 + (size_t)(e - q));
                    buf_varint(&b, pid);
                    buf_varint(&b, pid);
                    buf_varint(&b, start);
                    buf_varint(&b, end - start);
                    buf_varint(&b, pgoff);
                    buf_varint(&b, 5); /* PROT_READ | PROT_EXEC */
                    buf_varint(&b, 2); /* MAP_PRIVATE */
                    buf_u8(&b, 0);     /* no build-id: the host matches the file by path */
                    buf_strn(&b, q, (size_t)(e - q));
                    w_long(w, TAG_MMAP2, &b);
                }
                l = *e ? e + 1 : e;
            }
        }
    }
    SYS1(__NR_close, dir);
}

struct ksym {
    u64 addr;
    u64 line; /* offset of its kallsyms line: ties keep kallsyms' order */
};

static int ksym_less(const struct ksym *a, const struct ksym *b) {
    return a->addr < b->addr || (a->addr == b->addr && a->line < b->line);
}

static void ksym_sift(struct ksym *v, u64 i, u64 n) {
    for (;;) {
        u64 c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && ksym_less(&v[c], &v[c + 1])) c++;
        if (!ksym_less(&v[i], &v[c])) return;
        struct ksym t = v[i];
        v[i] = v[c], v[c] = t, i = c;
    }
}

static void ksym_sort(struct ksym *v, u64 n) { /* heap sort: no recursion, no allocation */
    for (u64 k = n / 2; k > 0; k--) ksym_sift(v, k - 1, n);
    for (u64 end = n; end > 1; end--) {
        struct ksym t = v[0];
        v[0] = v[end - 1], v[end - 1] = t;
        ksym_sift(v, 0, end - 1);
    }
}

/* First index in sorted v[0..n) whose address is above a. */
static u64 ksym_bound(const struct ksym *v, u64 n, u64 a) {
    u64 lo = 0, hi = n;
    while (lo < hi) {
        u64 mid = lo + (hi - lo) / 2;
        if (v[mid].addr <= a) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void put_ksyms(struct writer *w, const struct buf *syms, u32 count) {
    struct buf b;
    buf_init(&b, syms->len + 16);
    buf_varint(&b, count);
    buf_bytes(&b, syms->p, syms->len);
    buf_u8(&b, 0); /* hidden: None */
    w_long(w, 0x17, &b); /* KSYMS */
}

/* KSYMS records (labperf_common::KernelSymbols): the kallsyms text functions that hold the
 * kernel addresses seen, as the Rust agent's kallsyms.rs chooses them; one empty record
 * with `hidden` when kptr_restrict shows every address as 0. */
static void write_ksyms(struct writer *w) {
    const u64 cap = 64u << 20;
    if (!nkseen) return;
    char *text = lp_alloc(cap);
    long len = lp_read_file("/proc/kallsyms", text, cap);
    if (len <= 0) return;
    u64 lines = 1;
    for (long i = 0; i < len; i++) lines += text[i] == '\n';
    struct ksym *sy = lp_alloc(lines * sizeof *sy);
    u64 ns = 0, nonzero = 0, any = 0;
    for (const char *p = text; *p;) {
        const char *l = p;
        u64 a = hex_prefix(&p);
        if (*p == ' ' && p[1] && p[2] == ' ') {
            char kind = p[1];
            any = 1;
            nonzero |= a;
            if (kind == 't' || kind == 'T' || kind == 'w' || kind == 'W') sy[ns].addr = a, sy[ns++].line = (u64)(l - text);
        }
        while (*p && *p != '\n') p++;
        if (*p) p++;
    }
    if (any && !nonzero) {
        char kr[16] = "0";
        u64 v = 0;
        lp_read_file("/proc/sys/kernel/kptr_restrict", kr, sizeof kr);
        for (const char *q = kr; *q >= '0' && *q <= '9'; q++) v = v * 10 + (u64)(*q - '0');
        struct buf b;
        buf_init(&b, 16);
        buf_varint(&b, 0);
        buf_u8(&b, 1);
        buf_varint(&b, v);
        w_long(w, 0x17, &b);
        return;
    }
    ksym_sort(sy, ns);
    struct ksym *seen = lp_alloc((u64)nkseen * sizeof *seen);
    u64 nseen = 0;
    for (u32 i = 0; i < KSEEN_SLOTS; i++)
        if (kseen[i]) seen[nseen].addr = kseen[i], seen[nseen++].line = 0;
    ksym_sort(seen, nseen);
    struct buf out;
    buf_init(&out, 65536);
    u32 count = 0;
    u64 last = 0;
    int have_last = 0;
    for (u64 k = 0; k < nseen; k++) {
        u64 i = ksym_bound(sy, ns, seen[k].addr);
        if (!i) continue;
        u64 start = sy[i - 1].addr;
        if (have_last && last == start) continue;
        have_last = 1, last = start;
        u64 end = ~0ull;
        for (u64 j = i; j < ns; j++)
            if (sy[j].addr > start) { end = sy[j].addr; break; }
        /* Of aliases at one address, the last kallsyms lists, as perf names it (common's
         * kallsyms.rs says why). */
        const char *q = text + sy[i - 1].line;
        while (*q && *q != ' ') q++;
        q += 3; /* " T " */
        const char *name = q;
        while (*q && *q != ' ' && *q != '\t' && *q != '\n') q++;
        size_t nlen = (size_t)(q - name);
        while (*q == ' ' || *q == '\t') q++;
        const char *mod = 0;
        size_t mlen = 0;
        if (*q == '[') {
            mod = ++q;
            while (*q && *q != ']' && *q != '\n') q++;
            mlen = (size_t)(q - mod);
        }
        buf_varint(&out, start);
        buf_varint(&out, end);
        buf_strn(&out, name, nlen);
        buf_u8(&out, mod != 0);
        if (mod) buf_strn(&out, mod, mlen);
        if (++count == 4096) { /* labperf_common::MAX_KSYMS a record */
            put_ksyms(w, &out, count);
            out.len = 0, count = 0;
        }
    }
    if (count) put_ksyms(w, &out, count);
}

/* A recording under way: the workload, the rings per CPU, the converter and the file. */
/* ---- the trailer's USAGE item (common's `Usage`): the recorded CPU time by the kernel ---- */

#ifdef __alpha__
#define USER_HZ 1024
#else
#define USER_HZ 100
#endif

/* The busy (user, nice; system, irq, softirq) and idle (idle, iowait) ticks of `cpus` in
 * /proc/stat. */
static void cpu_ticks(const int *cpus, int n, u64 t[3]) {
    static char st[32768];
    long len = lp_read_file("/proc/stat", st, sizeof st - 1);
    t[0] = t[1] = t[2] = 0;
    st[len > 0 ? len : 0] = 0;
    for (char *p = st; *p;) {
        if (lp_startswith(p, "cpu") && p[3] >= '0' && p[3] <= '9') {
            char *q = p + 3;
            int cpu = 0, want = 0;
            u64 v[7] = {0};
            while (*q >= '0' && *q <= '9') cpu = cpu * 10 + (*q++ - '0');
            for (int k = 0; k < n; k++) want |= cpus[k] == cpu;
            for (int i = 0; i < 7; i++) {
                while (*q == ' ') q++;
                while (*q >= '0' && *q <= '9') v[i] = v[i] * 10 + (u64)(*q++ - '0');
            }
            if (want) t[0] += v[0] + v[1], t[1] += v[2] + v[5] + v[6], t[2] += v[3] + v[4];
        }
        while (*p && *p != '\n') p++;
        if (*p) p++;
    }
}

static u64 ticks_ns(u64 ticks) { return ticks * 1000000000u / USER_HZ; }

/* The USAGE item into `b`: with -a/-C the recorded CPUs' busy time since `t0` (scope 3:
 * CPUs, their count and idle ns); else the reaped workload's rusage (scope 0). Then user
 * and system ns, minor and major faults, the resolution in ns. */
static void usage_item(struct buf *b, int system, const int *cpus, int ncpus, const u64 t0[3]) {
    struct buf u;
    buf_init(&u, 64);
    if (system) {
        u64 t[3];
        cpu_ticks(cpus, ncpus, t);
        buf_varint(&u, 3);
        buf_varint(&u, (u64)ncpus);
        buf_varint(&u, ticks_ns(t[2] - t0[2]));
        buf_varint(&u, ticks_ns(t[0] - t0[0]));
        buf_varint(&u, ticks_ns(t[1] - t0[1]));
        buf_varint(&u, 0);
        buf_varint(&u, 0);
        buf_varint(&u, ticks_ns(1));
    } else {
        struct lp_rusage ch;
        memset(&ch, 0, sizeof ch);
        if (SYS2(__NR_getrusage, -1 /* RUSAGE_CHILDREN */, &ch) < 0) return;
        buf_varint(&u, 0);
        buf_varint(&u, (u64)ch.ru_utime.tv_sec * 1000000000u + (u64)ch.ru_utime.tv_usec * 1000u);
        buf_varint(&u, (u64)ch.ru_stime.tv_sec * 1000000000u + (u64)ch.ru_stime.tv_usec * 1000u);
        buf_varint(&u, (u64)ch.rest[3]); /* ru_minflt */
        buf_varint(&u, (u64)ch.rest[4]); /* ru_majflt */
        buf_varint(&u, 1000);
    }
    buf_varint(b, 1); /* trailer_item::USAGE */
    buf_varint(b, u.len);
    buf_bytes(b, u.p, u.len);
}

struct rec {
    long pid; /* the workload's, -1 without a command */
    int gate[2], status[2];
    int cpus[MAX_CPUS], ncpus;
    int rings[MAX_CPUS];
    u8 *maps[MAX_CPUS];
    u64 data_size, start;
    struct perf_event_attr attrs[MAX_EVENTS];
    const char *note; /* the header's note: a hardware event fell back to cpu-clock */
    struct conv *c;
    struct writer *w;
    int wstatus, ended;
    u64 ticks0[3]; /* -a/-C: the CPUs' /proc/stat ticks at the start (usage_item) */
};

/* With a command: forks the workload, held on the gate pipe until the events are open;
 * the agent then ignores Ctrl-C. */
static void spawn_workload(struct rec *r, struct opts *o, char **envp) {
    if (!o->ncommand) return;
    /* Close-on-exec: the exec closes the child's end of `status`, which is how the agent
     * learns the workload started (end of file), and the workload inherits neither pipe. */
    if (SYS2(__NR_pipe2, r->gate, LP_O_CLOEXEC) < 0 || SYS2(__NR_pipe2, r->status, LP_O_CLOEXEC) < 0)
        die("cannot create a pipe", 0, 125);
    r->pid = SYS0(__NR_fork);
    if (r->pid < 0) die("cannot fork the workload", 0, 125);
    if (r->pid == 0) {
        char b;
        SYS1(__NR_close, r->gate[1]);
        SYS1(__NR_close, r->status[0]);
        /* A killed agent takes its workload with it (PR_SET_PDEATHSIG = 1). If the agent
         * died before this, the gate read below sees end of file and the child exits. */
        SYS5(__NR_prctl, 1, LP_SIGKILL, 0, 0, 0);
        if (SYS3(__NR_read, r->gate[0], &b, 1) != 1) lp_exit(125);
        long e = SYS3(__NR_execve, o->command[0], o->command, envp);
        int err = (int)-e;
        lp_write_all(r->status[1], &err, 4);
        lp_exit(127);
    }
    SYS1(__NR_close, r->gate[0]);
    SYS1(__NR_close, r->status[1]);
    /* Ctrl-C reaches the workload from the terminal; the agent ignores it, sees the
     * workload exit and finishes the file. (Set after fork: exec keeps ignored signals.)
     * SIG_IGN with zero flags and mask reads the same in x86_64's and Alpha's sigaction;
     * Alpha's extra restorer argument is 0. A whole-machine recording without a command
     * keeps the default: Ctrl-C ends it, as --duration would not yet. */
    long act[4] = {1 /* SIG_IGN */, 0, 0, 0};
    SYS5(__NR_rt_sigaction, LP_SIGINT, act, 0, 8, 0);
}

/* Opens each event on each CPU, the first of a CPU with its ring and the others writing
 * into it; a hardware event the machine lacks falls back to cpu-clock once. With
 * --replay-ring, nothing is opened. */
static void open_events(struct rec *r, struct opts *o) {
    r->ncpus = o->ncpus ? o->ncpus : online_cpus(r->cpus);
    if (o->ncpus) memcpy(r->cpus, o->cpus, sizeof r->cpus);
    r->data_size = o->mmap_pages * PAGE;
    struct conv *c = r->c = lp_alloc(sizeof *c);
    memset(c, 0, sizeof *c);
    int defaulted = !o->nevents; /* the default event falls back silently, as perf's does */
    if (!o->nevents) parse_event("cycles", &o->events[o->nevents++]);
    if (o->off_cpu && o->nevents < MAX_EVENTS) {
        struct ev *e = &o->events[o->nevents++];
        c->off_event = o->nevents;
        e->name = "offcpu-time", e->type = PERF_TYPE_SOFTWARE, e->config = PERF_COUNT_SW_CONTEXT_SWITCHES, e->profileme = 0;
    }
    if (o->replay_ring) {
        r->ncpus = 0; /* no perf events: the samples come from the saved ring bytes */
        for (int i = 0; i < o->nevents; i++) make_attr(o, &o->events[i], i == 0, 1, o->nevents > 1, &r->attrs[i]);
        lp_puts(2, "labperf-agent: notice: --replay-ring: no events opened; samples from ");
        lp_puts(2, o->replay_ring);
        lp_puts(2, "\n");
    }
    for (int attempt = 0; attempt < 2 && !o->replay_ring; attempt++) {
        int failed = 0;
        c->nids = 0;
        for (int i = 0; i < o->nevents; i++) make_attr(o, &o->events[i], i == 0, !o->system, o->nevents > 1, &r->attrs[i]);
        for (int k = 0; k < r->ncpus && !failed; k++) {
            r->rings[k] = -1;
            for (int i = 0; i < o->nevents; i++) {
                /* The attr as the kernel reads it: size 136 (VER8) is 8 bytes past the 6.1
                 * headers' 128-byte struct, bytes that must be zero (config3). Passed from the
                 * array, they were the next attr's type and size: a 6.1 kernel refused two
                 * events with E2BIG; a 6.3+ one would have read them as config3. */
                struct { struct perf_event_attr a; u64 config3; } wire;
                memset(&wire, 0, sizeof wire);
                memcpy(&wire.a, &r->attrs[i], sizeof wire.a);
                long fd = SYS5(__NR_perf_event_open, &wire, o->system ? -1 : r->pid, r->cpus[k], -1, 8 /* CLOEXEC */);
                if (fd < 0) {
                    if (attempt == 0 && r->attrs[i].type == 0 && (fd == -LP_ENOENT || fd == -LP_EOPNOTSUPP || fd == -LP_ENODEV)) {
                        failed = 1;
                        parse_event("cpu-clock", &o->events[i]);
                        r->note = "a hardware event is not available here; fell back to cpu-clock";
                        if (!defaulted) lp_puts(2, "labperf-agent: notice: hardware event not available here; sampling cpu-clock instead\n");
                        break;
                    }
                    die_open_event(o->events[i].name, -fd);
                }
                u64 id = 0;
                SYS3(__NR_ioctl, fd, PERF_EVENT_IOC_ID, &id);
                c->ids[c->nids] = id;
                c->id_event[c->nids++] = i;
                if (r->rings[k] < 0) {
                    long m = SYS6(__NR_mmap, 0, (o->mmap_pages + 1) * PAGE, LP_PROT_READ | LP_PROT_WRITE, LP_MAP_SHARED, fd, 0);
                    if (m < 0 && m > -4096)
                        die("cannot map the perf ring buffer: the locked-memory limit (perf_event_mlock_kb, ulimit -l) is too low: use fewer --mmap-pages", 0, 125);
                    r->rings[k] = (int)fd;
                    r->maps[k] = (u8 *)m;
                } else {
                    SYS3(__NR_ioctl, fd, PERF_EVENT_IOC_SET_OUTPUT, r->rings[k]);
                }
            }
        }
        if (!failed) break;
    }
}

/* Creates the record file (and the --dump-ring file) and writes its header; the converter
 * writes into it. */
static void create_file(struct rec *r, struct opts *o) {
    struct writer *w = r->w = lp_alloc(sizeof *w);
    if (w_open(w, o->output, o->flush_ms) < 0) die_open(w, o->output);
    if (o->dump) {
        long d = SYS4(__NR_openat, LP_AT_FDCWD, o->dump, LP_O_WRONLY_CREAT_TRUNC | LP_O_NOFOLLOW, 0600);
        if (d < 0) die("cannot create the ring dump ", o->dump, 125);
        r->c->dump_fd = (int)d;
    }
    r->start = lp_clock_ns(LP_CLOCK_MONOTONIC);
    if (o->system) cpu_ticks(r->cpus, r->ncpus, r->ticks0);
    struct buf h;
    const char *notes[2];
    int nnotes = 0;
    if (o->replay_ring) notes[nnotes++] = replay_note(o);
    else if (r->note) notes[nnotes++] = r->note;
#ifndef __alpha__
    /* The host's account of the CPU time says what this leaves unseen (Alpha counts both). */
    if (!o->replay_ring && !o->system && !kernel_allowed())
        notes[nnotes++] = "kernel mode not sampled: perf_event_paranoid is above 1 and the agent has neither CAP_PERFMON nor CAP_SYS_ADMIN; run as root, or `sysctl kernel.perf_event_paranoid=1`";
#endif
    build_header(&h, o, r->attrs, o->nevents, o->replay_ring ? "replay" : "sample", notes, nnotes, r->start);
    w_header(w, &h);
    write_header_ext(w, o, o->replay_ring != 0);
    r->c->w = w;
    r->c->sample_type = r->attrs[0].sample_type;
    r->c->read_format = r->attrs[0].read_format;
}

/* With -a/-C, the tasks already running; then the workload is let go: exit 127 when it
 * cannot be run (its file abandoned). */
static void start_workload(struct rec *r, struct opts *o) {
    if (o->system) synthesize(r->w);
    if (o->ncommand) {
        char go = 'g';
        SYS3(__NR_write, r->gate[1], &go, 1);
        SYS1(__NR_close, r->gate[1]);
        int err = 0;
        if (SYS3(__NR_read, r->status[0], &err, 4) == 4) {
            w_abandon(r->w);
            die("cannot run the workload: ",
                err == LP_ENOENT ? "no such file (the C agent does not search PATH)" : "exec failed", 127);
        }
    }
}

/* A progress line's pieces, into a buffer of 160 bytes (four numbers of at most 20 digits
 * and 55 bytes of text). */
static size_t put_str(char *b, size_t n, const char *s) {
    while (*s && n < 159) b[n++] = *s++;
    return n;
}
static size_t put_u(char *b, size_t n, u64 v) {
    static const u64 p10[] = {10000000000000000000ull, 1000000000000000000ull, 100000000000000000ull,
                              10000000000000000ull, 1000000000000000ull, 100000000000000ull, 10000000000000ull,
                              1000000000000ull, 100000000000ull, 10000000000ull, 1000000000ull, 100000000ull,
                              10000000ull, 1000000ull, 100000ull, 10000ull, 1000ull, 100ull, 10ull, 1ull};
    int any = 0;
    for (int i = 0; i < 20 && n < 159; i++) {
        char d = '0';
        while (v >= p10[i]) v -= p10[i], d++; /* no divide instruction on Alpha */
        if (d != '0' || any || i == 19) b[n++] = d, any = 1;
    }
    return n;
}

/* Drains the rings into the file, printing --progress, until --duration passes or the
 * workload ends (`ended`, its `wstatus`). */
static void watch_rings(struct rec *r, struct opts *o) {
    struct conv *c = r->c;
    u64 said = r->start, secs = 0; /* counted, not divided: Alpha has no divide instruction */
    for (;;) {
        u64 now = lp_clock_ns(LP_CLOCK_MONOTONIC);
        if (o->progress && now - said >= 1000000000u) { /* the Rust agent's line, for labperf's board */
            while (now - said >= 1000000000u) said += 1000000000u, secs++;
            /* One write: the workload shares this stderr, and a line written in pieces
             * was cut by the bench's own lines on the Alpha machine. */
            static char line[160];
            size_t n = 0;
            n = put_str(line, n, "labperf-agent: ");
            n = put_u(line, n, secs);
            n = put_str(line, n, " s, ");
            n = put_u(line, n, c->samples);
            n = put_str(line, n, " samples, ");
            n = put_u(line, n, r->w->bytes >> 10);
            n = put_str(line, n, " KiB written, ");
            n = put_u(line, n, c->lost);
            n = put_str(line, n, " lost\n");
            lp_write_all(2, line, n);
        }
        if (o->duration_ms && lp_clock_ns(LP_CLOCK_MONOTONIC) - r->start >= o->duration_ms * 1000000u) break;
        struct lp_pollfd pfd[MAX_CPUS];
        for (int k = 0; k < r->ncpus; k++) pfd[k].fd = r->rings[k], pfd[k].events = LP_POLLIN, pfd[k].revents = 0;
        if (!r->ncpus) { /* --replay-ring: nothing to drain meanwhile */
            if (SYS4(__NR_wait4, r->pid, &r->wstatus, 0, 0) == r->pid) break;
            continue;
        }
        SYS3(__NR_poll, pfd, r->ncpus, 100);
        u64 round = lp_clock_ns(LP_CLOCK_MONOTONIC);
        for (int k = 0; k < r->ncpus; k++) drain(c, r->maps[k], r->data_size);
        offcpu_settle(c, round);
        w_tick(r->w);
        if (o->ncommand && SYS4(__NR_wait4, r->pid, &r->wstatus, LP_WNOHANG, 0) == r->pid) {
            r->ended = 1;
            break;
        }
    }
}

/* Stops a command --duration outlived, drains what is left, writes the KSYMS and the
 * trailer; the exit status: the workload's, or 0 when --duration stopped it. */
static int finish_file(struct rec *r, struct opts *o) {
    struct conv *c = r->c;
    struct writer *w = r->w;
    if (o->ncommand && !r->ended) { /* --duration ended first: the command stops with the recording */
        SYS2(__NR_kill, r->pid, 15 /* SIGTERM */);
        SYS4(__NR_wait4, r->pid, &r->wstatus, 0, 0);
    }
    for (int k = 0; k < r->ncpus; k++) drain(c, r->maps[k], r->data_size);
    offcpu_finish(c, lp_clock_ns(LP_CLOCK_MONOTONIC));
    write_ksyms(w);
    if (o->replay_ring) feed_ring_file(c, o->replay_ring);
    struct lp_rusage ru;
    memset(&ru, 0, sizeof ru);
    SYS2(__NR_getrusage, 0, &ru);
    u64 cpu_ns = (u64)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u + (u64)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
    int sig = r->wstatus & 0x7f, code = (r->wstatus >> 8) & 0xff;
    struct buf items;
    buf_init(&items, 64);
    if (!o->replay_ring) usage_item(&items, o->system, r->cpus, r->ncpus, r->ticks0);
    w_trailer(w, &items, c->samples, c->lost, c->throttled, cpu_ns, self_peak_rss_kib((u64)ru.ru_maxrss), code, sig, lp_clock_ns(LP_CLOCK_MONOTONIC) - r->start);
    if (w_finish(w) < 0) die_write(w, o->output);
    /* A command --duration stopped: the recording is what was asked, so 0; the trailer keeps the signal. */
    if (o->ncommand && !r->ended) sig = code = 0;
    write_status("ok", 0, 0, sig ? 128 + sig : code);
    /* An event that opened but never sampled: its counter never reached the period (a PMU
     * that does not count, as QEMU's Alpha, or a period longer than the run). Said, as
     * the Rust agent says it, rather than a file of zeros without a word. */
    for (int i = 0; i < o->nevents && !o->replay_ring; i++) {
        if (c->event_samples[i]) continue;
        lp_puts(2, "labperf-agent: warning: event '");
        lp_puts(2, o->events[i].name);
        lp_puts(2, "' opened but produced no sample: its counter never reached the period (a PMU that does not count, as under an emulator, or a period longer than the run)\n");
    }
    if (!o->quiet) {
        lp_puts(2, "labperf-agent: wrote ");
        lp_putu(2, c->samples);
        lp_puts(2, c->samples == 1 ? " sample to " : " samples to ");
        lp_puts(2, o->output);
        lp_puts(2, "\n");
    }
    return sig ? 128 + sig : code;
}

static int record(struct opts *o, char **envp) {
    if (!o->ncommand && !o->system) die("no workload: give a command after --", 0, 2);
    if (o->system) may_record_cpus();
    require_profileme(o, !o->replay_ring);
    static struct rec r;
    r.pid = -1;
    spawn_workload(&r, o, envp);
    open_events(&r, o);
    create_file(&r, o);
    start_workload(&r, o);
    watch_rings(&r, o);
    return finish_file(&r, o);
}

/* ---- stat: counting, as the Rust agent's stat.rs ---- */

/* perf's default set; its clock is cpu-clock on CPUs (-a/-C), task-clock otherwise. */
static const char *const STAT_DEFAULT[] = {"task-clock", "context-switches", "cpu-migrations",
                                           "page-faults", "cycles", "instructions"};

#ifndef __alpha__
/* perf_event_paranoid <= 1, or CAP_PERFMON/CAP_SYS_ADMIN: kernel mode is counted too. */
static int kernel_allowed(void) {
    static char st[4096];
    char par[32];
    u64 caps = 0;
    int paranoid = 2;
    if (lp_read_file("/proc/sys/kernel/perf_event_paranoid", par, sizeof par) > 0) {
        paranoid = par[0] == '-' ? -1 : 0;
        for (char *p = par + (par[0] == '-'); *p >= '0' && *p <= '9'; p++)
            paranoid = paranoid < 0 ? paranoid : paranoid * 10 + (*p - '0');
    }
    if (lp_read_file("/proc/self/status", st, sizeof st - 1) > 0) {
        for (char *p = st; *p; p++) {
            if (lp_startswith(p, "CapEff:")) {
                for (p += 7; *p == ' ' || *p == '\t'; p++) {}
                for (; (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'); p++)
                    caps = caps << 4 | (u64)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
                break;
            }
        }
    }
    return (caps & (1ull << 38 | 1ull << 21)) || paranoid <= 1;
}
#endif

struct counts {
    u64 v[MAX_EVENTS][3]; /* value, time_enabled, time_running */
};

/* Each counter summed over its fds (one per CPU). */
static void stat_read(int n, int ncpus, long fds[][MAX_CPUS], struct counts *t) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < ncpus; k++) {
            u64 b[3];
            if (SYS3(__NR_read, fds[i][k], b, sizeof b) == (long)sizeof b)
                for (int j = 0; j < 3; j++) t->v[i][j] += b[j];
        }
}

/* "S.NNNNNNNNN" of ns, the Rust agent's `seconds`. */
static size_t put_seconds(char *b, size_t n, u64 ns) {
    u64 s = 0;
    while (ns >= 1000000000u) ns -= 1000000000u, s++; /* no divide on Alpha */
    n = put_u(b, n, s);
    b[n++] = '.';
    char frac[24];
    size_t f = put_u(frac, 0, ns + 1000000000u); /* "1" and nine digits */
    for (size_t i = 1; i < f; i++) b[n++] = frac[i];
    return n;
}

/* Right-aligned in w columns. */
static size_t put_right(char *b, size_t n, const char *s, size_t len, size_t w) {
    while (len < w && n < 150) b[n++] = ' ', w--;
    for (size_t i = 0; i < len && n < 159; i++) b[n++] = s[i];
    return n;
}

/* a * b / c (0 when c is 0, at most 2^64-1), by shifts: Alpha has no divide instruction
 * and libgcc's 128-bit one needs libc's __divqu. */
static u64 muldiv(u64 a, u64 b, u64 c) {
    unsigned __int128 p = (unsigned __int128)a * b, rem = 0, q = 0;
    if (!c) return 0;
    for (int i = 127; i >= 0; i--) {
        rem = rem << 1 | (u64)(p >> i & 1);
        q <<= 1;
        if (rem >= c) rem -= c, q |= 1;
    }
    return q >> 64 ? ~0ull : (u64)q;
}

/* One counter's line, `label` its interval's end or "total", the count scaled for
 * multiplexing (value * enabled / running, 0 when it never ran), in one write. */
static void stat_line(const char *label, size_t llen, const u64 *c, const char *name) {
    static char line[160];
    char num[24];
    u64 scaled = c[1] == c[2] ? c[0] : muldiv(c[0], c[1], c[2]);
    size_t n = put_right(line, 0, label, llen, 12);
    line[n++] = ' ';
    n = put_right(line, n, num, put_u(num, 0, scaled), 18);
    line[n++] = ' ';
    n = put_str(line, n, name);
    line[n++] = '\n';
    lp_write_all(2, line, n);
}

/* An Interval record (tag 0x16): time, tid None, delta, the counts. */
static void put_interval(struct writer *w, u64 t, int delta, int n, const struct counts *c) {
    struct buf b;
    scratch(&b, 64 + n * 40);
    buf_varint(&b, t);
    buf_u8(&b, 0);
    buf_u8(&b, (u8)delta);
    buf_varint(&b, n);
    for (int i = 0; i < n; i++) {
        buf_varint(&b, i);
        for (int j = 0; j < 3; j++) buf_varint(&b, c->v[i][j]);
    }
    w_long(w, 0x16, &b);
}

/* A count under way: the workload, the counters (one fd per event and CPU), the file. */
struct stat_run {
    struct rec r;
    long fds[MAX_EVENTS][MAX_CPUS];
    struct perf_event_attr attrs[MAX_EVENTS];
    int n; /* the events opened (o->events keeps only those) */
    const char *notes[MAX_EVENTS + 1];
    char said[MAX_EVENTS][160];
    int nnotes;
    struct writer *w; /* with -o only */
    u64 t0;
    int ended;
};

/* One event's counter on each CPU of the run (-1: any, following the workload); the errno
 * of the first that cannot be opened (those opened are closed). */
static long stat_open_one(struct stat_run *s, const struct opts *o, const struct ev *e, int kernel) {
    struct perf_event_attr *a = &s->attrs[s->n];
    memset(a, 0, sizeof *a);
    a->type = e->type;
    a->config = e->config;
    a->size = 136;
    a->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    a->disabled = 1;
    a->enable_on_exec = !o->system;
    a->inherit = !o->no_inherit && !o->system;
#ifndef __alpha__
    /* Kernel mode too, by perf's rule (Alpha's PMU rejects every exclude_* bit). */
    a->exclude_kernel = !kernel;
    a->exclude_hv = 1;
#endif
    a->use_clockid = 1;
    a->clockid = LP_CLOCK_MONOTONIC;
    for (int k = 0; k < s->r.ncpus; k++) {
        struct { struct perf_event_attr a; u64 config3; } wire; /* zero-padded to 136 bytes */
        memset(&wire, 0, sizeof wire);
        memcpy(&wire.a, a, sizeof wire.a);
        long fd = SYS5(__NR_perf_event_open, &wire, o->system ? -1 : s->r.pid, s->r.cpus[k], -1, 8 /* CLOEXEC */);
        if (fd < 0) {
            while (k > 0) SYS1(__NR_close, s->fds[s->n][--k]);
            return -fd;
        }
        s->fds[s->n][k] = fd;
    }
    return 0;
}

/* Opens every event (perf's default set without -e); a default or hardware event this
 * machine lacks is left out, noted in the file (and said when named); any other refusal,
 * or none opened, ends the run. */
static void stat_open(struct stat_run *s, struct opts *o) {
    static struct ev evs[MAX_EVENTS];
    int defaulted = !o->nevents;
    for (int i = 0; defaulted && i < 6; i++)
        parse_event(o->system && i == 0 ? "cpu-clock" : STAT_DEFAULT[i], &o->events[o->nevents++]);
#ifdef __alpha__
    int kernel = 1; /* no exclude_* bit on Alpha: kernel mode is counted (or refused) */
#else
    int kernel = kernel_allowed();
#endif
    if (!kernel) {
        s->notes[s->nnotes++] = "kernel mode not counted (perf_event_paranoid > 1, no CAP_PERFMON)";
        lp_puts(2, "labperf-agent: notice: kernel mode not counted (perf_event_paranoid > 1, no CAP_PERFMON)\n");
    }
    s->r.ncpus = o->system ? (o->ncpus ? o->ncpus : online_cpus(s->r.cpus)) : 1;
    if (o->system && o->ncpus) memcpy(s->r.cpus, o->cpus, sizeof s->r.cpus);
    if (!o->system) s->r.cpus[0] = -1;
    for (int i = 0; i < o->nevents; i++) {
        long err = stat_open_one(s, o, &o->events[i], kernel);
        if (!err) {
            evs[s->n++] = o->events[i];
            continue;
        }
        if ((err == LP_ENOENT || err == LP_EOPNOTSUPP || err == LP_ENODEV) && (defaulted || o->events[i].type == 0)) {
            char *m = s->said[i];
            size_t n = put_str(m, 0, "'");
            n = put_str(m, n, o->events[i].name);
            n = put_str(m, n, "' is not supported here (");
            n = put_str(m, n, err == LP_ENOENT ? "no such event on this machine's PMU"
                              : err == LP_ENODEV ? "no such PMU on this machine"
                                                 : "this machine's PMU cannot sample it");
            n = put_str(m, n, "): left out");
            m[n] = 0;
            s->notes[s->nnotes++] = m;
            if (!defaulted) lp_puts(2, "labperf-agent: notice: "), lp_puts(2, m), lp_puts(2, "\n");
            continue;
        }
        if (s->r.pid > 0) SYS2(__NR_kill, s->r.pid, LP_SIGKILL);
        die_open_event(o->events[i].name, err);
    }
    if (!s->n) {
        if (s->r.pid > 0) SYS2(__NR_kill, s->r.pid, LP_SIGKILL);
        die("none of the events could be opened; run `labperf list` to see what this machine has", 0, 125);
    }
    memcpy(o->events, evs, sizeof evs);
    o->nevents = s->n;
}

/* Until the workload ends or --duration passes, with a line and a record per -I interval
 * (the last one partial). It blocks, as perf stat does, so that counting does not preempt
 * what it counts: in poll on the workload's pidfd (readable when it exits) until the next
 * interval or the --duration's end; without a pidfd (a kernel before 5.3) it looks every
 * 1 ms. */
static void stat_watch(struct stat_run *s, const struct opts *o) {
    long pidfd = -1;
#ifdef __NR_pidfd_open
    if (s->r.pid > 0) pidfd = SYS2(__NR_pidfd_open, s->r.pid, 0);
#endif
    static struct counts prev, now, delta;
    u64 every = o->interval_ms * 1000000u, next = every ? s->t0 + every : 0;
    u64 until = o->duration_ms ? s->t0 + o->duration_ms * 1000000u : 0;
    for (;;) {
        u64 at = lp_clock_ns(LP_CLOCK_MONOTONIC);
        u64 deadline = next && (!until || next < until) ? next : until;
        long wait_ms = -1;
        if (deadline) {
            u64 left = deadline > at ? deadline - at : 0, ms = 0;
            /* ms, rounded up, at most poll's int (it wakes and looks again): a long division
             * by shifts (no divide on Alpha; subtracting 1 ms at a time spun for seconds) */
            for (int k = 31; k >= 0; k--)
                if (left >= 1000000ull << k) left -= 1000000ull << k, ms |= 1ull << k;
            wait_ms = ms >= 0x7fffffff ? 0x7fffffff : (long)(ms + (left ? 1 : 0));
        }
        if (pidfd < 0 && o->ncommand && (wait_ms < 0 || wait_ms > 1)) wait_ms = 1;
        struct lp_pollfd pfd = {(int)pidfd, LP_POLLIN, 0};
        SYS3(__NR_poll, &pfd, pidfd >= 0 ? 1 : 0, wait_ms);
        at = lp_clock_ns(LP_CLOCK_MONOTONIC);
        int done = (until && at >= until) ||
                   (o->ncommand && SYS4(__NR_wait4, s->r.pid, &s->r.wstatus, LP_WNOHANG, 0) == s->r.pid && (s->ended = 1));
        if (every && at >= next && !done) {
            while (next <= at) next += every;
        } else if (!(every && done)) {
            if (done) return;
            continue;
        }
        /* An interval's end: each counter's change, printed and recorded. */
        stat_read(s->n, s->r.ncpus, s->fds, &now);
        char label[32];
        size_t ll = put_seconds(label, 0, at - s->t0);
        for (int i = 0; i < s->n; i++) {
            for (int j = 0; j < 3; j++) delta.v[i][j] = now.v[i][j] - prev.v[i][j];
            stat_line(label, ll, delta.v[i], o->events[i].name);
        }
        prev = now;
        if (s->w) {
            put_interval(s->w, at - s->t0, 1, s->n, &delta);
            w_tick(s->w);
        }
        if (done) return;
    }
}

/* The totals: printed (unless --no-summary), recorded with the trailer; the status. */
static int stat_finish(struct stat_run *s, const struct opts *o) {
    static struct counts now;
    u64 elapsed = lp_clock_ns(LP_CLOCK_MONOTONIC) - s->t0;
    if (o->ncommand && !s->ended) { /* --duration ended first: the command stops with the count */
        SYS2(__NR_kill, s->r.pid, 15 /* SIGTERM */);
        SYS4(__NR_wait4, s->r.pid, &s->r.wstatus, 0, 0);
    }
    stat_read(s->n, s->r.ncpus, s->fds, &now);
    if (!o->no_summary) {
        for (int i = 0; i < s->n; i++) stat_line("total", 5, now.v[i], o->events[i].name);
        static char line[64];
        char secs[32];
        size_t n = put_right(line, 0, secs, put_seconds(secs, 0, elapsed), 12);
        n = put_str(line, n, " seconds time elapsed\n");
        lp_write_all(2, line, n);
    }
    int sig = s->r.wstatus & 0x7f, code = (s->r.wstatus >> 8) & 0xff;
    if (s->w) {
        put_interval(s->w, elapsed, 0, s->n, &now);
        struct lp_rusage ru;
        memset(&ru, 0, sizeof ru);
        SYS2(__NR_getrusage, 0, &ru);
        u64 cpu_ns = (u64)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u + (u64)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
        struct buf items;
        buf_init(&items, 64);
        usage_item(&items, o->system, s->r.cpus, s->r.ncpus, s->r.ticks0);
        w_trailer(s->w, &items, 0, 0, 0, cpu_ns, self_peak_rss_kib((u64)ru.ru_maxrss), code, sig, lp_clock_ns(LP_CLOCK_MONOTONIC) - s->r.start);
        if (w_finish(s->w) < 0) die_write(s->w, o->output);
    }
    if (o->ncommand && !s->ended) sig = code = 0;
    if (o->no_summary) { /* the workload's times, as the Rust agent's status line has them */
        struct lp_rusage ch;
        memset(&ch, 0, sizeof ch);
        SYS2(__NR_getrusage, -1 /* RUSAGE_CHILDREN */, &ch);
        status_times = 1;
        status_user_ns = (u64)ch.ru_utime.tv_sec * 1000000000u + (u64)ch.ru_utime.tv_usec * 1000u;
        status_sys_ns = (u64)ch.ru_stime.tv_sec * 1000000000u + (u64)ch.ru_stime.tv_usec * 1000u;
    }
    write_status("ok", 0, 0, sig ? 128 + sig : code);
    return sig ? 128 + sig : code;
}

/* stat: counts the events over the workload (or -a/-C, for --duration or while CMD runs),
 * every -I ms too; prints a line per counter and interval and the totals (unless
 * --no-summary: labperf prints perf's layout from the file), and records them with -o,
 * as the Rust agent's stat.rs. */
static int stat_cmd(struct opts *o, char **envp) {
    static struct stat_run s;
    if (o->profileme || o->mem || o->period || o->freq || o->callgraph || o->dump || o->replay_ring)
        die("stat counts: --profileme, --mem, -c, -F, -g, --dump-ring and --replay-ring go with record", 0, 125);
    if (!o->ncommand && !o->system) die("no workload: give a command after --", 0, 2);
    if (o->system) may_record_cpus();
    s.r.pid = -1;
    spawn_workload(&s.r, o, envp);
    stat_open(&s, o);
    s.r.start = lp_clock_ns(LP_CLOCK_MONOTONIC);
    if (o->system) cpu_ticks(s.r.cpus, s.r.ncpus, s.r.ticks0);
    if (o->output_given) {
        s.w = lp_alloc(sizeof *s.w);
        if (w_open(s.w, o->output, o->flush_ms) < 0) die_open(s.w, o->output);
        struct buf h;
        build_header(&h, o, s.attrs, s.n, "stat", s.notes, s.nnotes, s.r.start);
        w_header(s.w, &h);
        write_header_ext(s.w, o, 0);
    }
    /* The elapsed time starts before the enables and the exec, as perf's. */
    s.t0 = lp_clock_ns(LP_CLOCK_MONOTONIC);
    if (o->system)
        for (int i = 0; i < s.n; i++)
            for (int k = 0; k < s.r.ncpus; k++) SYS3(__NR_ioctl, s.fds[i][k], PERF_EVENT_IOC_ENABLE, 0);
    if (o->ncommand) {
        char go = 'g';
        SYS3(__NR_write, s.r.gate[1], &go, 1);
        SYS1(__NR_close, s.r.gate[1]);
        int e = 0;
        if (SYS3(__NR_read, s.r.status[0], &e, 4) == 4) {
            if (s.w) w_abandon(s.w);
            die("cannot run the workload: ", e == LP_ENOENT ? "no such file (the C agent does not search PATH)" : "exec failed", 127);
        }
    }
    stat_watch(&s, o);
    return stat_finish(&s, o);
}

int lp_main(long argc, char **argv, char **envp) {
    if (argc < 2) {
        lp_puts(2, USAGE);
        return 2;
    }
    const char *cmd = argv[1];
    if (lp_streq(cmd, "--version") || lp_streq(cmd, "-V") || lp_streq(cmd, "version")) {
        lp_puts(1, VERSION " " ARCH_NAME "\n");
        return 0;
    }
    if (lp_streq(cmd, "--help") || lp_streq(cmd, "-h") || lp_streq(cmd, "help")) {
        lp_puts(1, USAGE);
        return 0;
    }
    for (char **e = envp; e && *e; e++)
        if (lp_startswith(*e, "LABPERF_SYSFS=")) sysfs_root = *e + 14;
    /* A refusal, even of an option before --status-file or of a command this agent lacks,
     * is said through --status-file too: labperf shows the agent's own words, not a run
     * that seems killed. */
    for (int i = 2; i + 1 < (int)argc && !lp_streq(argv[i], "--"); i++)
        if (lp_streq(argv[i], "--status-file")) status_path = argv[i + 1];
    struct opts *o = lp_alloc(sizeof *o);
    if (lp_streq(cmd, "plan")) {
        parse_opts((int)argc, argv, 2, o);
        return plan(o);
    }
    if (lp_streq(cmd, "record")) {
        parse_opts((int)argc, argv, 2, o);
        return record(o, envp);
    }
    if (lp_streq(cmd, "stat")) {
        o->stat = 1;
        parse_opts((int)argc, argv, 2, o);
        return stat_cmd(o, envp);
    }
    if (lp_streq(cmd, "replay")) {
        if (argc < 3) die("replay needs the ring dump file", 0, 2);
        parse_opts((int)argc, argv, 3, o);
        o->replay = argv[2];
        return replay(o);
    }
    if (lp_streq(cmd, "list"))
        die(cmd, ": not in the C agent (it records and counts; the Rust agent lists)", 2);
    die("unknown command ", cmd, 2);
    return 2;
}
