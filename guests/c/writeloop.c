/* writeloop N: N calls of write(1, "x", 1) (one fd_write of one byte each), for per-call benchmarks.
 * N defaults to 1000. Exit status 1 if a write fails. */
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
    for (long i = 0; i < n; i++) {
        if (write(STDOUT_FILENO, "x", 1) != 1) return 1;
    }
    return 0;
}
