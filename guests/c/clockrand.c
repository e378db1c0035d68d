/* clockrand: use the WASI clocks and random source and check what can be checked without knowing
 * the values: the realtime clock is after 2020, the monotonic clock never goes back and advances
 * across a 1 ms sleep (poll_oneoff), both resolutions are positive, two 32-byte getentropy draws
 * differ and are not all zero. Prints "clock ok", "sleep ok", "random ok" (or what failed, exit 1).
 * With -v it also prints the values read (nondeterministic unless the host fixes them). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int verbose = 0, failed = 0;

static void check(int ok, const char *what) {
    if (!ok) {
        printf("FAILED: %s\n", what);
        failed = 1;
    }
}

static long long ns(const struct timespec *t) {
    return (long long)t->tv_sec * 1000000000LL + t->tv_nsec;
}

int main(int argc, char **argv) {
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    struct timespec real, mono1, mono2, res_real, res_mono;
    check(clock_gettime(CLOCK_REALTIME, &real) == 0, "clock_gettime(REALTIME)");
    check(clock_gettime(CLOCK_MONOTONIC, &mono1) == 0, "clock_gettime(MONOTONIC)");
    check(clock_getres(CLOCK_REALTIME, &res_real) == 0 && ns(&res_real) > 0, "clock_getres(REALTIME) > 0");
    check(clock_getres(CLOCK_MONOTONIC, &res_mono) == 0 && ns(&res_mono) > 0, "clock_getres(MONOTONIC) > 0");
    check(real.tv_sec > 1577836800, "realtime is after 2020-01-01");
    if (!failed) printf("clock ok\n");
    struct timespec nap = {0, 1000000};
    check(nanosleep(&nap, NULL) == 0, "nanosleep 1 ms");
    check(clock_gettime(CLOCK_MONOTONIC, &mono2) == 0, "clock_gettime(MONOTONIC) again");
    check(ns(&mono2) >= ns(&mono1) + 1000000, "monotonic advances by at least the 1 ms slept");
    if (!failed) printf("sleep ok\n");
    unsigned char a[32], b[32], zero[32] = {0};
    check(getentropy(a, sizeof a) == 0 && getentropy(b, sizeof b) == 0, "getentropy");
    check(memcmp(a, b, sizeof a) != 0, "two random draws differ");
    check(memcmp(a, zero, sizeof a) != 0, "a random draw is not all zero");
    if (!failed) printf("random ok\n");
    if (verbose) {
        printf("realtime %lld\nmonotonic %lld %lld\nres %lld %lld\nrandom ", ns(&real), ns(&mono1), ns(&mono2),
               ns(&res_real), ns(&res_mono));
        for (size_t i = 0; i < sizeof a; i++) printf("%02x", a[i]);
        printf("\n");
    }
    return failed;
}
