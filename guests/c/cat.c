/* cat: copy each named file (or stdin, or "-") to stdout, in 64 KiB reads.
 * A file that cannot be opened or read is reported on stderr and makes the exit status 1;
 * the other files are still copied. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char buf[65536];

static int copy(int fd, const char *name) {
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0) return 0;
        if (n < 0) {
            fprintf(stderr, "cat: %s: %s\n", name, strerror(errno));
            return 1;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(STDOUT_FILENO, buf + off, (size_t)(n - off));
            if (w < 0) {
                fprintf(stderr, "cat: write error: %s\n", strerror(errno));
                return 1;
            }
            off += w;
        }
    }
}

int main(int argc, char **argv) {
    int status = 0;
    if (argc < 2) return copy(STDIN_FILENO, "-");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-") == 0) {
            status |= copy(STDIN_FILENO, "-");
            continue;
        }
        int fd = open(argv[i], O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "cat: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        status |= copy(fd, argv[i]);
        close(fd);
    }
    return status;
}
