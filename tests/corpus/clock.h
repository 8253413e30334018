/* The corpus programs' own clock: the CPU time the process (or the calling thread) has
 * used, in seconds. Each timed function adds what it took, its callees included, to its
 * counter; the program prints them on one line the test reads as the known answer:
 *     split total T name t name t ...
 * (T: the process's CPU time from the start of main to the line.) */
#ifndef CORPUS_CLOCK_H
#define CORPUS_CLOCK_H
#include <time.h>

static inline double cpu_clock(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
#define PROCESS_NOW() cpu_clock(CLOCK_PROCESS_CPUTIME_ID)
#define THREAD_NOW() cpu_clock(CLOCK_THREAD_CPUTIME_ID)

#endif
