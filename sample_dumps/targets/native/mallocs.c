/* The native-heap target (issue 48): glibc malloc in every state a core can hold it, and what the allocator itself
 * says of it at the moment of the dump.
 *
 *   mallocs OUT [THREADS [EXTRA]]
 *
 * Each of THREADS threads (default 4; each gets its own arena) and the main thread (the main arena) allocate blocks
 * that stay in use, fill the tcache and the fastbins, leave chunks in the unsorted, small and large bins, take
 * mmapped chunks, leak blocks (no pointer left anywhere) and hold blocks only through other blocks (a list whose head
 * is a global) or only from their stack.  The process then writes to OUT, a JSON Lines file:
 *   {"block": ADDRESS, "usable": malloc_usable_size, "state": "live"|"freed"|"leaked"|"held"|"stack", "thread": N}
 *   {"thread": N, "tid": OS THREAD ID, "thread_pointer": ADDRESS}   (each thread's TLS pointer: its TCB)
 *   {"mallinfo2": {the ten fields}}
 *   malloc_info:
 *   the XML malloc_info(0) prints, to the end of the file
 * then prints "ready PID" on stdout and waits to be dumped.  OUT is unbuffered and opened before the first block:
 * taking the measurement allocates nothing.  The ledger is a root itself, so once written every pointer in it that
 * must not hold its block (freed, leaked) is stored inverted.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BLOCKS 20000
enum { LIVE, FREED, LEAKED, HELD, STACK };
static const char *STATES[] = {"live", "freed", "leaked", "held", "stack"};

static uintptr_t ledger[MAX_BLOCKS];  /* the pointer (inverted once written when it must not hold its block) */
static size_t usable[MAX_BLOCKS];
static int state[MAX_BLOCKS], owner_thread[MAX_BLOCKS];
static int n_blocks;
static uintptr_t thread_pointers[64];
static long tids[64];

static void note_thread(int t)
{
    thread_pointers[t] = (uintptr_t)__builtin_thread_pointer();
    tids[t] = gettid();
}
static pthread_mutex_t ledger_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t allocated, measured;
static FILE *out;

struct node { struct node *next; char payload[40]; };
static struct node *lists[64];        /* a list per thread: only the head is held by a global */
static void *live_blocks[MAX_BLOCKS]; /* the live blocks: held by this global */
static int n_live;
static void **extras[64];             /* EXTRA more blocks per thread, not in the ledger */
static long extra;

static int record(void *p, int st, int thread)
{
    pthread_mutex_lock(&ledger_lock);
    int i = n_blocks++;
    ledger[i] = (uintptr_t)p;
    usable[i] = malloc_usable_size(p);
    state[i] = st;
    owner_thread[i] = thread;
    if (st == LIVE)
        live_blocks[n_live++] = p;
    pthread_mutex_unlock(&ledger_lock);
    return i;
}

/* a block freed, and the slot that held it cleared: a block allocated later may take its place */
static void freed(void **slot, int thread)
{
    record(*slot, FREED, thread);
    free(*slot);
    *(void *volatile *)slot = NULL;
}

/* a block leaked on purpose: filled with bytes that are no pointer, its address kept only (inverted) in the ledger */
static __attribute__((noinline)) void leak(size_t size, int thread)
{
    void *p = malloc(size);
    memset(p, 0x41, size);
    record(p, LEAKED, thread);
}

/* two leaked blocks, the second reached only from the first */
static __attribute__((noinline)) void leak_chain(int thread)
{
    void **a = malloc(64), **b = malloc(200);
    memset(a, 0x42, 64);
    memset(b, 0x43, 200);
    a[0] = b;
    record(a, LEAKED, thread);
    record(b, LEAKED, thread);
}

static const size_t LIVE_SIZES[] = {24, 40, 100, 200, 500, 1000, 3000, 20000, 70000};

