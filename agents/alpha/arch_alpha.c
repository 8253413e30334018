/* arch_alpha.c: Alpha entry point and system call stub (agent.c, sys.h and bench.c have `#ifdef __alpha__` blocks too). */
#include "sys.h"

int lp_main(long argc, char **argv, char **envp);

/* The kernel starts us with $sp pointing at argc (a 64-bit slot), then argv[], NULL, envp[].
 * $gp must be set before any C code runs: branch-to-self gives our address, ldgp derives $gp. */
__asm__(
    ".text\n"
    ".globl _start\n"
    ".ent _start\n"
    "_start:\n"
    "  br $29, 1f\n"
    "1: ldgp $29, 0($29)\n"
    "  mov $30, $16\n"
    "  lda $27, lp_cstart\n"
    "  jsr $26, ($27), lp_cstart\n"
    "  call_pal 0\n"
    ".end _start\n");

void lp_cstart(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    lp_exit(lp_main(argc, argv, argv + argc + 1));
}

/* callsys: number in $0, arguments in $16..$21; the result comes back in $0 with $19 (a3)
 * non-zero when it is an error number. Clobbers follow glibc's Alpha sysdep. */
long lp_syscall6(long n, long a, long b, long c, long d, long e, long f) {
    register long v0 __asm__("$0") = n;
    register long a0 __asm__("$16") = a;
    register long a1 __asm__("$17") = b;
    register long a2 __asm__("$18") = c;
    register long a3 __asm__("$19") = d;
    register long a4 __asm__("$20") = e;
    register long a5 __asm__("$21") = f;
    __asm__ volatile("callsys"
                     : "+r"(v0), "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+r"(a4), "+r"(a5)
                     :
                     : "$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$22", "$23", "$24", "$25",
                       "$27", "$28", "memory");
    return a3 ? -v0 : v0;
}
