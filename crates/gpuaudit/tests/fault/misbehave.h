/* How a fake misbehaves, shared by the fake libraries and programs of the fault-injection
 * suite (crates/gpuaudit/tests/fault.rs). Each fake reads its mode from an environment
 * variable; GPUAUDIT_FAULT_DIR is where it leaves marker files for the test. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Hundreds of MB: a parent that buffered this would blow the test's memory limit. */
#define FLOOD_BYTES (300L << 20)

static inline const char *fault_mode(const char *var) {
    const char *m = getenv(var);
    return m ? m : "good";
}

static inline int fault_is(const char *var, const char *mode) {
    return strcmp(fault_mode(var), mode) == 0;
}

/* Leaves DIR/<what>-<pid>: the test waits for it (the fake is inside the call now). */
static inline void fault_mark(const char *what) {
    const char *dir = getenv("GPUAUDIT_FAULT_DIR");
    if (!dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%d", dir, what, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
}

static inline void fault_hang(void) {
    for (;;) pause();
}

static inline void fault_crash(const char *how) {
    if (strcmp(how, "segv") == 0) {
        volatile int *p = (volatile int *)0;
        *p = 1;
    }
    abort();
}

/* A background child that keeps stdout and stderr open for five minutes. */
static inline void fault_fork_holder(void) {
    pid_t p = fork();
    if (p == 0) {
        fault_mark("holder");
        sleep(300);
        _exit(0);
    }
}

static inline void fault_flood(int fd) {
    static char buf[1 << 16];
    memset(buf, 'x', sizeof buf);
    for (long n = 0; n < FLOOD_BYTES; n += (long)sizeof buf) {
        if (write(fd, buf, sizeof buf) < 0) return;
    }
}

/* The misbehaviours every fake shares; returns only for the modes it does not handle. */
static inline void fault_common(const char *var, const char *where) {
    const char *m = fault_mode(var);
    fault_mark(where);
    if (strcmp(m, "hang") == 0) fault_hang();
    if (strcmp(m, "segv") == 0 || strcmp(m, "abort") == 0) fault_crash(m);
    if (strcmp(m, "fork") == 0) fault_fork_holder();
    if (strcmp(m, "flood") == 0) {
        fault_flood(1);
        fault_flood(2);
    }
}
