/* A tiny ELF whose functions carry C++ names with commas, for the report views' golden
 * test (tests/tests/views.rs). Built once and committed as cxx.elf:
 *   gcc -Os -nostdlib -static -fno-asynchronous-unwind-tables -Wl,--build-id=sha1 \
 *       -Wl,-z,noseparate-code -o cxx.elf cxx.c
 */
void map_find(void) __asm__("_ZNKSt3mapIiiSt4lessIiESaISt4pairIKiiEEE4findERS3_");
void map_find(void)
{
    for (volatile int i = 0; i < 100; i++)
        ;
}

void plain_c(void)
{
    for (volatile int i = 0; i < 100; i++)
        ;
}

void _start(void)
{
    map_find();
    plain_c();
    for (;;)
        ;
}
