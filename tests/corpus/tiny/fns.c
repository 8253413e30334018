/* The tiny program's functions (tests/corpus/tiny): main -> fn_a, main -> fn_b -> fn_c, each
 * timing itself with the process's CPU clock. Its executable segment stays under 2 KiB in
 * one page (the layout tests/tests/unwinding.rs is about): keep it small. */
#include <time.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
double t_a, t_b, t_c;
volatile unsigned long sink;
__attribute__((noinline)) void fn_a(unsigned long n) {
    double t0 = now();
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
    t_a += now() - t0;
}
__attribute__((noinline)) void fn_c(unsigned long n) {
    double t0 = now();
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++) x = x * 2862933555777941757UL + 3037000493UL;
    sink = x;
    t_c += now() - t0;
}
__attribute__((noinline)) void fn_b(unsigned long n) {
    double t0 = now();
    unsigned long x = sink;
    for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + 1442695040888963407UL;
    sink = x;
    fn_c(n);
    t_b += now() - t0;
}
