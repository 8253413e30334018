/* The tiny program's main: 10 rounds of fn_a then fn_b (argv[1] iterations in all), then
 * the CPU-time split on one line (seconds). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
void fn_a(unsigned long); void fn_b(unsigned long);
extern double t_a, t_b, t_c;
int main(int argc, char **argv) {
    struct timespec a, b;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
    unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 100000000UL;
    for (int r = 0; r < 10; r++) { fn_a(n / 10); fn_b(n / 20); }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
    printf("split total %.6f fn_a %.6f fn_b %.6f fn_c %.6f\n",
           (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9, t_a, t_b, t_c);
    return 0;
}
