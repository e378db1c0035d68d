/* readfile PATH [BUFSIZE]: read PATH to its end with read() calls of BUFSIZE bytes (default 65536),
 * then print "BYTES CHECKSUM" (the sum of every 4096th byte, so the loop is I/O, not hashing).
 * For read-throughput benchmarks. Exit status 1 if the file cannot be opened or read. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: readfile PATH [BUFSIZE]\n");
        return 2;
    }
    long size = argc > 2 ? strtol(argv[2], NULL, 10) : 65536;
    if (size <= 0) size = 65536;
    unsigned char *buf = malloc((size_t)size);
    int fd = open(argv[1], O_RDONLY);
    if (buf == NULL || fd < 0) {
        fprintf(stderr, "readfile: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    long long total = 0;
    unsigned long long sum = 0;
    for (;;) {
        ssize_t n = read(fd, buf, (size_t)size);
        if (n < 0) {
            fprintf(stderr, "readfile: %s: %s\n", argv[1], strerror(errno));
            return 1;
        }
        if (n == 0) break;
        for (ssize_t i = (ssize_t)((4096 - total % 4096) % 4096); i < n; i += 4096) sum += buf[i];
        total += n;
    }
    printf("%lld %llu\n", total, sum);
    return 0;
}
