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
        v = v * base + d;
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
