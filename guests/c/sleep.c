/* sleep MS: sleep MS milliseconds (nanosleep: one poll_oneoff clock subscription), then print
 * "slept MS". For the deadline and kill while a guest sleeps. Exit status 2 without MS. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: sleep MS\n");
        return 2;
    }
    long ms = strtol(argv[1], NULL, 10);
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    if (nanosleep(&t, NULL) != 0) {
        perror("sleep");
        return 1;
    }
    printf("slept %ld\n", ms);
    return 0;
}
