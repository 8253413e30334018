/* writer.c: frames, CRC-32, varints and records of the labperf format, as labperf-common specifies. */
#include "writer.h"

void buf_init(struct buf *b, size_t cap) {
    b->p = lp_alloc(cap);
    b->len = 0;
    b->cap = cap;
}

static void buf_reserve(struct buf *b, size_t n) {
    if (b->len + n <= b->cap) return;
    size_t cap = b->cap * 2 > b->len + n ? b->cap * 2 : b->len + n;
    u8 *p = lp_alloc(cap); /* the bump allocator never frees: growth is rare */
    memcpy(p, b->p, b->len);
    b->p = p;
    b->cap = cap;
}

void buf_u8(struct buf *b, u8 v) {
    buf_reserve(b, 1);
    b->p[b->len++] = v;
}

void buf_bytes(struct buf *b, const void *p, size_t n) {
    buf_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

void buf_varint(struct buf *b, u64 v) {
    buf_reserve(b, 10);
    while (v >= 0x80) {
        b->p[b->len++] = (u8)v | 0x80;
        v >>= 7;
    }
    b->p[b->len++] = (u8)v;
}

void buf_zz(struct buf *b, i64 v) { buf_varint(b, ((u64)v << 1) ^ (u64)(v >> 63)); }

void buf_strn(struct buf *b, const char *s, size_t n) {
    buf_varint(b, n);
    buf_bytes(b, s, n);
}

void buf_str(struct buf *b, const char *s) { buf_strn(b, s, lp_strlen(s)); }

static u32 crc_table[256];

u32 lp_crc32(const u8 *p, size_t n) {
    if (!crc_table[1]) {
        for (u32 i = 0; i < 256; i++) {
            u32 c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            crc_table[i] = c;
        }
    }
    u32 c = 0xFFFFFFFFu;
    while (n--) c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

static void le32(u8 *p, u32 v) {
    for (int i = 0; i < 4; i++) p[i] = (u8)(v >> (8 * i));
}

static void out(struct writer *w, const void *p, size_t n) {
    if (w->failed) return;
    const u8 *q = p;
    while (n) {
        long r = SYS3(__NR_write, w->fd, q, n);
        if (r <= 0) {
            w->failed = 1;
            w->err = -r;
            return;
        }
        q += r;
        n -= r;
        w->bytes += r;
    }
}

/* Frame header: sync, kind, flags, reserved, seq, first_record, nrecords, len, payload crc, header crc. */
static void frame(struct writer *w, u8 kind, u32 nrecords, const u8 *payload, size_t len) {
    u8 h[36] = {0xF5, 'L', 'P', 'F', kind, 0, 0, 0};
    le32(h + 8, w->seq);
    le32(h + 12, (u32)w->records_before);
    le32(h + 16, (u32)(w->records_before >> 32));
    le32(h + 20, nrecords);
    le32(h + 24, (u32)len);
    le32(h + 28, lp_crc32(payload, len));
    le32(h + 32, lp_crc32(h, 32));
    out(w, h, 36);
    out(w, payload, len);
    w->seq++;
}

static void reset_frame(struct writer *w) {
    w->chunk.len = 0;
    w->chunk_records = 0;
    w->nthreads = 0;
    w->last_thread = 0;
    w->have_thread = 0;
    w->event = w->cpu = 0;
    w->period = w->ip = w->time = w->addr = 0;
    w->nvals = 0;
}

int w_open(struct writer *w, const char *path, u64 flush_ms) {
    memset(w, 0, sizeof *w);
    int fd = -1;
    int d = lp_dest(path, w->path, sizeof w->path, &fd, &w->why);
    if (d < 0) return d;
    if (d == 1) {
        w->through = 1;
    } else {
        size_t n = lp_strlen(w->path);
        memcpy(w->part, w->path, n);
        memcpy(w->part + n, ".part", 6);
        long f = lp_open_temporary(w->part);
        if (f < 0) return (int)f;
        fd = (int)f;
    }
    w->fd = fd;
    buf_init(&w->chunk, 128 * 1024);
    w->flush_ns = (flush_ms ? flush_ms : 1000) * 1000000u;
    w->last_flush_ns = lp_clock_ns(LP_CLOCK_MONOTONIC);
    u8 prelude[12] = {'L', 'A', 'B', 'P', 'E', 'R', 'F', 0, 2, 0, 0, 0}; /* wire version 2 */
    out(w, prelude, 12);
    return 0;
}

void w_header(struct writer *w, const struct buf *h) { frame(w, 1, 0, h->p, h->len); }

void w_header_ext(struct writer *w, const struct buf *items) { frame(w, 4, 0, items->p, items->len); }

int w_finish(struct writer *w) {
    if (w->failed) return -1;
    if (w->through) { /* a device or FIFO has its bytes: nothing to sync or rename */
        SYS1(__NR_close, w->fd);
        return 0;
    }
    SYS1(__NR_fsync, w->fd);
    SYS1(__NR_close, w->fd);
    long r = SYS4(__NR_renameat, LP_AT_FDCWD, w->part, LP_AT_FDCWD, w->path);
    if (r < 0) {
        w->failed = 1;
        w->err = -r;
        return -1;
    }
    return 0;
}

void w_abandon(struct writer *w) {
    SYS1(__NR_close, w->fd);
    if (!w->through) SYS3(__NR_unlinkat, LP_AT_FDCWD, w->part, 0);
}

void w_flush(struct writer *w) {
    w->last_flush_ns = lp_clock_ns(LP_CLOCK_MONOTONIC);
    if (!w->chunk_records) return;
    frame(w, 2, w->chunk_records, w->chunk.p, w->chunk.len);
    w->frames++;
    w->records_before += w->chunk_records;
    reset_frame(w);
}

void w_tick(struct writer *w) {
    if (lp_clock_ns(LP_CLOCK_MONOTONIC) - w->last_flush_ns >= w->flush_ns) w_flush(w);
}

static void maybe_flush(struct writer *w) {
    if (w->chunk.len >= 64 * 1024) w_flush(w);
}

static u32 thread_index(struct writer *w, u32 pid, u32 tid) {
    if (w->last_thread < w->nthreads && w->threads[w->last_thread][0] == pid && w->threads[w->last_thread][1] == tid)
        return w->last_thread;
    for (u32 i = 0; i < w->nthreads; i++)
        if (w->threads[i][0] == pid && w->threads[i][1] == tid) return w->last_thread = i;
    buf_u8(&w->chunk, TAG_THREAD);
    buf_varint(&w->chunk, pid);
    buf_varint(&w->chunk, tid);
    w->threads[w->nthreads][0] = pid;
    w->threads[w->nthreads][1] = tid;
    return w->last_thread = w->nthreads++;
}

void w_sample(struct writer *w, const struct lp_sample *s) {
    if (w->nthreads == LP_MAX_THREADS) w_flush(w);
    u32 t = thread_index(w, s->pid, s->tid);
    u8 flags = 0;
    if (!w->have_thread || w->thread != t) flags |= 1;
    if (s->event != w->event) flags |= 2;
    if (s->cpu != w->cpu) flags |= 4;
    if (s->period != w->period) flags |= 8;
    if (s->nvalues) flags |= 0x10; /* VALUES: deltas from the previous sample's values */
    if (s->ncallchain) flags |= 0x20; /* CALLCHAIN: entries relative to ip */
    u64 extra = (s->has_raw ? 1 : 0) | (s->has_data_src ? 2 : 0) | (s->has_addr ? 4 : 0);
    if (extra) flags |= 0x40; /* EXTRA: bit 0 raw, bit 1 data_src, bit 2 addr */
    struct buf *c = &w->chunk;
    buf_u8(c, TAG_SAMPLE);
    buf_u8(c, flags);
    buf_zz(c, (i64)(s->ip - w->ip));
    buf_zz(c, (i64)(s->time - w->time));
    if (flags & 1) buf_varint(c, t);
    if (flags & 2) buf_varint(c, s->event);
    if (flags & 4) buf_varint(c, s->cpu);
    if (flags & 8) buf_zz(c, (i64)(s->period - w->period));
    if (s->nvalues) {
        buf_varint(c, s->nvalues);
        for (u32 i = 0; i < s->nvalues; i++) buf_zz(c, (i64)(s->values[i] - (i < w->nvals ? w->vals[i] : 0)));
        memcpy(w->vals, s->values, s->nvalues * 8);
        w->nvals = s->nvalues;
    }
    if (s->ncallchain) {
        buf_varint(c, s->ncallchain);
        for (u32 i = 0; i < s->ncallchain; i++) buf_zz(c, (i64)(s->callchain[i] - s->ip));
    }
    if (extra) {
        buf_varint(c, extra);
        if (s->has_raw) {
            buf_varint(c, s->raw_len);
            buf_bytes(c, s->raw, s->raw_len);
        }
        if (s->has_data_src) buf_varint(c, s->data_src);
        if (s->has_addr) {
            buf_zz(c, (i64)(s->addr - w->addr));
            w->addr = s->addr;
        }
    }
    w->have_thread = 1;
    w->thread = t;
    w->event = s->event;
    w->cpu = s->cpu;
    w->period = s->period;
    w->ip = s->ip;
    w->time = s->time;
    w->chunk_records++;
    maybe_flush(w);
}

void w_long(struct writer *w, u8 tag, const struct buf *body) {
    buf_u8(&w->chunk, tag);
    buf_varint(&w->chunk, body->len);
    buf_bytes(&w->chunk, body->p, body->len);
    w->chunk_records++;
    maybe_flush(w);
}

void w_trailer(struct writer *w, const struct buf *items, u64 samples, u64 lost, u64 throttled, u64 cpu_ns,
               u64 rss_kib, int exit_code, int exit_signal, u64 duration_ns) {
    w_flush(w);
    struct buf t;
    buf_init(&t, 128);
    buf_varint(&t, w->records_before); /* records */
    buf_varint(&t, w->frames);          /* frames */
    buf_varint(&t, samples);
    buf_varint(&t, lost);
    buf_varint(&t, throttled);
    buf_varint(&t, 0); /* dropped */
    buf_varint(&t, cpu_ns);
    buf_varint(&t, rss_kib);
    if (exit_signal) {
        buf_u8(&t, 0); /* code: None */
        buf_u8(&t, 1);
        buf_zz(&t, exit_signal);
    } else {
        buf_u8(&t, 1);
        buf_zz(&t, exit_code);
        buf_u8(&t, 0);
    }
    buf_varint(&t, duration_ns);
    if (items) buf_bytes(&t, items->p, items->len); /* the trailer extension */
    frame(w, 3, 0, t.p, t.len);
}
