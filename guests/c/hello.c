/* hello: the smallest real WASI command, for warm-run benchmarks: writes "hello, world\n" and exits 0. */
#include <unistd.h>

int main(void) {
    static const char msg[] = "hello, world\n";
    return write(STDOUT_FILENO, msg, sizeof msg - 1) == (ssize_t)(sizeof msg - 1) ? 0 : 1;
}
