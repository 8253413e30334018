/* sys.h: the few system calls and libc-like helpers the freestanding C agent uses.
 * The architecture-specific part (syscall instruction, _start) is in arch_<arch>.c. */
#ifndef LP_SYS_H
#define LP_SYS_H

#include <asm/unistd.h>
#include <linux/perf_event.h>
#include <linux/stat.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t i64;
typedef uint64_t u64;
typedef uint32_t u32;
typedef int32_t i32;
typedef uint16_t u16;
typedef uint8_t u8;

/* arch_<arch>.c */
long lp_syscall6(long n, long a, long b, long c, long d, long e, long f);
#define SYS0(n) lp_syscall6(n, 0, 0, 0, 0, 0, 0)
#define SYS1(n, a) lp_syscall6(n, (long)(a), 0, 0, 0, 0, 0)
#define SYS2(n, a, b) lp_syscall6(n, (long)(a), (long)(b), 0, 0, 0, 0)
#define SYS3(n, a, b, c) lp_syscall6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define SYS4(n, a, b, c, d) lp_syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define SYS5(n, a, b, c, d, e) lp_syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)
#define SYS6(n, a, b, c, d, e, f) lp_syscall6(n, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), (long)(f))

/* Constants that are the same on x86_64 and Alpha Linux unless noted. */
#define LP_AT_FDCWD (-100)
#define LP_O_RDONLY 0
#define LP_O_WRONLY 01
#ifdef __alpha__
#define LP_O_WRONLY_CREAT_TRUNC (01 | 01000 | 02000) /* O_WRONLY|O_CREAT|O_TRUNC on Alpha */
#define LP_O_WRONLY_CREAT_EXCL (01 | 01000 | 04000)
#define LP_O_APPEND 010
#define LP_NR_GETEUID __NR_getxuid /* Alpha has none: getxuid's v0 is the real uid */
#define LP_O_CLOEXEC 010000000
#define LP_O_NONBLOCK 04
#define LP_O_NOCTTY 010000
#define LP_O_NOFOLLOW 0200000
#define LP_MAP_SHARED 0x01
#define LP_MAP_PRIVATE 0x02
#define LP_MAP_ANON 0x10
#define LP_SIGINT 2
#define LP_SIGKILL 9
#else
#define LP_O_WRONLY_CREAT_TRUNC (01 | 0100 | 01000)
#define LP_O_WRONLY_CREAT_EXCL (01 | 0100 | 0200)
#define LP_O_APPEND 02000
#define LP_NR_GETEUID __NR_geteuid
#define LP_O_CLOEXEC 02000000
#define LP_O_NONBLOCK 04000
#define LP_O_NOCTTY 0400
#define LP_O_NOFOLLOW 0400000
#define LP_MAP_SHARED 0x01
#define LP_MAP_PRIVATE 0x02
#define LP_MAP_ANON 0x20
#define LP_SIGINT 2
#define LP_SIGKILL 9
#endif
#define LP_PROT_READ 1
#define LP_PROT_WRITE 2
#define LP_POLLIN 1
#define LP_WNOHANG 1
#define LP_CLOCK_REALTIME 0
#define LP_CLOCK_MONOTONIC 1
#define LP_ENOENT 2
#define LP_ENOSYS 38
#define LP_ENODEV 19
#define LP_EACCES 13
#define LP_EPERM 1
#define LP_EINVAL 22
#define LP_EISDIR 21
#define LP_ENAMETOOLONG 36
#ifdef __alpha__
#define LP_ELOOP 62
#else
#define LP_ELOOP 40
#endif
#ifdef __alpha__
#define LP_EOPNOTSUPP 45
#else
#define LP_EOPNOTSUPP 95
#endif

struct lp_pollfd { int fd; short events, revents; };
struct lp_timespec { long tv_sec, tv_nsec; };
struct lp_timeval { long tv_sec, tv_usec; };
struct lp_rusage { struct lp_timeval ru_utime, ru_stime; long ru_maxrss, rest[13]; };
struct lp_utsname { char sysname[65], nodename[65], release[65], version[65], machine[65], domainname[65]; };

/* lib.c */
void *memcpy(void *d, const void *s, size_t n);
void *memset(void *d, int c, size_t n);
void *memmove(void *d, const void *s, size_t n);
int memcmp(const void *a, const void *b, size_t n);
size_t lp_strlen(const char *s);
int lp_streq(const char *a, const char *b);
int lp_startswith(const char *s, const char *prefix);
int lp_parse_u64(const char *s, u64 *out);
void lp_write_all(int fd, const void *buf, size_t n);
void lp_puts(int fd, const char *s);
void lp_putu(int fd, u64 v);
void lp_exit(int code) __attribute__((noreturn));
u64 lp_clock_ns(int clock);
long lp_read_file(const char *path, char *buf, size_t cap);
/* Where a file the agent writes goes (the record file, --status-file), the rule of the Rust
 * agent's dest.rs and the host's output.rs: a device or FIFO is written straight through
 * (1: *fd is open on it); a regular file or a new name is replaced through a temporary
 * beside it, symbolic links followed to the file they name (0: REAL, of CAP bytes, is that
 * file); anything else (a directory, a socket, a link to nothing, `-`) is refused (< 0,
 * *why says why when it is not an errno's). */
int lp_dest(const char *path, char *real, size_t cap, int *fd, const char **why);
/* Creates or empties TMP beside a file being replaced: never through a symbolic link, and
 * only a regular file. Returns the fd or -errno. */
long lp_open_temporary(const char *tmp);
void *lp_alloc(size_t n); /* bump allocator over anonymous mmap; never freed */

#endif