static void *work(void *arg)
{
    int t = (int)(intptr_t)arg;
    void *guards[64];
    int g = 0;
    /* in use: many sizes, and two mmapped chunks */
    for (int i = 0; i < 120; i++) {
        void *p = malloc(LIVE_SIZES[i % 9] + t);
        memset(p, 0, 8);
        record(p, LIVE, t);
    }
    for (int i = 0; i < 2; i++)
        record(malloc(200000 + 4096 * t + i), LIVE, t);
    /* unsorted, small and large bins: chunks too big for the tcache, or of a size whose tcache bin is full,
     * separated by live guards so that they do not coalesce; a larger request then sorts the unsorted ones */
    void *big[6], *mid[10];
    for (int i = 0; i < 6; i++) {
        big[i] = malloc(1500 + 1000 * i);
        guards[g++] = malloc(24);
    }
    for (int i = 0; i < 10; i++) {
        mid[i] = malloc(600);
        guards[g++] = malloc(24);
    }
    for (int i = 0; i < 6; i++)
        freed(&big[i], t);
    for (int i = 0; i < 10; i++)
        freed(&mid[i], t);       /* 7 to the tcache, 3 to the unsorted bin */
    record(malloc(9000), LIVE, t);  /* sorts the unsorted chunks into the small and large bins */
    void *late = malloc(2500);
    guards[g++] = malloc(24);
    freed(&late, t);             /* stays in the unsorted bin */
    for (int i = 0; i < g; i++)
        record(guards[i], LIVE, t);
    /* held only through other blocks, and only from this thread's stack */
    for (int i = 0; i < 10; i++) {
        struct node *n = malloc(sizeof *n);
        memset(n->payload, 0x44, sizeof n->payload);
        n->next = lists[t];
        lists[t] = n;
        record(n, HELD, t);
    }
    void *volatile on_stack = malloc(333);
    record(on_stack, STACK, t);
    /* leaked: no pointer left */
    for (int i = 0; i < 8; i++)
        leak(30 + 97 * i, t);
    leak(300000, t);            /* an mmapped one */
    leak_chain(t);
    /* the tcache (7 of two sizes) and the fastbins (10 more of one size: 7 to the tcache... already full: all 10) */
    void *small[7], *fast[10], *fast2[12];
    for (int i = 0; i < 7; i++)
        small[i] = malloc(100);
    for (int i = 0; i < 10; i++)
        fast[i] = malloc(48);
    for (int i = 0; i < 12; i++)
        fast2[i] = malloc(72);
    for (int i = 0; i < 7; i++)
        freed(&small[i], t);
    for (int i = 0; i < 10; i++)
        freed(&fast[i], t);      /* 7 to the tcache, 3 to the fastbin */
    for (int i = 0; i < 12; i++)
        freed(&fast2[i], t);     /* 7 to the tcache, 5 to the fastbin */
    if (extra) {
        extras[t] = malloc(sizeof(void *) * extra);
        for (long i = 0; i < extra; i++)
            extras[t][i] = malloc(16 + 16 * (i % 8));
    }
    note_thread(t);
    pthread_barrier_wait(&allocated);
    pthread_barrier_wait(&measured);
    for (;;)
        pause();
    return on_stack;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mallocs OUT [THREADS]\n");
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 4;
    if (threads < 0 || threads > 60)
        return 2;
    extra = argc > 3 ? atol(argv[3]) : 0;
    out = fopen(argv[1], "w");
    if (!out)
        return 1;
    setvbuf(out, NULL, _IONBF, 0);
    pthread_barrier_init(&allocated, NULL, threads + 1);
    pthread_barrier_init(&measured, NULL, threads + 1);
    pthread_t ids[64];
    for (int t = 1; t <= threads; t++) {
        pthread_create(&ids[t], NULL, work, (void *)(intptr_t)t);
        /* one thread at a time: each gets an arena of its own, and the ledger's order is the allocation order */
        usleep(20000);
    }
    {
        /* the main thread: the main arena */
        int t = 0;
        void *p[200];
        for (int i = 0; i < 200; i++) {
            p[i] = malloc(LIVE_SIZES[i % 9]);
            record(p[i], LIVE, t);
        }
        for (int i = 0; i < 8; i++)
            leak(50 + 101 * i, t);
        leak_chain(t);
        for (int i = 0; i < 200; i += 3) {
            /* its ledger entry becomes freed */
            for (int j = n_blocks - 1; j >= 0; j--)
                if (ledger[j] == (uintptr_t)p[i] && state[j] == LIVE) {
                    state[j] = FREED;
                    break;
                }
            free(p[i]);
            *(void *volatile *)&p[i] = NULL;
        }
    }
    note_thread(0);
    pthread_barrier_wait(&allocated);
    for (int i = 0; i < n_blocks; i++)
        fprintf(out, "{\"block\": %lu, \"usable\": %zu, \"state\": \"%s\", \"thread\": %d}\n",
                (unsigned long)ledger[i], usable[i], STATES[state[i]], owner_thread[i]);
    for (int t = 0; t <= threads; t++)
        fprintf(out, "{\"thread\": %d, \"tid\": %ld, \"thread_pointer\": %lu}\n", t, tids[t],
                (unsigned long)thread_pointers[t]);
    for (int i = 0; i < n_blocks; i++)
        if (state[i] != LIVE)  /* only the live list, the lists' heads and the stacks hold the others */
            ledger[i] = ~ledger[i];
    for (int i = 0; i < n_live; i++)  /* freed ones among the live list lose their pointer too */
        for (int j = 0; j < n_blocks; j++)
            if (~ledger[j] == (uintptr_t)live_blocks[i] && state[j] == FREED) {
                live_blocks[i] = (void *)~(uintptr_t)live_blocks[i];
                break;
            }
    struct mallinfo2 m = mallinfo2();
    fprintf(out, "{\"mallinfo2\": {\"arena\": %zu, \"ordblks\": %zu, \"smblks\": %zu, \"hblks\": %zu, \"hblkhd\": %zu, "
                 "\"usmblks\": %zu, \"fsmblks\": %zu, \"uordblks\": %zu, \"fordblks\": %zu, \"keepcost\": %zu}}\n",
            m.arena, m.ordblks, m.smblks, m.hblks, m.hblkhd, m.usmblks, m.fsmblks, m.uordblks, m.fordblks, m.keepcost);
    fputs("malloc_info:\n", out);
    malloc_info(0, out);
    pthread_barrier_wait(&measured);
    char line[64];
    int n = snprintf(line, sizeof line, "ready %d\n", (int)getpid());
    write(1, line, n);
    for (;;)
        pause();
}
