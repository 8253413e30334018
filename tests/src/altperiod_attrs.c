/* altperiod_attrs.c: asks an aarch64 kernel, by raw perf_event_open, what it does with
 * seed 004's RFC v2 attr fields (alternative_sample_period at offset 136, the jitter
 * flag after sigtrap). Freestanding (no libc: the cross compiler has no arm64 libc here);
 * built and run on the lab machines by tests/tests/lab_altperiod.rs.
 *
 * Prints one line per case: "<case> ok" or "<case> errno <N>", then for the cpu-clock
 * case the sampled periods ("periods: a b c ..."). */

typedef unsigned long u64;
typedef unsigned int u32;

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	register long x5 __asm__("x5") = f;
	__asm__ volatile("svc 0"
			 : "+r"(x0)
			 : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
			 : "memory");
	return x0;
}

#define SYS_write 64
#define SYS_close 57
#define SYS_ioctl 29
#define SYS_mmap 222
#define SYS_exit 93
#define SYS_perf_event_open 241
#define SYS_clock_gettime 113

#define PERF_TYPE_HARDWARE 0
#define PERF_TYPE_SOFTWARE 1
#define PERF_COUNT_HW_CPU_CYCLES 0
#define PERF_COUNT_SW_CPU_CLOCK 0
#define PERF_SAMPLE_PERIOD (1UL << 8)
#define PERF_EVENT_IOC_ENABLE 0x2400
#define PERF_EVENT_IOC_DISABLE 0x2401
#define PERF_RECORD_SAMPLE 9

/* Flag word bits (offset 40). */
#define F_DISABLED (1UL << 0)
#define F_EXCLUDE_KERNEL (1UL << 5)
#define F_EXCLUDE_HV (1UL << 6)
#define F_FREQ (1UL << 10)
#define F_JITTER (1UL << 38) /* RFC v2's jitter_alternate_period, after sigtrap (37) */

/* The attr as 8-byte words: 0 type|size, 1 config, 2 period/freq, 3 sample_type,
 * 4 read_format, 5 flags, ..., 16 config3 (offset 128), 17 alternative_sample_period
 * (offset 136), 18 one word past the RFC's 144 bytes. */
static u64 attr[19];

static void put(const char *s)
{
	long n = 0;
	while (s[n])
		n++;
	sys6(SYS_write, 1, (long)s, n, 0, 0, 0);
}

static void put_num(u64 v)
{
	char b[24];
	int i = 23;
	b[i] = 0;
	do {
		b[--i] = '0' + v % 10;
		v /= 10;
	} while (v);
	put(b + i);
}

static void reset(u64 type, u64 config, u32 size)
{
	for (int i = 0; i < 19; i++)
		attr[i] = 0;
	attr[0] = type | ((u64)size << 32);
	attr[1] = config;
	attr[5] = F_DISABLED | F_EXCLUDE_KERNEL | F_EXCLUDE_HV;
}

/* Opens the attr on this thread. On E2BIG the kernel writes its own attr size into the
 * attr: the size word is put back, so each case is asked with the size it was made with. */
static long open_attr(void)
{
	u64 w0 = attr[0];
	long fd = sys6(SYS_perf_event_open, (long)attr, 0, -1, -1, 0, 0);
	attr[0] = w0;
	return fd;
}

/* Opens the attr as it stands; prints "<name> ok" or "<name> errno N". */
static void check(const char *name)
{
	long fd = open_attr();
	put(name);
	if (fd >= 0) {
		put(" ok\n");
		sys6(SYS_close, fd, 0, 0, 0, 0, 0);
	} else {
		put(" errno ");
		put_num(-fd);
		put("\n");
	}
}

static u64 now_ns(void)
{
	long ts[2];
	sys6(SYS_clock_gettime, 1, (long)ts, 0, 0, 0, 0);
	return (u64)ts[0] * 1000000000UL + ts[1];
}

/* cpu-clock (an hrtimer event) with an alternative period: samples for 300 ms and prints
 * the sampled periods (the series' code leaves them all at the first period). */
static void cpu_clock(void)
{
	reset(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 144);
	attr[2] = 2000000; /* 2 ms */
	attr[17] = 200000; /* 0.2 ms */
	attr[3] = PERF_SAMPLE_PERIOD;
	long fd = open_attr();
	if (fd < 0) {
		put("cpu-clock errno ");
		put_num(-fd);
		put("\n");
		return;
	}
	long pages = 1 + 16;
	unsigned char *ring = (unsigned char *)sys6(SYS_mmap, 0, pages * 4096, 3, 1, fd, 0);
	if ((long)ring < 0 && (long)ring > -4096) {
		put("cpu-clock mmap errno ");
		put_num(-(long)ring);
		put("\n");
		return;
	}
	sys6(SYS_ioctl, fd, PERF_EVENT_IOC_ENABLE, 0, 0, 0, 0);
	u64 t = now_ns();
	volatile u64 x = 1;
	while (now_ns() - t < 300000000UL)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005UL + 1;
	sys6(SYS_ioctl, fd, PERF_EVENT_IOC_DISABLE, 0, 0, 0, 0);
	put("cpu-clock ok\nperiods:");
	u64 head = *(volatile u64 *)(ring + 1024); /* data_head */
	__asm__ volatile("dmb ish" ::: "memory");
	unsigned char *data = ring + 4096;
	u64 size = 16 * 4096;
	for (u64 pos = 0; pos + 8 <= head && pos < size;) {
		u32 type = *(u32 *)(data + pos % size);
		unsigned short len = *(unsigned short *)(data + (pos + 6) % size);
		if (len == 0)
			break;
		if (type == PERF_RECORD_SAMPLE && len >= 16) {
			put(" ");
			put_num(*(u64 *)(data + (pos + 8) % size));
		}
		pos += len;
	}
	put("\n");
	sys6(SYS_close, fd, 0, 0, 0, 0, 0);
}

void _start(void)
{
	/* The strobing attr labperf's agent opens: a long period, a short alternative. */
	reset(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 144);
	attr[2] = 1000000;
	attr[17] = 300;
	check("alternating");
	attr[5] |= F_JITTER;
	check("alternating+jitter");
	/* An alternative period equal to the period switches alternation off: accepted. */
	attr[5] &= ~F_JITTER;
	attr[17] = 1000000;
	check("equal-periods");
	/* Refused as the series says. */
	attr[17] = 300;
	attr[5] |= F_FREQ;
	attr[2] = 1000; /* sample_freq */
	check("freq+alternative");
	reset(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 144);
	attr[17] = 300; /* sample_period 0: a counting event */
	check("no-period+alternative");
	attr[2] = 1000000;
	attr[17] = 1UL << 63;
	check("alternative-bit63");
	attr[17] = 0;
	attr[5] |= F_JITTER;
	check("jitter-without-alternative");
	/* config3 (offset 128) exists but no 6.1 PMU reads it: refused when non-zero. */
	reset(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 144);
	attr[2] = 1000000;
	attr[16] = 1;
	check("config3");
	/* The attr is 144 bytes: a non-zero byte past it is E2BIG, zeros are accepted. */
	reset(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, 152);
	attr[2] = 1000000;
	check("size152-zero");
	attr[18] = 1;
	check("size152-nonzero");
	cpu_clock();
	sys6(SYS_exit, 0, 0, 0, 0, 0, 0);
	for (;;)
		;
}
