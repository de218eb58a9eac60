/* A process that allocates with whatever malloc it is linked or preloaded with (glibc's, musl's, jemalloc...):
 * 1,000 small blocks held by a global, then "ready PID" on stdout, and it waits to be dumped.  The native-heap
 * tests dump it under other allocators than glibc's (tests/oracle/test_native_foreign.py). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void) {
    static void *keep[1000];
    for (int i = 0; i < 1000; i++) { keep[i] = malloc(16 + i); memset(keep[i], 1, 16); }
    char line[64]; int n = snprintf(line, sizeof line, "ready %d\n", (int)getpid());
    write(1, line, n);
    for (;;) pause();
}
