/* spew TARGET COUNT SIZE [IOVS]: COUNT writev calls to TARGET (1 stdout, 2 stderr, or a file path it
 * creates or truncates), each of IOVS iovecs (default 1) that all point at one SIZE-byte buffer: write
 * number i repeats the letter 'a' + i % 26, its last byte '\n'. So one write puts IOVS * SIZE bytes on
 * TARGET. For output caps on either stream, and for a write whose iovecs name the same memory many
 * times over. A short write is continued, as stdio does (wasmtime's own WASI writes one buffer of
 * several to stdout per call). Exit status 2 for bad arguments, 1 if the file cannot be opened or a
 * write fails. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

static long number(const char *text, long least, long most) {
    char *end;
    long n = strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || n < least || n > most) exit(2);
    return n;
}

/* Write all of iov[0..n) (which it changes): 0, or -1 if a write fails or writes nothing. */
static int write_all(int fd, struct iovec *iov, int n) {
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w <= 0) return -1;
        for (; n > 0 && (size_t)w >= iov->iov_len; iov++, n--) w -= (ssize_t)iov->iov_len;
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) return 2;
    int fd = strcmp(argv[1], "1") == 0 ? 1 : strcmp(argv[1], "2") == 0 ? 2 : -1;
    if (fd < 0 && (fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644)) < 0) return 1;
    long count = number(argv[2], 0, 1L << 30);
    long size = number(argv[3], 1, 1L << 26);
    long iovs = argc > 4 ? number(argv[4], 1, 1024) : 1;
    char *buf = malloc((size_t)size);
    struct iovec *iov = malloc(sizeof *iov * (size_t)iovs);
    if (buf == NULL || iov == NULL) return 1;
    for (long i = 0; i < count; i++) {
        memset(buf, 'a' + (int)(i % 26), (size_t)size);
        buf[size - 1] = '\n';
        for (long j = 0; j < iovs; j++) iov[j] = (struct iovec){buf, (size_t)size};
        if (write_all(fd, iov, (int)iovs) != 0) return 1;
    }
    return 0;
}
