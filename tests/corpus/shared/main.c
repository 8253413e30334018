/* The `shared` program: main calls libwork.so (lib.c) through the PLT: lib_checksum, and
 * lib_walk, which calls visit here back, which calls lib_mix in the library.
 * argv[1]: rounds. Prints "split total T name t ..." (the library's counters too). */
#include <stdio.h>
#include <stdlib.h>
#include "../clock.h"

unsigned long lib_checksum(const unsigned char *, unsigned long, int);
unsigned long lib_walk(unsigned long (*)(unsigned long, unsigned long), unsigned long, int, unsigned long);
unsigned long lib_mix(unsigned long, unsigned long);
extern double lib_t_checksum, lib_t_walk, lib_t_mix;

static double t_visit;
volatile unsigned long sink;

__attribute__((noinline)) unsigned long visit(unsigned long x, unsigned long n) {
    double t0 = PROCESS_NOW();
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    x = lib_mix(x, n);
    t_visit += PROCESS_NOW() - t0;
    return x;
}

int main(int argc, char **argv) {
    double start = PROCESS_NOW();
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    static unsigned char buf[1 << 16];
    for (unsigned i = 0; i < sizeof buf; i++) buf[i] = i * 31;
    unsigned long x = 0;
    for (int r = 0; r < rounds; r++) {
        x += lib_checksum(buf, sizeof buf, 20);
        x += lib_walk(visit, x, 4, 200000);
    }
    sink = x;
    printf("split total %.6f lib_checksum %.6f lib_walk %.6f visit %.6f lib_mix %.6f\n",
           PROCESS_NOW() - start, lib_t_checksum, lib_t_walk, t_visit, lib_t_mix);
    return 0;
}
