/* libwork.so: the shared library the `shared` program calls (tests/corpus/shared/main.c).
 * lib_checksum works alone; lib_walk calls the program back (visit, in the executable),
 * which calls lib_mix here again: stacks that cross the library and the program twice.
 * Each function keeps its own CPU-time counter, its callees included. */
#include "../clock.h"

double lib_t_checksum, lib_t_walk, lib_t_mix;

__attribute__((noinline)) unsigned long lib_checksum(const unsigned char *b, unsigned long n, int times) {
    double t0 = PROCESS_NOW();
    unsigned long h = 14695981039346656037UL;
    for (int k = 0; k < times; k++)
        for (unsigned long i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211UL;
    lib_t_checksum += PROCESS_NOW() - t0;
    return h;
}

__attribute__((noinline)) unsigned long lib_mix(unsigned long x, unsigned long n) {
    double t0 = PROCESS_NOW();
    for (unsigned long i = 0; i < n; i++) x = (x ^ (x >> 31)) * 0x7fb5d329728ea185UL + i;
    lib_t_mix += PROCESS_NOW() - t0;
    return x;
}

__attribute__((noinline)) unsigned long lib_walk(unsigned long (*visit)(unsigned long, unsigned long),
                                                 unsigned long seed, int chunks, unsigned long n) {
    double t0 = PROCESS_NOW();
    unsigned long x = seed;
    for (int c = 0; c < chunks; c++) {
        for (unsigned long i = 0; i < n; i++) x = x * 2862933555777941757UL + 3037000493UL;
        x = visit(x, n);
    }
    lib_t_walk += PROCESS_NOW() - t0;
    return x;
}
