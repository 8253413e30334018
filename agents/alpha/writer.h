/* writer.h: the labperf record format (wire version 2), written as labperf-common's rustdoc specifies. */
#ifndef LP_WRITER_H
#define LP_WRITER_H
#include "sys.h"

struct buf {
    u8 *p;
    size_t len, cap;
};

void buf_init(struct buf *b, size_t cap);
void buf_u8(struct buf *b, u8 v);
void buf_bytes(struct buf *b, const void *p, size_t n);
void buf_varint(struct buf *b, u64 v);  /* LEB128 (postcard unsigned) */
void buf_zz(struct buf *b, i64 v);      /* zigzag + LEB128 (postcard signed) */
void buf_str(struct buf *b, const char *s); /* postcard String */
void buf_strn(struct buf *b, const char *s, size_t n);
u32 lp_crc32(const u8 *p, size_t n);

#define LP_MAX_THREADS 4096
#define LP_MAX_VALUES 64
#define LP_MAX_CALLCHAIN 512

struct writer {
    int fd;
    u32 seq, frames;
    u64 records_before, bytes;
    struct buf chunk;
    u32 chunk_records;
    u32 threads[LP_MAX_THREADS][2];
    u32 nthreads, last_thread;
    /* delta state, reset per frame */
    int have_thread;
    u32 thread, event, cpu;
    u64 period, ip, time, addr;
    u64 vals[LP_MAX_VALUES];
    u32 nvals;
    u64 last_flush_ns, flush_ns;
    int failed;
    long err; /* the errno of the failed write, if any */
    const char *why; /* why w_open refused the path, when not an errno's */
    /* PATH is the file replaced when complete (links resolved), written as PART; a device
     * or FIFO is written straight through: THROUGH is set and PATH, PART are empty. */
    int through;
    char path[512], part[520];
};

struct lp_sample {
    u32 event, pid, tid, cpu;
    u64 ip, time, period;
    /* PERF_SAMPLE_RAW, DATA_SRC and ADDR: written when present (the EXTRA flag). */
    const u8 *raw;
    u32 raw_len;
    int has_raw, has_data_src, has_addr;
    u64 data_src, addr;
    /* PERF_SAMPLE_READ group values (the VALUES flag when nvalues > 0). */
    u64 values[LP_MAX_VALUES];
    u32 nvalues;
    /* PERF_SAMPLE_CALLCHAIN entries, context markers left out (CALLCHAIN when ncallchain > 0). */
    u64 callchain[LP_MAX_CALLCHAIN];
    u32 ncallchain;
};

/* Opens PATH by lp_dest's rule: a regular file as PATH.part (beside the file a symbolic
 * link names), renamed to it by w_finish once the trailer is written; a device or FIFO
 * straight through. Returns 0 or -errno (w->why set for a refusal). */
int w_open(struct writer *w, const char *path, u64 flush_ms);
void w_header(struct writer *w, const struct buf *postcard_header);
/* The header-extension frame (kind 4): its items, each varint tag, varint length, body. */
void w_header_ext(struct writer *w, const struct buf *items);
int w_finish(struct writer *w);
void w_abandon(struct writer *w);
void w_sample(struct writer *w, const struct lp_sample *s);
void w_long(struct writer *w, u8 tag, const struct buf *body);
void w_flush(struct writer *w);
void w_tick(struct writer *w);
/* The trailer frame: the postcard Trailer, then `items` (the trailer extension's tagged
 * items, or none when null). */
void w_trailer(struct writer *w, const struct buf *items, u64 samples, u64 lost,
               u64 throttled, u64 cpu_ns, u64 rss_kib, int exit_code, int exit_signal, u64 duration_ns);

#define TAG_SAMPLE 0x00
#define TAG_THREAD 0x01
#define TAG_MMAP2 0x10
#define TAG_COMM 0x11
#define TAG_FORK 0x12
#define TAG_EXIT 0x13
#define TAG_LOST 0x14
#define TAG_THROTTLE 0x15
#endif
