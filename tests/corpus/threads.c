/* A multi-threaded program: three worker threads (int, float and memory work), each timing
 * its functions with its own thread's CPU clock, while main does some work of its own;
 * then main prints the sums over the threads with the process's CPU time:
 *   start_thread (libc) -> worker -> crunch_int | crunch_float | crunch_mem
 *   main -> main_work
 * argv[1]: rounds per worker. Prints "split total T name t ...". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "clock.h"

#define NOINLINE __attribute__((noinline))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double t_worker, t_int, t_float, t_mem;
static volatile unsigned long sink;

NOINLINE unsigned long crunch_int(unsigned long x, int n) {
    for (int i = 0; i < n; i++) x = x * 6364136223846793005UL + (x >> 17);
    return x;
}

NOINLINE double crunch_float(double x, int n) {
    for (int i = 0; i < n; i++) x = x * 0.999999 + 1.0 / (x + 1.5);
    return x;
}

NOINLINE unsigned long crunch_mem(unsigned *buf, int size, int n) {
    unsigned long s = 0;
    unsigned at = 1;
    for (int i = 0; i < n; i++) {
        at = (at * 1103515245u + 12345u) % size;
        s += buf[at]++;
    }
    return s;
}

/* Each worker does one kind of work, `rounds` blocks of it, each block timed. */
struct job { int kind, rounds; };

NOINLINE void *worker(void *arg) {
    struct job *j = arg;
    double start = THREAD_NOW(), own = 0;
    unsigned *buf = calloc(1 << 18, sizeof *buf);
    unsigned long x = 1;
    for (int r = 0; r < j->rounds; r++) {
        double t0 = THREAD_NOW();
        if (j->kind == 0) x += crunch_int(x, 400000);
        else if (j->kind == 1) x += (unsigned long)crunch_float(x, 150000);
        else x += crunch_mem(buf, 1 << 18, 60000);
        own += THREAD_NOW() - t0;
    }
    free(buf);
    sink += x;
    double total = THREAD_NOW() - start;
    pthread_mutex_lock(&lock);
    t_worker += total;
    *(j->kind == 0 ? &t_int : j->kind == 1 ? &t_float : &t_mem) += own;
    pthread_mutex_unlock(&lock);
    return 0;
}

static double t_main_work;

NOINLINE void main_work(int n) {
    double t0 = THREAD_NOW();
    unsigned long x = sink;
    for (int i = 0; i < n; i++) x = (x ^ (x >> 29)) * 0xbf58476d1ce4e5b9UL;
    sink += x;
    t_main_work += THREAD_NOW() - t0;
}

int main(int argc, char **argv) {
    double start = PROCESS_NOW(), main_start = THREAD_NOW();
    int rounds = argc > 1 ? atoi(argv[1]) : 40;
    pthread_t t[3];
    struct job jobs[3] = {{0, rounds}, {1, rounds}, {2, rounds}};
    for (int i = 0; i < 3; i++) pthread_create(&t[i], 0, worker, &jobs[i]);
    for (int r = 0; r < rounds; r++) main_work(200000);
    for (int i = 0; i < 3; i++) pthread_join(t[i], 0);
    printf("split total %.6f main_thread %.6f main_work %.6f worker %.6f crunch_int %.6f "
           "crunch_float %.6f crunch_mem %.6f\n",
           PROCESS_NOW() - start, THREAD_NOW() - main_start, t_main_work, t_worker, t_int,
           t_float, t_mem);
    return 0;
}
