/* lib.c: the libc pieces the agent needs (and that GCC may call): memory, strings, numbers, output. */
#include "sys.h"

void *memcpy(void *d, const void *s, size_t n) {
    u8 *dp = d;
    const u8 *sp = s;
    while (n--) *dp++ = *sp++;
    return d;
}

void *memmove(void *d, const void *s, size_t n) {
    u8 *dp = d;
    const u8 *sp = s;
    if (dp < sp) {
        while (n--) *dp++ = *sp++;
    } else {
        while (n--) dp[n] = sp[n];
    }
    return d;
}

void *memset(void *d, int c, size_t n) {
    u8 *dp = d;
    while (n--) *dp++ = (u8)c;
    return d;
}

int memcmp(const void *a, const void *b, size_t n) {
    const u8 *x = a, *y = b;
    for (; n; n--, x++, y++)
        if (*x != *y) return *x - *y;
    return 0;
}

size_t lp_strlen(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

int lp_streq(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

int lp_startswith(const char *s, const char *p) {
    while (*p)
        if (*s++ != *p++) return 0;
    return 1;
}

int lp_parse_u64(const char *s, u64 *out) {
    u64 v = 0;
    int base = 10;
    if (s[0] == '0' && s[1] == 'x') base = 16, s += 2;
    if (!*s) return 0;
    for (; *s; s++) {
        int d;
        if (*s >= '0' && *s <= '9') d = *s - '0';
        else if (base == 16 && *s >= 'a' && *s <= 'f') d = *s - 'a' + 10;
        else if (base == 16 && *s >= 'A' && *s <= 'F') d = *s - 'A' + 10;
        else return 0;
        /* past 2^64 - 1: refused, never wrapped (no division: Alpha has no divide insn) */
        if (__builtin_mul_overflow(v, (u64)base, &v) || __builtin_add_overflow(v, (u64)d, &v)) return 0;
    }
    *out = v;
    return 1;
}

void lp_write_all(int fd, const void *buf, size_t n) {
    const u8 *p = buf;
    while (n) {
        long w = SYS3(__NR_write, fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= w;
    }
}

void lp_puts(int fd, const char *s) { lp_write_all(fd, s, lp_strlen(s)); }

/* Decimal output by subtracting powers of ten: Alpha has no divide instruction, and
 * the libgcc helpers GCC would call for "/ 10" live in glibc there. */
void lp_putu(int fd, u64 v) {
    static const u64 p10[] = {10000000000000000000ull, 1000000000000000000ull, 100000000000000000ull,
                              10000000000000000ull, 1000000000000000ull, 100000000000000ull, 10000000000000ull,
                              1000000000000ull, 100000000000ull, 10000000000ull, 1000000000ull, 100000000ull,
                              10000000ull, 1000000ull, 100000ull, 10000ull, 1000ull, 100ull, 10ull, 1ull};
    char b[24];
    int n = 0;
    for (int i = 0; i < 20; i++) {
        char d = '0';
        while (v >= p10[i]) v -= p10[i], d++;
        if (d != '0' || n || i == 19) b[n++] = d;
    }
    b[n] = 0;
    lp_puts(fd, b);
}

void lp_exit(int code) {
    for (;;) SYS1(__NR_exit_group, code);
}

u64 lp_clock_ns(int clock) {
    struct lp_timespec ts = {0, 0};
    SYS2(__NR_clock_gettime, clock, &ts);
    return (u64)ts.tv_sec * 1000000000u + (u64)ts.tv_nsec;
}

long lp_read_file(const char *path, char *buf, size_t cap) {
    long fd = SYS4(__NR_openat, LP_AT_FDCWD, path, LP_O_RDONLY, 0);
    if (fd < 0) return fd;
    size_t n = 0;
    while (n + 1 < cap) {
        long r = SYS3(__NR_read, fd, buf + n, cap - 1 - n);
        if (r <= 0) break;
        n += r;
    }
    buf[n] = 0;
    SYS1(__NR_close, fd);
    return (long)n;
}

#define LP_S_IFMT 0170000
#define LP_S_IFREG 0100000
#define LP_S_IFDIR 0040000
#define LP_S_IFLNK 0120000
#define LP_S_IFSOCK 0140000
#define LP_AT_SYMLINK_NOFOLLOW 0x100
#define LP_AT_EMPTY_PATH 0x1000

static long lp_statx(int dirfd, const char *path, int flags, struct statx *st) {
    return SYS5(__NR_statx, dirfd, path, flags, STATX_TYPE | STATX_INO | STATX_UID, st);
}

/* Why the file type MODE cannot be written; 0 when it can. */
static const char *dest_refused(u32 mode) {
    switch (mode & LP_S_IFMT) {
    case LP_S_IFDIR: return "it is a directory";
    case LP_S_IFSOCK: return "it is a socket";
    case LP_S_IFREG: return 0;
    case 0020000: case 0060000: case 0010000: return 0; /* character, block device, FIFO */
    default: return "it is neither a regular file, a device nor a FIFO";
    }
}

int lp_dest(const char *path, char *real, size_t cap, int *fd, const char **why) {
    static char cur[1024], link[1024];
    struct statx t, s;
    *why = 0;
    if (lp_streq(path, "-")) {
        *why = "standard output is the workload's: name a file, a device or a FIFO";
        return -LP_EINVAL;
    }
    long r = lp_statx(LP_AT_FDCWD, path, 0, &t);
    int have = r == 0;
    if (r < 0 && r != -LP_ENOENT) return (int)r;
    if (have) {
        if ((*why = dest_refused(t.stx_mode))) return -LP_EINVAL;
        if ((t.stx_mode & LP_S_IFMT) != LP_S_IFREG) {
            long f = SYS4(__NR_openat, LP_AT_FDCWD, path, LP_O_WRONLY | LP_O_NOCTTY | LP_O_CLOEXEC, 0);
            if (f < 0) return (int)f;
            /* Never write into a file unannounced: it must still be a device or FIFO. */
            if (lp_statx((int)f, "", LP_AT_EMPTY_PATH, &s) < 0 || dest_refused(s.stx_mode) ||
                (s.stx_mode & LP_S_IFMT) == LP_S_IFREG) {
                SYS1(__NR_close, f);
                *why = "it changed while being opened";
                return -LP_EINVAL;
            }
            *fd = (int)f;
            return 1;
        }
    }
    size_t n = lp_strlen(path);
    if (n >= sizeof cur) return -LP_ENAMETOOLONG;
    memcpy(cur, path, n + 1);
    for (int hops = 0; hops < 40; hops++) {
        r = lp_statx(LP_AT_FDCWD, cur, LP_AT_SYMLINK_NOFOLLOW, &s);
        if (r == 0 && (s.stx_mode & LP_S_IFMT) == LP_S_IFLNK) {
            /* A descriptor (/dev/stdout, /dev/fd/N) of a regular file: written through, at
             * its end (a `>>` log keeps its lines), never replaced. */
            if (lp_startswith(cur, "/proc/self/fd/")) {
                *fd = (int)SYS4(__NR_openat, LP_AT_FDCWD, cur, LP_O_WRONLY | LP_O_APPEND | LP_O_CLOEXEC, 0);
                return *fd < 0 ? *fd : 1;
            }
            if (s.stx_uid && s.stx_uid != (u32)SYS0(LP_NR_GETEUID)) {
                *why = "it is a link another user owns: name the file itself";
                return -LP_EINVAL;
            }
            long k = SYS4(__NR_readlinkat, LP_AT_FDCWD, cur, link, sizeof link - 1);
            if (k < 0) return (int)k;
            link[k] = 0;
            /* A relative target is relative to the link's directory. */
            size_t dir = 0;
            if (link[0] != '/')
                for (size_t i = 0; cur[i]; i++)
                    if (cur[i] == '/') dir = i + 1;
            if (dir + (size_t)k >= sizeof cur) return -LP_ENAMETOOLONG;
            memcpy(cur + dir, link, (size_t)k + 1);
            continue;
        }
        if (r == 0) {
            /* The file the walk ends at must be the one the path names (a /proc fd link to
             * a deleted file reads as a name that is something else). */
            if (!have || s.stx_ino != t.stx_ino || s.stx_dev_major != t.stx_dev_major ||
                s.stx_dev_minor != t.stx_dev_minor) {
                *why = "it names an open file that has no path of its own (deleted?)";
                return -LP_EINVAL;
            }
        } else if (r != -LP_ENOENT || have) {
            return (int)r;
        } else if (hops) {
            /* A link to nothing: a planted link would make a file where it points. */
            *why = "it is a symbolic link to nothing: name the file itself";
            return -LP_EINVAL;
        }
        n = lp_strlen(cur);
        if (n >= cap) return -LP_ENAMETOOLONG;
        memcpy(real, cur, n + 1);
        return 0;
    }
    return -LP_ELOOP;
}

/* A new regular file, 0600 (O_CREAT|O_EXCL makes one or fails): whatever TMP holds (a
 * killed run's file, a link or FIFO another user planted) is removed first, never opened;
 * one planted again in between is refused (EEXIST). */
long lp_open_temporary(const char *tmp) {
    SYS3(__NR_unlinkat, LP_AT_FDCWD, tmp, 0);
    return SYS4(__NR_openat, LP_AT_FDCWD, tmp, LP_O_WRONLY_CREAT_EXCL | LP_O_NOFOLLOW | LP_O_CLOEXEC, 0600);
}

static u8 *heap, *heap_end;

void *lp_alloc(size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!heap || (size_t)(heap_end - heap) < n) {
        size_t chunk = n > (1u << 20) ? n : (1u << 20);
        long p = SYS6(__NR_mmap, 0, chunk, LP_PROT_READ | LP_PROT_WRITE, LP_MAP_PRIVATE | LP_MAP_ANON, -1, 0);
        if (p < 0 && p > -4096) {
            lp_puts(2, "labperf-agent: error: out of memory\n");
            lp_exit(125);
        }
        heap = (u8 *)p;
        heap_end = heap + chunk;
    }
    void *r = heap;
    heap += n;
    return r;
}
