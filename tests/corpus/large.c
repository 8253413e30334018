/* A larger C program: the kinds of work real programs do, each kernel timing itself with
 * the process's CPU clock (clock.h), its callees included:
 *   sort_records -> qsort (libc) -> cmp_record (called back from libc)
 *   hash_build   -> hash_clear -> memset (libc), hash_insert_all, hash_probe_all
 *   matmul
 *   word_count   -> next_token
 *   crc32_buf
 *   recurse      -> fib (recursive, 25 deep)
 *   vm_run       -> op_100 .. op_777 (a bytecode loop through a table of 448 generated
 *                   functions: the bulk of the binary's code)
 * argv[1]: rounds (each about 10 ms of CPU time). Prints "split total T name t ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"

#define NOINLINE __attribute__((noinline))

static double t_sort, t_hash, t_clear, t_insert, t_probe, t_matmul, t_words, t_crc, t_recurse, t_vm;
static volatile unsigned long sink;

/* --- sorting: libc's qsort calls back into this program --- */
struct record { unsigned key; unsigned payload[3]; };

NOINLINE int cmp_record(const void *a, const void *b) {
    const struct record *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

NOINLINE void sort_records(struct record *r, size_t n, unsigned seed) {
    double t0 = PROCESS_NOW();
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        r[i].key = seed >> 4;
    }
    qsort(r, n, sizeof *r, cmp_record);
    sink += r[n / 2].key;
    t_sort += PROCESS_NOW() - t0;
}

/* --- an open-addressing hash table --- */
#define HBITS 18
#define HMASK ((1UL << HBITS) - 1)
static unsigned long table[1 << HBITS];

static inline unsigned long mix(unsigned long k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdUL; k ^= k >> 33;
    return k;
}

NOINLINE void hash_clear(void) {
    double t0 = PROCESS_NOW();
    memset(table, 0, sizeof table);
    t_clear += PROCESS_NOW() - t0;
}

NOINLINE void hash_insert_all(unsigned long k, int n) {
    double t0 = PROCESS_NOW();
    for (int i = 0; i < n; i++) {
        k = k * 6364136223846793005UL + 1442695040888963407UL;
        unsigned long h = mix(k | 1) & HMASK;
        while (table[h]) h = (h + 1) & HMASK;
        table[h] = k | 1;
    }
    t_insert += PROCESS_NOW() - t0;
}

NOINLINE int hash_probe_all(unsigned long k, int n) {
    double t0 = PROCESS_NOW();
    int found = 0;
    for (int i = 0; i < n; i++, k += 0x9e3779b9) {
        unsigned long h = mix(k | 1) & HMASK;
        for (int probes = 0; probes < 16 && table[h]; probes++, h = (h + 1) & HMASK)
            if (table[h] == (k | 1)) { found++; break; }
    }
    t_probe += PROCESS_NOW() - t0;
    return found;
}

/* Its own time is only the calls: each callee keeps its own clock. */
NOINLINE void hash_build(unsigned long seed, int n) {
    double t0 = PROCESS_NOW();
    hash_clear();
    hash_insert_all(seed, n);
    sink += hash_probe_all(seed, 2 * n);
    t_hash += PROCESS_NOW() - t0;
}

/* --- dense linear algebra --- */
#define N 64
static double ma[N][N], mb[N][N], mc[N][N];

NOINLINE void matmul(void) {
    double t0 = PROCESS_NOW();
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < N; k++) s += ma[i][k] * mb[k][j];
            mc[i][j] = s;
        }
    sink += (unsigned long)mc[N / 2][N / 3];
    t_matmul += PROCESS_NOW() - t0;
}

/* --- text: words of a generated document --- */
static char text[1 << 16];

NOINLINE const char *next_token(const char *p, const char *end, size_t *len) {
    while (p < end && *p == ' ') p++;
    const char *s = p;
    while (p < end && *p != ' ') p++;
    *len = p - s;
    return p;
}

NOINLINE unsigned long word_count(void) {
    double t0 = PROCESS_NOW();
    const char *p = text, *end = text + sizeof text;
    unsigned long words = 0, letters = 0;
    size_t len;
    while ((p = next_token(p, end, &len)) < end || len) {
        if (!len) break;
        words++;
        letters += len;
    }
    t_words += PROCESS_NOW() - t0;
    return words ^ letters;
}

/* --- checksums --- */
static unsigned crc_table[256];

