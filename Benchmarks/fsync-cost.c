// What the store's system calls cost on this machine, per turn: open the
// journal (O_APPEND), write four lines, fsync, close, many rounds, medians.
// Wall time of each call, and the CPU time the process is charged (user +
// kernel) for the fsync and for the four calls together: the one-delta turn's
// target is server CPU, and this is the part of it no change to the server
// can remove while the answer waits for the fsync (Benchmarks/README.md,
// "Session 6: the round trip").
//
//   cc -O2 -o /tmp/fsync-cost Benchmarks/fsync-cost.c
//   /tmp/fsync-cost ~/.local/state/agentrpc 2000     # a directory on the store's filesystem, rounds
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double micros(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// Sorts `v` in place; the value at fraction `p` of the way (0.5: the median).
static double at(double *v, int n, double p) {
    qsort(v, n, sizeof *v, ascending);
    return v[(int)(n * p)];
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : ".";
    int n = argc > 2 ? atoi(argv[2]) : 2000;
    if (n < 1) n = 1;
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync-cost.jsonl", dir);
    unlink(path);
    // Four lines of a one-delta turn's size (~600 bytes in all).
    char line[150];
    memset(line, 'x', sizeof line);
    line[sizeof line - 1] = '\n';
    double *open_wall = malloc(n * sizeof(double)), *write_wall = malloc(n * sizeof(double));
    double *fsync_wall = malloc(n * sizeof(double)), *close_wall = malloc(n * sizeof(double));
    double *all_wall = malloc(n * sizeof(double)), *fsync_cpu = malloc(n * sizeof(double)), *all_cpu = malloc(n * sizeof(double));
    if (!open_wall || !write_wall || !fsync_wall || !close_wall || !all_wall || !fsync_cpu || !all_cpu) return 1;
    for (int i = 0; i < n; i++) {
        double c0 = micros(CLOCK_PROCESS_CPUTIME_ID), t0 = micros(CLOCK_MONOTONIC);
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        double t1 = micros(CLOCK_MONOTONIC);
        if (fd < 0) { perror("open"); return 1; }
        for (int k = 0; k < 4; k++)
            if (write(fd, line, sizeof line) < 0) { perror("write"); return 1; }
        double t2 = micros(CLOCK_MONOTONIC), c2 = micros(CLOCK_PROCESS_CPUTIME_ID);
        if (fsync(fd) != 0) { perror("fsync"); return 1; }
        double c3 = micros(CLOCK_PROCESS_CPUTIME_ID), t3 = micros(CLOCK_MONOTONIC);
        close(fd);
        double t4 = micros(CLOCK_MONOTONIC), c4 = micros(CLOCK_PROCESS_CPUTIME_ID);
        open_wall[i] = t1 - t0; write_wall[i] = t2 - t1; fsync_wall[i] = t3 - t2; close_wall[i] = t4 - t3;
        all_wall[i] = t4 - t0; fsync_cpu[i] = c3 - c2; all_cpu[i] = c4 - c0;
    }
    unlink(path);
    printf("rounds %d in %s (wall medians; fsync p10 and p90 beside it)\n", n, dir);
    printf("open       %.1f us\n", at(open_wall, n, 0.5));
    printf("4 writes   %.1f us\n", at(write_wall, n, 0.5));
    double median = at(fsync_wall, n, 0.5);
    printf("fsync      %.1f us (p10 %.1f, p90 %.1f)\n", median, at(fsync_wall, n, 0.1), at(fsync_wall, n, 0.9));
    printf("close      %.1f us\n", at(close_wall, n, 0.5));
    printf("all four   %.1f us\n", at(all_wall, n, 0.5));
    printf("CPU charged: fsync %.1f us, all four %.1f us (medians)\n", at(fsync_cpu, n, 0.5), at(all_cpu, n, 0.5));
    return 0;
}
