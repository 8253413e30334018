/* The two ends of a shell pipeline, one program started twice by `sh -c`:
 *   pipeline produce BLOCKS | pipeline consume
 * produce -> generate_block (each block of records computed, then written to stdout);
 * consume -> parse_block, checksum_block (each block read from stdin).
 * Each process prints its own "split total T name t ..." line on stderr. Each block is
 * worked on long enough that the pipe's reads and writes (kernel time, which the CPU clock
 * counts and user-mode samples do not see) stay well under a point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "clock.h"

#define NOINLINE __attribute__((noinline))
#define BLOCK 16384

static double t_produce, t_generate, t_consume, t_parse, t_checksum;
static volatile unsigned long sink;

NOINLINE void generate_block(unsigned char *b, unsigned long seed) {
    double t0 = PROCESS_NOW();
    unsigned long x = seed;
    for (int i = 0; i < BLOCK; i++) {
        for (int k = 0; k < 64; k++) x = x * 6364136223846793005UL + 1442695040888963407UL;
        b[i] = "0123456789 ,;\n"[(x >> 40) % 14];
    }
    t_generate += PROCESS_NOW() - t0;
}

NOINLINE void produce(int blocks) {
    double t0 = PROCESS_NOW();
    static unsigned char b[BLOCK];
    for (int n = 0; n < blocks; n++) {
        generate_block(b, n);
        if (fwrite(b, 1, BLOCK, stdout) != BLOCK) exit(1);
    }
    fflush(stdout);
    t_produce += PROCESS_NOW() - t0;
}

NOINLINE unsigned long parse_block(const unsigned char *b, size_t n) {
    double t0 = PROCESS_NOW();
    unsigned long fields = 0, value = 0;
    for (int pass = 0; pass < 80; pass++)
        for (size_t i = 0; i < n; i++) {
            if (b[i] >= '0' && b[i] <= '9') value = value * 10 + (b[i] - '0');
            else fields += value & 1, value = 0;
        }
    t_parse += PROCESS_NOW() - t0;
    return fields;
}

NOINLINE unsigned long checksum_block(const unsigned char *b, size_t n) {
    double t0 = PROCESS_NOW();
    unsigned long h = 0;
    for (int pass = 0; pass < 40; pass++)
        for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3UL;
    t_checksum += PROCESS_NOW() - t0;
    return h;
}

NOINLINE void consume(void) {
    double t0 = PROCESS_NOW();
    static unsigned char b[BLOCK];
    size_t n;
    while ((n = fread(b, 1, BLOCK, stdin)) > 0) sink += parse_block(b, n) + checksum_block(b, n);
    t_consume += PROCESS_NOW() - t0;
}

int main(int argc, char **argv) {
    double start = PROCESS_NOW();
    if (argc > 2 && !strcmp(argv[1], "produce")) {
        produce(atoi(argv[2]));
        fprintf(stderr, "split total %.6f produce %.6f generate_block %.6f\n",
                PROCESS_NOW() - start, t_produce, t_generate);
    } else if (argc > 1 && !strcmp(argv[1], "consume")) {
        consume();
        fprintf(stderr, "split total %.6f consume %.6f parse_block %.6f checksum_block %.6f\n",
                PROCESS_NOW() - start, t_consume, t_parse, t_checksum);
    } else {
        fprintf(stderr, "usage: pipeline produce BLOCKS | pipeline consume\n");
        return 2;
    }
    return 0;
}
