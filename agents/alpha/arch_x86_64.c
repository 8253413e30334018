/* arch_x86_64.c: x86_64 entry point and system call stub, so the portable agent runs natively. */
#include "sys.h"

int lp_main(long argc, char **argv, char **envp);

__asm__(
    ".text\n"
    ".globl _start\n"
    "_start:\n"
    "  xor %rbp, %rbp\n"
    "  mov %rsp, %rdi\n"
    "  and $-16, %rsp\n"
    "  call lp_cstart\n"
    "  hlt\n");

void lp_cstart(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    lp_exit(lp_main(argc, argv, argv + argc + 1));
}

long lp_syscall6(long n, long a, long b, long c, long d, long e, long f) {
    long ret;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