NOINLINE unsigned crc32_buf(const unsigned char *b, size_t n) {
    double t0 = PROCESS_NOW();
    unsigned c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ b[i]) & 0xff] ^ (c >> 8);
    t_crc += PROCESS_NOW() - t0;
    return c ^ 0xffffffffu;
}

/* --- recursion --- */
NOINLINE unsigned long fib(unsigned n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

NOINLINE void recurse(unsigned n) {
    double t0 = PROCESS_NOW();
    sink += fib(n);
    t_recurse += PROCESS_NOW() - t0;
}

/* --- a bytecode loop over 448 generated operations --- */
#define OP(n)                                                                       \
    NOINLINE unsigned long op_##n(unsigned long x) {                                \
        for (int i = 0; i < 3 + (n) % 5; i++)                                       \
            x = (x ^ (0x9e3779b97f4a7c15UL + (n))) * (2 * (n) + 1) + (x >> (1 + (n) % 29)); \
        return x;                                                                   \
    }
#define OP8(n) OP(n##0) OP(n##1) OP(n##2) OP(n##3) OP(n##4) OP(n##5) OP(n##6) OP(n##7)
#define OP64(n) OP8(n##0) OP8(n##1) OP8(n##2) OP8(n##3) OP8(n##4) OP8(n##5) OP8(n##6) OP8(n##7)
OP64(1) OP64(2) OP64(3) OP64(4) OP64(5) OP64(6) OP64(7)
#define REF(n) op_##n,
#define REF8(n) REF(n##0) REF(n##1) REF(n##2) REF(n##3) REF(n##4) REF(n##5) REF(n##6) REF(n##7)
#define REF64(n) REF8(n##0) REF8(n##1) REF8(n##2) REF8(n##3) REF8(n##4) REF8(n##5) REF8(n##6) REF8(n##7)
static unsigned long (*const ops[])(unsigned long) = {
    REF64(1) REF64(2) REF64(3) REF64(4) REF64(5) REF64(6) REF64(7)
};
#define NOPS (sizeof ops / sizeof ops[0])

NOINLINE void vm_run(const unsigned short *code, size_t n) {
    double t0 = PROCESS_NOW();
    unsigned long acc = sink;
    for (size_t pc = 0; pc < n; pc++) acc = ops[code[pc] % NOPS](acc);
    sink = acc;
    t_vm += PROCESS_NOW() - t0;
}

int main(int argc, char **argv) {
    /* The table's pages faulted in before the clock starts: kernel time, which the clock
     * would count in hash_clear and user-mode samples do not see. */
    memset(table, 1, sizeof table);
    double start = PROCESS_NOW();
    int rounds = argc > 1 ? atoi(argv[1]) : 40;
    size_t nrec = 6000;
    struct record *recs = malloc(nrec * sizeof *recs);
    unsigned short *code = malloc(20000 * sizeof *code);
    for (int i = 0; i < 20000; i++) code[i] = (unsigned short)(i * 7919u);
    for (unsigned i = 0; i < 256; i++) {
        unsigned c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) ma[i][j] = i + j, mb[i][j] = i - j;
    for (size_t i = 0; i < sizeof text; i++) text[i] = (i * 2654435761u) % 7 ? 'a' + i % 26 : ' ';
    unsigned long x = 0;
    /* Each kernel runs five times in a row: a block of a millisecond or more, longer than
     * the profilers' sampling period (a block shorter than the period gets a sample or none
     * by the phase of the round, which repeats). */
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 5; k++) sort_records(recs, nrec, 5 * r + k);
        for (int k = 0; k < 5; k++) hash_build(5 * r + k, 12000);
        for (int k = 0; k < 10; k++) matmul();
        for (int k = 0; k < 30; k++) x += word_count();
        for (int k = 0; k < 5; k++) x += crc32_buf((const unsigned char *)text, sizeof text);
        for (int k = 0; k < 5; k++) recurse(24);
        for (int k = 0; k < 5; k++) vm_run(code, 20000);
    }
    sink += x;
    printf("split total %.6f sort_records %.6f hash_build %.6f hash_clear %.6f "
           "hash_insert_all %.6f hash_probe_all %.6f matmul %.6f word_count %.6f crc32_buf %.6f "
           "recurse %.6f vm_run %.6f\n",
           PROCESS_NOW() - start, t_sort, t_hash, t_clear, t_insert, t_probe, t_matmul, t_words,
           t_crc, t_recurse, t_vm);
    free(recs);
    free(code);
    return 0;
}
